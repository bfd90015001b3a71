"""Each shipped flag table against its release's real parser, and our parser against SGLang's.

SGLang runs in its own interpreter from its real wheel (``tests/helpers/flagtable_helpers.py``);
nothing here is a copy of what SGLang answers: each test asks SGLang and compares. Every release
gpufleet knows (``reference.RELEASES``, 0.5.17 to 0.5.23) is held to its own parser.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flagtable_helpers import (
    ensure_reference,
    every_flag_argv,
    generator,
    parse_cases,
    sample_values,
)

from tui.sglang.flagtable.check import check_argv
from tui.sglang.flagtable.describe import describe
from tui.sglang.flagtable.generate import base_of
from tui.sglang.flagtable.parser import build_parser
from tui.sglang.flagtable.reference import RELEASES
from tui.sglang.flagtable.table import (
    PINNED_VERSION,
    FlagTable,
    UnknownVersion,
    differences,
    known_versions,
    load_table,
    table_path,
    version_key,
)

M = ["--model-path", "Qwen/Qwen3.6-27B-FP8"]

REJECTED = {
    "ambiguous": [*M, "--cuda-graph-max-bs", "256"],
    "renamed": [*M, "--mamba-scheduler-strategy", "extra_buffer"],
    "choice": [*M, "--mamba-radix-cache-strategy", "lazy"],
    "type": [*M, "--max-running-requests", "sixty-four"],
    "arity": [*M, "--max-running-requests"],
    "switch value": [*M, "--enable-metrics=yes"],
    "stray value": [*M, "--enable-metrics", "1"],
    "required": ["--port", "30000"],
}
"""Launch argv SGLang 0.5.23's parser refuses (exit 2), by reason."""

ALIASES = {
    "cuda_graph_max_bs": [*M, "--cuda-graph-max-bs", "256"],
    "mamba_scheduler_strategy": [*M, "--mamba-scheduler-strategy", "extra_buffer"],
}
"""Deprecated aliases up to 0.5.19 (a warning, the value stored under the new name), gone in
0.5.20: --cuda-graph-max-bs then became an ambiguous prefix, the other an unknown flag."""


@pytest.fixture(scope="module")
def reference() -> Path:
    """Every release's wheel, fetched for reference (pip, once)."""
    return ensure_reference(*RELEASES)


@dataclasses.dataclass
class Run:
    """What one release's real parser gave: its table, and its outcome on every case."""

    table: FlagTable
    cases: list[list[str]]
    results: list[dict[str, Any]]


