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
from collections.abc import Iterator
from pathlib import Path

from repo_paths import FIXTURES
from sim_helpers import SimProcess, sim_process

from bench.ports import free_port
from bench.real_sglang.explore import BASE_FLAGS, SCENARIOS

REAL = FIXTURES / "real_sglang" / "0.5.17"

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


@contextlib.contextmanager
def running_0517(
    name: str,
    state_dir: Path,
    *,
    speed: float = 20.0,
    startup_s: float = 1.0,
) -> Iterator[SimProcess]:
    """Start the simulator with scenario ``name``'s flags; kill its group on exit.

    Args:
        name: a scenario of ``explore.SCENARIOS``.
        state_dir: GPUFLEET_STATE_DIR (the simulated GPUs live under it).
        speed: ``--sim-speed`` (the drain's 5 s checks take 5 / speed wall seconds).
        startup_s: ``--sim-startup-seconds``.
    """
    port = free_port()
    log_path = state_dir / f"sim-{name}-{port}.log"
    argv = scenario_argv(name, port)
    argv += ["--sim-speed", str(speed), "--sim-startup-seconds", str(startup_s)]
    with sim_process(argv, state_dir, port, log_path) as sim:
        yield sim
