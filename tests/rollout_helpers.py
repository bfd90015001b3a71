"""The rollout tests' simulated fleet under the real pipeline: bench/simfleet.py.

It lives there because the rollout bench runs the same fleet and benchmarks must not import
from tests/; this module keeps the tests' import name.
"""

from __future__ import annotations

from bench.simfleet import PipelineRun, SimFleet, pipeline, sim_fleet, wait_done_at_least

__all__ = ["PipelineRun", "SimFleet", "pipeline", "sim_fleet", "wait_done_at_least"]