@pytest.fixture(scope="module")
def runs(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """Release -> its ``Run``: one SGLang interpreter per release gives both (each once)."""
    done: dict[str, Run] = {}

    def run(version: str) -> Run:
        if version not in done:
            tmp = tmp_path_factory.mktemp(f"sglang-{version}")
            cases = _cases(load_table(version))
            out = tmp / "table.json"
            results = parse_cases(
                cases, tmp, parser="sglang", reference=reference, version=version, table_out=out
            )
            done[version] = Run(FlagTable.from_json(json.loads(out.read_text())), cases, results)
        return done[version]

    return run


@pytest.fixture(scope="module")
def real_table(runs: Callable[[str], Run]) -> FlagTable:
    """The table SGLang 0.5.23's real parser gives, generated now."""
    return runs(PINNED_VERSION).table


def test_the_releases_known_are_the_tables_shipped() -> None:
    assert known_versions() == tuple(RELEASES)
    assert tuple(RELEASES) == tuple(sorted(RELEASES, key=version_key))
    assert PINNED_VERSION == list(RELEASES)[-1] == "0.5.23"
    assert next(iter(RELEASES)) == "0.5.17"
    for version in RELEASES:  # the newest whole, each older one a delta of the next newer
        doc = json.loads(table_path(version).read_text())
        assert doc.get("delta_of") == base_of(version), version
    total = sum(table_path(v).stat().st_size for v in RELEASES)
    assert total < 300_000, total  # whole tables would take ~1.1 MB


@pytest.mark.parametrize("version", list(RELEASES))
def test_shipped_table_is_sglang_own_parser(version: str, runs: Callable[[str], Run]) -> None:
    real = runs(version).table
    shipped = load_table(version)
    assert differences(real, shipped) == []
    assert shipped.sglang_version == version and shipped.prog == "sglang serve"
    assert shipped.allow_abbrev
    assert len(shipped.flags) == len(real.flags) > 450
    # The file is exactly what the generator writes: re-pinning is one command, no hand edits
    # (but for the Python that generated it: argparse's texts are the interpreter's).
    base = base_of(version)
    regenerated = dataclasses.replace(real, python=shipped.python)
    text = regenerated.dumps(load_table(base) if base is not None else None)
    assert table_path(version).read_text() == text


def test_an_edited_table_is_caught(real_table: FlagTable) -> None:
    flags = list(real_table.flags)
    strategy = next(i for i, f in enumerate(flags) if f.dest == "mamba_radix_cache_strategy")
    running = next(i for i, f in enumerate(flags) if f.dest == "max_running_requests")
    edits = {
        "a choice added": dataclasses.replace(
            flags[strategy], choices=(*(flags[strategy].choices or ()), "lazy")
        ),
        "a type changed": dataclasses.replace(flags[running], type="str"),
        "nargs changed": dataclasses.replace(flags[running], nargs="+"),
        "an alias added": dataclasses.replace(
            flags[running], option_strings=("--max-running-requests", "--max-running-request")
        ),
    }
    for what, edited in edits.items():
        copy = list(flags)
        copy[running if edited.dest == "max_running_requests" else strategy] = edited
        found = differences(real_table, dataclasses.replace(real_table, flags=tuple(copy)))
        assert found, what
        assert all(line.startswith(edited.option_strings[0]) for line in found), found
    legacy = dataclasses.replace(flags[strategy], option_strings=("--mamba-scheduler-strategy",))
    with_legacy = dataclasses.replace(real_table, flags=(*flags, legacy))
    assert differences(real_table, with_legacy) == [
        "--mamba-scheduler-strategy: not defined by SGLang's parser"
    ]
    without = dataclasses.replace(real_table, flags=tuple(flags[:running] + flags[running + 1 :]))
    assert differences(real_table, without) == ["--max-running-requests: missing from the table"]
    renamed = dataclasses.replace(real_table, speculative=dataclasses.replace(
        real_table.speculative, names=(*real_table.speculative.names, "MTP")
    ))  # fmt: skip
    assert [d.split(":")[0] for d in differences(real_table, renamed)] == ["speculative"]


def test_an_edited_table_file_fails_the_comparison(real_table: FlagTable) -> None:
    doc = json.loads(table_path(PINNED_VERSION).read_text())
    for flag in doc["flags"]:
        if flag["dest"] == "cuda_graph_max_bs_decode":
            flag["option_strings"] = ["--cuda-graph-max-bs"]
    edited = FlagTable.from_json(doc)
    assert differences(real_table, edited) == [
        "--cuda-graph-max-bs-decode: missing from the table",
        "--cuda-graph-max-bs: not defined by SGLang's parser",
    ]


def test_rebuilt_parser_holds_exactly_the_table() -> None:
    table = load_table()
    parser = build_parser(table)
    rebuilt = dataclasses.replace(table, flags=tuple(describe(a) for a in parser._actions))
    # SGLang gives --sampling-backend's choices as a set; ours are sorted (same members).
    assert differences(table, rebuilt) == ["--sampling-backend: choices_ordered True != False"]


def _cases(table: FlagTable) -> list[list[str]]:
    by_type = {f.type: f for f in table.flags if f.type and f.nargs is None and not f.choices}
    bad_values = {
        "int": ["1.5", "x", ""],
        "float": ["x", "1,5"],
        "json.loads": ["{bad", "[1,"],
        "json_list_type": ["NaN", "1e400", "[1,", '"\\ud800"', "18446744073709551616", "[1, 2]"],
        "human_readable_int": ["1.5Ki", "2.5k", " 12 ", "1kb", "3Mi", "x"],
        "nullable_str": ["", "None", "x"],
        "parse_cuda_graph_config_arg": [
            "[]",
            "{bad",
            '{"verify": {}}',
            '{"decode": 1}',
            '{"decode": {"foo": 1}}',
            '{"decode": {"backend": "tc_piecewise"}}',
            '{"prefill": {"max_bs": 4, "max_seq_len": 8}}',
        ],
    }
    cases = [every_flag_argv(table), ["-h"], ["--port"], *REJECTED.values()]
    for kind, values in bad_values.items():
        cases += [[*M, by_type[kind].option_strings[0], v] for v in values]
    for backend in [f for f in table.flags if f.type == "parse_cuda_graph_backend_arg"][:1]:
        cases += [[*M, backend.option_strings[0], v] for v in ("tc_piecewise", "full", "bogus")]
    # Every retired flag once: SGLang's own action classes, as each release defines them.
    for flag in table.flags:
        if flag.action.startswith("Deprecated"):
            cases.append([*M, flag.option_strings[-1], *sample_values(flag)])
    cases += [
        [*M, "--max-running-request", "64"],  # a unique prefix: SGLang accepts it
        [*M, "--tp", "2", "--mem-frac", "0.8", "--enable-metric"],
        [*M, "--cuda-graph-max-bs-d", "8", "--max-running-requests=16"],
        [*M, "--speculative-algorithm", "MTP"],
        [*M, "--speculative-algorithm", "nextn"],
        [*M, "--speculative-algorithm", "eagle3"],
        [*M, "--lora-paths", '{"lora_name": "a"}'],
        [*M, "--no-enable-tf32-matmul", "--monokernel-backend", "amd"],
        [*M, "--monokernel-backend", "nvidia"],
        [*M, "--", "--port", "1"],
        ["--model", "m", "-x"],
    ]
    return cases


@pytest.mark.parametrize("version", list(RELEASES))
def test_rebuilt_parser_answers_as_sglang_does(
    version: str, tmp_path: Path, reference: Path, runs: Callable[[str], Run]
) -> None:
    """Same exit status, stdout (--help), stderr (usage and error), namespace, for every case."""
    cases, theirs = runs(version).cases, runs(version).results
    ours = parse_cases(cases, tmp_path, parser="table", reference=reference, version=version)
    assert len(theirs) == len(ours) == len(cases)
    for argv, sglang, table in zip(cases, theirs, ours, strict=True):
        assert table == sglang, argv[-4:]
    statuses = [r["status"] for r in theirs]
    assert statuses[0] == 0 and len(theirs[0]["namespace"]) > 450  # every flag, one argv
    assert theirs[1]["stdout"].startswith("usage: sglang serve [-h] --model-path MODEL_PATH")
    assert statuses.count(2) >= 15 and statuses.count(0) >= 10
    errors = {r["stderr"].splitlines()[-1] for r in theirs if r["status"] == 2}
    spec = {r["spec_error"] for r in theirs}
    assert "ValueError: Unknown speculative algorithm name: MTP" in spec
    by_argv = {tuple(c): r for c, r in zip(cases, theirs, strict=True)}
    max_bs = by_argv[tuple(ALIASES["cuda_graph_max_bs"])]
    scheduler = by_argv[tuple(ALIASES["mamba_scheduler_strategy"])]
    if version_key(version) < version_key("0.5.20"):
        assert max_bs["status"] == 0 and max_bs["namespace"]["cuda_graph_max_bs_decode"] == 256
        assert "'--cuda-graph-max-bs' is deprecated" in max_bs["stderr"]
        assert scheduler["namespace"]["mamba_radix_cache_strategy"] == "extra_buffer"
    else:
        assert (
            "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
            "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
        ) in errors
        assert (
            "sglang serve: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer"
        ) in errors


def test_checker_refuses_what_sglang_refuses(runs: Callable[[str], Run]) -> None:
    run = runs(PINNED_VERSION)
    by_argv = {tuple(c): r for c, r in zip(run.cases, run.results, strict=True)}
    for reason, argv in REJECTED.items():
        sglang = by_argv[tuple(argv)]
        rejection = check_argv(argv)
        assert rejection is not None and sglang["status"] == 2 == rejection.exit_status, reason
        assert sglang["stderr"].splitlines()[-1] == rejection.sglang_error, reason
        assert rejection.sglang_version in rejection.describe()


def test_checker_judges_by_the_release() -> None:
    """--cuda-graph-max-bs is 0.5.17's deprecated alias and 0.5.23's ambiguous prefix: each
    release's checker says what that release's real parser does (the parse cases above hold
    each parser to it)."""
    argv = ALIASES["cuda_graph_max_bs"]
    assert check_argv(argv, version="0.5.17", strict=True) is None
    new = check_argv(argv, version="0.5.23", strict=True)
    assert new is not None and new.kind == "ambiguous" and new.sglang_version == "0.5.23"
    legacy = ALIASES["mamba_scheduler_strategy"]
    assert check_argv(legacy, version="0.5.19", strict=True) is None
    gone = check_argv(legacy, version="0.5.20", strict=True)
    assert gone is not None and gone.kind == "unknown"
    assert gone.describe().startswith("SGLang 0.5.20 has no flag --mamba-scheduler-strategy")


def test_checker_verdicts_on_the_named_cases() -> None:
    ambiguous = check_argv(REJECTED["ambiguous"])
    assert ambiguous is not None and ambiguous.kind == "ambiguous" and ambiguous.index == 2
    assert ambiguous.describe() == (
        "--cuda-graph-max-bs is ambiguous in SGLang 0.5.23 (it exits 2): could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )
    renamed = check_argv(REJECTED["renamed"])
    assert renamed is not None and renamed.suggestion == "--mamba-radix-cache-strategy"
    mtp = check_argv([*M, "--speculative-algorithm", "MTP"])
    assert mtp is not None and (mtp.kind, mtp.exit_status, mtp.value) == (
        "speculative_algorithm",
        1,
        "MTP",
    )
    allowed = mtp.allowed.split(", ")
    assert "EAGLE" in allowed and "NEXTN" in allowed and "MTP" not in allowed
    assert check_argv([*M, "--speculative-algorithm", "nextn"]) is None
    # SGLang expands a unique prefix; gpufleet's strict rule (for the argv it writes) does not.
    prefix = [*M, "--max-running-request", "64"]
    assert check_argv(prefix) is None
    strict = check_argv(prefix, strict=True)
    assert strict is not None and (strict.kind, strict.exit_status) == ("abbreviation", 0)
    assert strict.describe().endswith("did you mean --max-running-requests?")
    choice = check_argv(REJECTED["choice"])
    assert choice is not None and choice.describe() == (
        "SGLang 0.5.23 refuses --mamba-radix-cache-strategy 'lazy' (it exits 2: invalid choice); "
        "allowed: one of auto, no_buffer, extra_buffer, extra_buffer_lazy"
    )
    typed = check_argv(REJECTED["type"])
    assert typed is not None and typed.describe() == (
        "SGLang 0.5.23 refuses --max-running-requests 'sixty-four' (it exits 2: invalid int value:"
        " 'sixty-four'); allowed: an integer"
    )


def test_unknown_version_is_refused_by_name() -> None:
    with pytest.raises(UnknownVersion, match=r"no SGLang flag table for version '0.5.16'") as err:
        load_table("0.5.16")
    assert "0.5.17, 0.5.18, 0.5.19, 0.5.20, 0.5.21, 0.5.22, 0.5.23" in str(err.value)


def test_a_delta_reads_back_exactly() -> None:
    newer, older = load_table("0.5.23"), load_table("0.5.22")
    doc = json.loads(older.dumps(newer))
    assert doc["delta_of"] == "0.5.23"
    runs = [e for e in doc["flags"] if isinstance(e, list)]
    rows = [e for e in doc["flags"] if isinstance(e, dict)]
    assert runs and len(rows) < len(older.flags) / 5  # most rows are shared
    assert FlagTable.from_json(doc, newer) == older
    with pytest.raises(ValueError, match="needs that table"):
        FlagTable.from_json(doc)
    with pytest.raises(ValueError, match="needs that table"):
        FlagTable.from_json(doc, older)
    doc["flags"][0] = [0, len(newer.flags) + 1]
    with pytest.raises(ValueError, match="beyond the"):
        FlagTable.from_json(doc, newer)
    doc["flags"][0] = "--port"
    with pytest.raises(ValueError, match="expected a row or"):
        FlagTable.from_json(doc, newer)


def test_the_value_sglang_uses_when_a_flag_is_not_given() -> None:
    for version in RELEASES:
        table = load_table(version)
        assert table.resolved_default("mamba_full_memory_ratio") == 0.9, version
        assert table.resolved_default("no_such_dest") is None
    assert load_table("0.5.19").fallback("mamba_full_memory_ratio") is None  # no Arg(fallback)
    assert load_table("0.5.23").by_dest()["mamba_full_memory_ratio"].default is None


def test_generator_refuses_a_missing_reference(tmp_path: Path) -> None:
    done = generator("--reference", str(tmp_path / "nothing"), "--out", "-")
    assert done.returncode == 1
    assert "SGLang 0.5.23 is not installed in" in done.stderr and "--install" in done.stderr


def test_sglang_is_never_imported_by_the_app() -> None:
    """The reference lives beside the app: importing gpufleet never reaches it."""
    import sys

    assert not any(name == "sglang" or name.startswith("sglang.") for name in sys.modules)
    assert "torch" not in sys.modules
