"""Shared test helper: the simulator as the recorded SGLang 0.5.17 server (``--sim-build 0.5.17``).

``tests/fixtures/real_sglang/0.5.17`` holds what a real 0.5.17 did, scenario by scenario (the
flags are ``bench/real_sglang/explore.py``'s ``SCENARIOS``). Here the simulator runs the same
flags, on a simulated H100, serving ``TINY``: the recorded random-weight Qwen3_5ForCausalLM
(3 Gated DeltaNet layers + 1 full-attention layer, hidden 256; ``model/config.json``), its sizes
computed from that config (dummy bf16 weights: 3,160,676 parameters; one full-attention layer:
2 KV heads of 64 dims, 512 B per token for K and V, the same for the MTP draft's layer; per Mamba
slot 9,216 B of conv state and 196,608 B of float32 SSM state).

The model is registered in the simulator's table by a ``sitecustomize`` before ``python -m tui
sim`` runs: the planner's own model folders (``--sim-model FOLDER``) are another helper's work;
once merged, ``--sim-model tests/fixtures/real_sglang/0.5.17/model`` can replace it.
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

from bench.ports import free_port
from bench.real_sglang.explore import BASE_FLAGS, SCENARIOS
from tui.sglang.models import GIB, ModelSpec

ROOT = Path(__file__).resolve().parent.parent
REAL = Path(__file__).parent / "fixtures" / "real_sglang" / "0.5.17"

TINY = ModelSpec(
    name="tiny-qwen35",
    model_path="/tmp/tiny",
    architecture="Qwen3_5ForCausalLM",
    quant=None,
    weight_bytes=6_321_352,
    draft_weight_bytes=0,
    kv_bytes_per_token=512,
    draft_kv_bytes_per_token=512,
    is_hybrid_mamba=True,
    conv_state_bytes=9_216,
    ssm_state_bytes=196_608,
    conv_window=3,
    is_multimodal=False,
    context_length=4096,
    default_page_size=1,
    activation_bytes_per_token=16_384,
    graph_base_bytes=int(0.2 * GIB),
    graph_bytes_per_bs=2 * 1024**2,
    decode_base_s=0.004,
    decode_per_req_s=0.0001,
    accept_length=1.0,
    prefill_tokens_per_s=20_000.0,
)
"""The recorded tiny model (see the module docstring)."""

_BOOT = (
    "from real0517_helpers import TINY\n"
    "from tui.sglang.models import MODELS\n"
    "MODELS.setdefault(TINY.name, TINY)\n"
)
"""``sitecustomize``: Python runs it at start-up, before ``-m tui sim``; the command line stays
the genuine one (the console's discovery recognises the server by it)."""


def tiny_env(state_dir: Path) -> dict[str, str]:
    """The environment of a simulator that knows ``TINY``, its state under ``state_dir``."""
    boot = state_dir / "boot"
    boot.mkdir(exist_ok=True)
    (boot / "sitecustomize.py").write_text(_BOOT)
    env = dict(os.environ)
    env["GPUFLEET_STATE_DIR"] = str(state_dir)
    env.pop("GPUFLEET_SIM_GPU_DIR", None)
    paths = (str(boot), str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def scenario_argv(name: str, port: int, swap: tuple[str, str] | None = None) -> list[str]:
    """The recorded scenario's flags (its port replaced, ``swap``'s flag renamed), as the
    simulator takes them."""
    flags, _, _ = SCENARIOS[name]
    if swap is not None:
        flags = [swap[1] if flag == swap[0] else flag for flag in flags]
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
        TINY.name,
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
    swap: tuple[str, str] | None = None,
) -> Iterator[Sim0517]:
    """Start the simulator with scenario ``name``'s flags; kill its group on exit.

    Args:
        name: a scenario of ``explore.SCENARIOS``.
        state_dir: GPUFLEET_STATE_DIR (the simulated GPUs live under it).
        speed: ``--sim-speed`` (the drain's 5 s checks take 5 / speed wall seconds).
        startup_s: ``--sim-startup-seconds``.
        swap: (recorded flag, flag to pass instead).
    """
    port = free_port()
    log_path = state_dir / f"sim-{name}-{port}.log"
    argv = [sys.executable, "-m", "tui", "sim", *scenario_argv(name, port, swap)]
    argv += ["--sim-speed", str(speed), "--sim-startup-seconds", str(startup_s)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=tiny_env(state_dir),
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
