"""``gpufleet apply`` refuses what SGLang 0.5.23 would refuse, before it stops anything.

A simulated server really runs on GPU 0; each bad profile is applied with the real CLI; the exit
status is 2, the refusal names the field, and the server's process is the same, still running.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from bench.simfleet import sim_fleet
from tui.state.fleet_state import read_records

BAD = {
    "ambiguous": ("", "cuda_graph_max_bs = 256", "server.extra_flags.cuda_graph_max_bs = 256"),
    "mtp": ("MTP", "", "server.speculative_algorithm = 'MTP'"),
    "renamed": (
        "",
        'mamba_scheduler_strategy = "extra_buffer"',
        "server.extra_flags.mamba_scheduler_strategy = 'extra_buffer'",
    ),
    "abbreviation": ("", "max_running_request = 64", "server.extra_flags.max_running_request"),
    "choice": ("", 'mamba_ssm_dtype = "fp8"', "server.extra_flags.mamba_ssm_dtype = 'fp8'"),
    "type": ("", 'chunked_prefill_size = "big"', "server.extra_flags.chunked_prefill_size"),
}
"""case -> (speculative algorithm to write instead of EAGLE, extra flag line, refused field)."""


def test_apply_refuses_before_stopping(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 1, speed=200.0) as fleet:
        before = read_records()[0]
        assert psutil.Process(before.pid).is_running()
        for case, (algorithm, extra, field) in BAD.items():
            text = fleet.files["aggressive"].read_text()
            if algorithm:
                text = text.replace('"EAGLE"', f'"{algorithm}"')
            bad = tmp_path / f"{case}.toml"
            bad.write_text(text + extra + "\n")
            done = subprocess.run(
                [sys.executable, "-m", "tui", "apply", str(bad), "--no-measure"],
                capture_output=True,
                text=True,
                timeout=120,
                env=dict(os.environ),
                check=False,
            )
            assert done.returncode == 2, (case, done.stdout + done.stderr)
            # each refusal names the release that refuses it: the profile's own (0.5.23), or for
            # a renamed flag the releases that took the old name and the first that refuses it
            release = "refused from 0.5.20" if case == "renamed" else "SGLang 0.5.23"
            assert field in done.stderr and release in done.stderr, case
            assert "stopping" not in done.stdout.lower(), case
            assert read_records()[0] == before, case  # the same server, still recorded
            process = psutil.Process(before.pid)
            assert process.is_running() and process.create_time() == before.create_time, case
