"""SGLang itself, for the tests that hold each shipped flag table to its release's real parser.

The reference is every release's wheel, as PyPI serves it, plus the few packages its
parser-building imports need (``tui.sglang.flagtable.reference``), fetched by ``make venv`` or,
when missing, by the first test that needs it (PyPI only). SGLang runs in its own interpreter
(``python -m tui.sglang.flagtable.generate``): its heavy imports are answered by stand-ins there,
never here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui.paths import sglang_reference_dir
from tui.sglang.flagtable.reference import install_reference, reference_ready
from tui.sglang.flagtable.table import PINNED_VERSION, FlagSpec, FlagTable

COLUMNS = "100"
"""Terminal width for every parser run (argparse wraps its usage text to it)."""

_SET_CHOICES = re.compile(r"--sampling-backend \{(?P<choices>[^}]*)\}")


def ensure_reference(*versions: str) -> Path:
    """The reference directory, with ``versions`` (default: the pinned one) fetched first when
    missing."""
    root = sglang_reference_dir()
    wanted = versions or (PINNED_VERSION,)
    missing = [v for v in wanted if not reference_ready(v, root)]
    if missing:
        install_reference(missing, root)
    return root


def generator(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tui.sglang.flagtable.generate ARGS`` in its own interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_"))}
    env["COLUMNS"] = COLUMNS
    return subprocess.run(
        [sys.executable, "-m", "tui.sglang.flagtable.generate", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def sglang_table(reference: Path, version: str = PINNED_VERSION) -> FlagTable:
    """The table SGLang ``version``'s real parser gives now (generated in a fresh interpreter)."""
    done = generator("--reference", str(reference), "--sglang-version", version, "--out", "-")
    assert done.returncode == 0, done.stderr[-3000:]
    return FlagTable.from_json(json.loads(done.stdout))


def parse_cases(
    cases: Sequence[Sequence[str]],
    tmp: Path,
    *,
    parser: str,
    reference: Path,
    version: str = PINNED_VERSION,
    table_out: Path | None = None,
) -> list[dict[str, Any]]:
    """Each argv's outcome under SGLang ``version``'s parser (``parser="sglang"``) or ours
    (``"table"``, rebuilt from that release's shipped table); with ``table_out``, SGLang's run
    also writes the table its parser gives there (one import of SGLang for both)."""
    path = tmp / f"cases-{parser}-{version}.json"
    path.write_text(json.dumps([list(c) for c in cases]))
    args = ["--reference", str(reference), "--sglang-version", version]
    args += ["--parse-cases", str(path), "--parser", parser]
    if table_out is not None:
        args += ["--out", str(table_out)]
    done = generator(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    for result in results:  # SGLang gives these choices as a set: hash order, not ours
        for key in ("stdout", "stderr"):
            result[key] = _SET_CHOICES.sub(_sorted_choices, result[key])
    return results


def _sorted_choices(match: re.Match[str]) -> str:
    return "--sampling-backend {" + ",".join(sorted(match["choices"].split(","))) + "}"


def sample_values(flag: FlagSpec) -> list[str]:
    """Valid values for one flag (empty for a switch), exercising its converter and nargs."""
    if flag.nargs == 0:
        return []
    if flag.action == "LoRAPathAction":
        return ["adapter-a", '{"lora_name": "b", "lora_path": "/p/b"}']
    if flag.choices:
        one = [str(flag.choices[-1])]
        many = [str(c) for c in flag.choices[-2:]]
    else:
        one = [
            {
                "int": "3",
                "float": "0.25",
                "json.loads": '{"a": 1}',
                "json_list_type": "[1, 2]",
                "human_readable_int": "2k",
                "nullable_str": "None",
                "parse_cuda_graph_config_arg": '{"decode": {"max_bs": 8}}',
            }.get(flag.type or "str", "x")
        ]
        many = one * 2
    if flag.nargs in ("+", "*"):
        return many
    if isinstance(flag.nargs, int):
        return one * flag.nargs
    return one


def every_flag_argv(table: FlagTable) -> list[str]:
    """One argv giving every flag of the table a valid value (but ``-h``, and the retired flags
    whose only answer is an error, 0.5.18's ``--enable-expert-distribution-metrics``)."""
    argv: list[str] = []
    for n, flag in enumerate(table.flags):
        if flag.action == "help" or dict(flag.action_kwargs).get("error_message"):
            continue
        option = flag.option_strings[0]
        if flag.action == "boolean_optional" and n % 2:
            option = next(o for o in flag.option_strings if o.startswith("--no-"))
        argv += [option, *sample_values(flag)]
    return argv
