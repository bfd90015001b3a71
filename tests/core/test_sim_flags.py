"""``gpufleet sim`` reads its argv with SGLang 0.5.23's own parser: refusals print SGLang's text.

Each case runs the simulator as a real process and SGLang's real parser (its wheel, in its own
interpreter) on the same argv, and compares what they print and how they exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from flagtable_helpers import COLUMNS, ensure_reference, parse_cases

from tui.sglang.flags import unmodelled
from tui.sim import cli

M = ["--model-path", "Qwen/Qwen3.6-27B-FP8", "--port", "39997"]

REFUSED = {
    "ambiguous": [*M, "--cuda-graph-max-bs", "256"],
    "renamed": [*M, "--mamba-scheduler-strategy", "extra_buffer"],
    "choice": [*M, "--mamba-radix-cache-strategy", "lazy"],
    "type": [*M, "--max-running-requests", "sixty-four"],
    "switch": [*M, "--enable-metrics=1"],
}


@pytest.fixture(scope="module")
def reference() -> Path:
    """SGLang 0.5.23's wheel, installed for reference (pip, once)."""
    return ensure_reference()


def _sim(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS=COLUMNS, GPUFLEET_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run(
        [sys.executable, "-m", "tui", "sim", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("reason", sorted(REFUSED))
def test_sim_refuses_with_sglang_own_text(reason: str, tmp_path: Path, reference: Path) -> None:
    argv = REFUSED[reason]
    (sglang,) = parse_cases([argv], tmp_path, parser="sglang", reference=reference)
    done = _sim(argv, tmp_path)
    assert sglang["status"] == 2
    assert done.returncode == 2
    assert done.stderr == sglang["stderr"]  # usage and error line, byte for byte
    assert done.stderr.startswith("usage: sglang serve [-h] --model-path MODEL_PATH")
    assert not (tmp_path / "state" / "simgpu").exists()  # exited before touching its GPU


def test_sim_fails_on_mtp_as_sglang_does(tmp_path: Path, reference: Path) -> None:
    argv = [*M, "--speculative-algorithm", "MTP"]
    (sglang,) = parse_cases([argv], tmp_path, parser="sglang", reference=reference)
    assert sglang["status"] == 0  # argparse accepts it: SGLang fails when resolving it
    done = _sim(argv, tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last):")
    assert done.stderr.rstrip().splitlines()[-1] == sglang["spec_error"]
    assert sglang["spec_error"] == "ValueError: Unknown speculative algorithm name: MTP"


def test_sim_accepts_what_sglang_accepts(tmp_path: Path, reference: Path) -> None:
    """A unique prefix is SGLang's to expand; the simulator reads the same value from it."""
    argv = [*M, "--max-running-request", "64", "--speculative-algorithm", "nextn", "--tp", "1"]
    (sglang,) = parse_cases([argv], tmp_path, parser="sglang", reference=reference)
    assert sglang["status"] == 0 and sglang["spec_error"] is None
    parser = cli.build_parser()
    ours = vars(parser.parse_args(cli.with_model_path(parser, argv)))
    for dest in ("max_running_requests", "speculative_algorithm", "tp_size", "model_path"):
        assert ours[dest] == sglang["namespace"][dest]
    assert ours["max_running_requests"] == 64


def test_sim_without_model_path_serves_its_own_model() -> None:
    parser = cli.build_parser()
    argv = ["--port", "39997", "--sim-model", "llama-8b"]
    assert cli.with_model_path(parser, argv) == [*argv, "--model-path", ""]
    given = ["--model", "m", *argv]
    assert cli.with_model_path(parser, given) == given  # any spelling of the flag counts


def test_sim_names_the_sglang_flags_it_accepts_without_modelling() -> None:
    parser = cli.build_parser()
    argv = ["--attention-backend", "fa3", "--sim-gpu", "h200", "--port", "3", "--enable-metrics"]
    argv += ["--lora-paths", "a", "b", "--mem-fraction-static", "0.9"]
    said = unmodelled(parser, argv).message()
    assert said == "Simulator: accepted but not modelled: --attention-backend fa3 --lora-paths a b"
    assert unmodelled(parser, ["--port", "3", "--sim-seed", "1"]).message() is None
