"""The rollout tests' simulated fleet under the real pipeline: bench/simfleet.py.

It lives there because the rollout bench runs the same fleet and benchmarks must not import
from tests/; this module keeps the tests' import name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from bench.simfleet import PipelineRun, SimFleet, pipeline, sim_fleet, wait_done_at_least

__all__ = [
    "PipelineRun",
    "SimFleet",
    "fleet_under_load",
    "pipeline",
    "sim_fleet",
    "wait_done_at_least",
]


@contextlib.contextmanager
def fleet_under_load(
    tmp: Path, gpus: int, speed: float, max_tokens: int, done: int = 40
) -> Iterator[tuple[SimFleet, PipelineRun]]:
    """A simulated fleet on the baseline under the real pipeline (50,000 prompts of
    ``max_tokens``), yielded once the pipeline finished ``done`` requests."""
    with (
        sim_fleet(tmp, gpus, speed) as fleet,
        pipeline(tmp, fleet.urls, prompts=50_000, max_tokens=max_tokens) as run,
    ):
        wait_done_at_least(run, done, timeout=30)
        yield fleet, run
