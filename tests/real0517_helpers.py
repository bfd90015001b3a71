"""Shared test helper: the simulator as the recorded SGLang 0.5.17 server (``--sim-build 0.5.17``).

``tests/fixtures/real_sglang/0.5.17`` holds what a real 0.5.17 did, scenario by scenario (the
flags are ``bench/real_sglang/explore.py``'s ``SCENARIOS``). Here the simulator runs the same
flags, on a simulated H100, serving the same model: the recorded random-weight Qwen3_5ForCausalLM
(3 Gated DeltaNet layers + 1 full-attention layer, hidden 256), planned from its own config.json
(``--sim-model`` takes the fixture's ``model`` folder; ``--load-format dummy`` estimates its
weights from the shapes, ``tui.sglang.modelcfg``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sim_helpers import sim_env

from bench.ports import free_port
from bench.real_sglang.explore import BASE_FLAGS, SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
REAL = Path(__file__).parent / "fixtures" / "real_sglang" / "0.5.17"

MODEL = REAL / "model"
"""The recorded model's folder (its config.json)."""


def scenario_argv(name: str, port: int) -> list[str]:
    """The recorded scenario's flags (its port replaced), as the simulator takes them."""
    flags, _, _ = SCENARIOS[name]
    base = list(BASE_FLAGS)
    base[base.index("--port") + 1] = str(port)
    return [
        "--model-path",
        "/tmp/tiny",
        "--served-model-name",
        f"tiny-{name}",
        *base,
        *flags,
        "--sim-build",
        "0.5.17",
        "--sim-model",
        str(MODEL),
        "--sim-gpu",
        "h100",
    ]


@dataclass
class Sim0517:
    """A started simulated 0.5.17 server."""

    proc: subprocess.Popen[bytes]
    """Its main process (a session leader)."""
    port: int
    """Its HTTP port."""
    log_path: Path
    """Its stdout and stderr."""

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        """The log so far."""
        return self.log_path.read_text(errors="replace")

    def wait_log(self, pattern: str, timeout: float) -> bool:
        """Poll the log (a real file the server appends to) until ``pattern`` is in it."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            if regex.search(self.log()):
                return True
            if self.proc.poll() is not None:
                return bool(regex.search(self.log()))
            time.sleep(0.05)
        return False


@contextlib.contextmanager
def running_0517(
    name: str,
    state_dir: Path,
    *,
    speed: float = 20.0,
    startup_s: float = 1.0,
) -> Iterator[Sim0517]:
    """Start the simulator with scenario ``name``'s flags; kill its group on exit.

    Args:
        name: a scenario of ``explore.SCENARIOS``.
        state_dir: GPUFLEET_STATE_DIR (the simulated GPUs live under it).
        speed: ``--sim-speed`` (the drain's 5 s checks take 5 / speed wall seconds).
        startup_s: ``--sim-startup-seconds``.
    """
    port = free_port()
    log_path = state_dir / f"sim-{name}-{port}.log"
    argv = [sys.executable, "-m", "tui", "sim", *scenario_argv(name, port)]
    argv += ["--sim-speed", str(speed), "--sim-startup-seconds", str(startup_s)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=sim_env(state_dir),
            start_new_session=True,
            cwd=ROOT,
        )
    sim = Sim0517(proc, port, log_path)
    try:
        yield sim
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
