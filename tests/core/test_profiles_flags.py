"""Profiles are judged by SGLang 0.5.23's own flag table: refused before anything is launched.

Every GPU's exact launch argv goes through the parser rebuilt from the table (the simulator's,
with its --sim-* flags, for a sim profile); a refusal names the profile field that wrote the
token, the value, SGLang's own reason and what is allowed.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
from repo_paths import ROOT

from tui.ops.service import FleetOps
from tui.ops.target import FleetTarget
from tui.profiles import ProfileError, list_profiles, load_profile, profile_from_dict
from tui.profiles.flag_check import launch_problems
from tui.retune.preflight import preflight
from tui.state.fleet_state import read_records

SHIPPED = ROOT / "profiles"

DOC: dict[str, Any] = {
    "name": "t",
    "engine": {"kind": "sglang", "python": "python3"},
    "fleet": {"gpus": [0, 5], "base_port": 31000, "log_dir": "/logs"},
    "server": {
        "model_path": "Qwen/Qwen3.6-27B-FP8",
        "mem_fraction_static": 0.9,
        "mamba_radix_cache_strategy": "extra_buffer",
        "speculative_algorithm": "EAGLE",
        "extra_flags": {"enable_metrics": True},
    },
}

V = "SGLang 0.5.23"


def _doc(extra: dict[str, Any] | None = None, **server: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["server"].update(server)
    doc["server"]["extra_flags"].update(extra or {})
    return doc


def _problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ProfileError) as err:
        profile_from_dict(doc, "t")
    return [str(p) for p in err.value.problems]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            _doc({"cuda_graph_max_bs": 256}),
            "server.extra_flags.cuda_graph_max_bs = 256: --cuda-graph-max-bs is ambiguous in "
            f"{V} (it exits 2): could match --cuda-graph-max-bs-decode, "
            "--cuda-graph-max-bs-prefill",
        ),
        (
            _doc(speculative_algorithm="MTP"),
            f"server.speculative_algorithm = 'MTP': {V} has no speculative algorithm 'MTP' (it "
            "exits 1: ValueError: Unknown speculative algorithm name: MTP); allowed: DFLASH, UNO, "
            "DSPARK, EAGLE, EAGLE3, FROZEN_KV_MTP, STANDALONE, NGRAM, NONE, NEXTN",
        ),
        (
            _doc({"mamba_scheduler_strategy": "extra_buffer"}),
            "server.extra_flags.mamba_scheduler_strategy = 'extra_buffer': not allowed in "
            "extra_flags: SGLang renamed it --mamba-radix-cache-strategy (an alias up to 0.5.19, "
            "refused from 0.5.20); set server.mamba_radix_cache_strategy",
        ),
        (
            _doc({"max_running_request": 64}),
            "server.extra_flags.max_running_request = 64: --max-running-request is an "
            f"abbreviation of --max-running-requests: {V} expands it, but a new flag can make it "
            "ambiguous (as --cuda-graph-max-bs became); did you mean --max-running-requests?",
        ),
        (
            _doc({"mamba_ssm_dtype": "fp8"}),
            f"server.extra_flags.mamba_ssm_dtype = 'fp8': {V} refuses --mamba-ssm-dtype 'fp8' (it "
            "exits 2: invalid choice); allowed: one of float32, bfloat16, float16",
        ),
        (
            _doc({"chunked_prefill_size": "big"}),
            f"server.extra_flags.chunked_prefill_size = 'big': {V} refuses --chunked-prefill-size "
            "'big' (it exits 2: invalid int value: 'big'); allowed: an integer",
        ),
        (
            _doc({"enable_metrics": 1}),
            f"server.extra_flags.enable_metrics = 1: {V} refuses --enable-metrics '1' (it exits "
            "2): --enable-metrics is a switch and takes no value; write it alone (true)",
        ),
        (
            _doc({"decode_log_interval": True}),
            f"server.extra_flags.decode_log_interval = True: {V} refuses --decode-log-interval "
            "without a value (it exits 2: expected one argument)",
        ),
        (
            _doc({"enable_metrix": True}),
            f"server.extra_flags.enable_metrix = True: {V} has no flag --enable-metrix (it exits "
            "2: unrecognized arguments); did you mean --enable-metrics?",
        ),
    ],
    ids=[
        "ambiguous",
        "mtp",
        "renamed",
        "abbreviation",
        "choice",
        "type",
        "switch",
        "arity",
        "unknown",
    ],
)
def test_profile_refuses_what_sglang_refuses(
    doc: dict[str, Any], expected: str, tmp_path: Path
) -> None:
    assert _problems(doc) == [expected]
    path = tmp_path / "bad.toml"
    path.write_text(tomli_w.dumps(doc))
    done = subprocess.run(
        [sys.executable, "-m", "tui", "profile", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    # One problem: one line, naming the file and the field (several: a header and one each).
    assert done.stderr.splitlines() == [f"gpufleet profile: {path}: {expected}"]


def test_every_problem_is_listed_once_with_the_override_field() -> None:
    doc = _doc({"cuda_graph_max_bs": 256, "chunked_prefill_size": "big"})
    doc["gpu"] = {"5": {"extra_flags": {"page_sise": 16}}}
    problems = _problems(doc)
    assert [p.split(" = ")[0] for p in problems] == [
        "server.extra_flags.cuda_graph_max_bs",  # refused on both GPUs: said once
        "server.extra_flags.chunked_prefill_size",
        "gpu.5.extra_flags.page_sise",
    ]
    assert problems[2].endswith("did you mean --page-size?")


def test_a_config_file_is_refused_its_flags_would_go_unchecked() -> None:
    assert _problems(_doc({"config": "/etc/sglang.yaml"})) == [
        "server.extra_flags.config = '/etc/sglang.yaml': not allowed in extra_flags: its "
        "YAML's flags would reach SGLang unchecked; list them in [server.extra_flags]"
    ]


def test_model_path_is_required_for_real_sglang_not_for_the_simulator() -> None:
    doc = _doc()
    del doc["server"]["model_path"]
    assert _problems(doc) == [
        f"server.model_path = None: {V} requires --model-path (it exits 2: the following "
        "arguments are required: --model-path/--model)"
    ]
    doc["engine"] = {"kind": "sim", "sim_model": "qwen3.6-27b"}
    assert profile_from_dict(doc, "t").server.model_path is None  # the sim serves its own


def test_simulator_flags_only_for_the_sim_engine() -> None:
    sim = _doc({"gpu_backing": "none", "sim_seed": 7})
    sim["engine"] = {"kind": "sim", "sim_gpu": "h200"}
    profile = profile_from_dict(sim, "t")
    assert dict(profile.server.extra_flags)["sim_seed"] == 7
    real = _doc({"sim_seed": 7})
    assert _problems(real) == [
        f"server.extra_flags.sim_seed = 7: {V} has no flag --sim-seed (it exits 2: unrecognized "
        "arguments); did you mean --random-seed?"
    ]
    sim["server"]["extra_flags"]["sim_seed"] = "x"
    assert _problems(sim) == [
        "server.extra_flags.sim_seed = 'x': gpufleet sim refuses --sim-seed 'x' (it exits 2: "
        "invalid int value: 'x'); allowed: an integer"
    ]


def test_sglang_version_is_checked() -> None:
    doc = _doc()
    doc["engine"]["sglang_version"] = "0.5.16"
    assert _problems(doc) == [
        "engine.sglang_version = '0.5.16': no SGLang flag table for this version (gpufleet has: "
        "0.5.17, 0.5.18, 0.5.19, 0.5.20, 0.5.21, 0.5.22, 0.5.23; or 'auto': the release "
        "engine.python has)"
    ]
    doc["engine"]["sglang_version"] = "0.5.23"
    profile = profile_from_dict(doc, "t")
    assert profile.engine.sglang_version == "0.5.23"


def test_every_shipped_profile_validates() -> None:
    paths = list_profiles(SHIPPED)
    assert len(paths) >= 4
    for path in paths:
        profile = load_profile(path)
        assert launch_problems(profile) == [], path
        done = subprocess.run(
            [sys.executable, "-m", "tui", "profile", "validate", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0 and ": ok (" in done.stdout, done.stderr


def test_profile_validate_cli_prints_each_refusal(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[engine]\nkind = "sglang"\n[fleet]\ngpus = [0]\n'
        '[server]\nmodel_path = "m"\nspeculative_algorithm = "MTP"\n'
        "[server.extra_flags]\ncuda_graph_max_bs = 256\nmax_running_request = 64\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "tui", "profile", "validate", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].endswith("3 problem(s)")
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "server.extra_flags.cuda_graph_max_bs = 256",  # argparse stops at the first, in order
        "server.extra_flags.max_running_request = 64",
        "server.speculative_algorithm = 'MTP'",  # SGLang checks it after parsing
    ]
    assert lines[2].endswith("did you mean --max-running-requests?")


def _profile_with_bad_flags() -> Any:
    """A profile built in code (no loader): the launch paths must still refuse it."""
    good = profile_from_dict(_doc(), "t")
    extra = (*good.server.extra_flags, ("cuda_graph_max_bs", 256))
    return dataclasses.replace(good, server=dataclasses.replace(good.server, extra_flags=extra))


def test_launch_paths_refuse_a_profile_built_in_code() -> None:
    bad = _profile_with_bad_flags()
    why = asyncio.run(FleetOps(gpu_pids=lambda gpu: set()).start(bad, [0]))[0]
    assert why is not None and "GPU 0: server.extra_flags.cuda_graph_max_bs" in why
    assert read_records() == {}  # nothing launched

    async def validate() -> list[str]:
        async with httpx.AsyncClient() as client:
            return FleetTarget(bad, lambda gpu: set(), client).validate([0, 5])

    errors = asyncio.run(validate())
    assert errors == [
        "server.extra_flags.cuda_graph_max_bs = 256: --cuda-graph-max-bs is ambiguous in "
        f"{V} (it exits 2): could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    ]
    sim = dataclasses.replace(bad, engine=dataclasses.replace(bad.engine, kind="sim"))
    item = preflight(sim, 0)
    assert not item.fits
    assert item.why_not is not None and item.why_not.startswith(
        "does not start: server.extra_flags.cuda_graph_max_bs = 256: --cuda-graph-max-bs is "
        "ambiguous"
    )
