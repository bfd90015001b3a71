"""``FleetOperator.canary`` / ``rollout`` hand ``tui.rollout`` the profile as the fleet runs it
(its ports), the GPU and the batch; and a core look becomes the console's ``CanaryLook``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import shipped_profiles

from tui.operator import FleetOperator
from tui.operator import fleet_operator as fleet_operator_module
from tui.operator.rollout_ops import CanaryLook, look_from
from tui.profiles import Profile
from tui.rollout.canary import CanaryOptions
from tui.rollout.rollout import RolloutOptions
from tui.rollout.stats import decide, look_level, paired
from tui.state.fleet_state import record_outcome


@pytest.fixture
def launched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Profile:
    """sim-baseline recorded as running on every GPU with other ports than its file's."""
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path))
    base = shipped_profiles()["sim-baseline"]
    moved = replace(base, ports=tuple(p + 1000 for p in base.ports))
    record_outcome(moved, list(moved.gpus), [])
    return moved


async def test_canary_and_rollout_get_the_running_profile(
    launched: Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Any, Any, Any]] = []

    async def fake_canary(
        profile: Profile, gpu: int, options: Any, on_event: Any, on_look: Any
    ) -> str:
        seen.append(("canary", profile, gpu, options))
        return "canary-result"

    async def fake_rollout(profile: Profile, options: Any, on_event: Any) -> str:
        seen.append(("rollout", profile, options.batch, options))
        return "rollout-result"

    monkeypatch.setattr(fleet_operator_module, "run_canary", fake_canary)
    monkeypatch.setattr(fleet_operator_module, "run_rollout", fake_rollout)
    window = CanaryOptions(window_s=30.0, warmup_s=5.0, max_window_s=60.0, interval_s=2.0)
    operator = FleetOperator(
        shipped_profiles()["sim-baseline"],
        canary_options=window,
        rollout_options=RolloutOptions(baseline_s=1.0),
    )
    assert await operator.canary("sim-baseline", 3) == "canary-result"
    assert await operator.rollout("sim-baseline", batch=2) == "rollout-result"
    (_, c_profile, c_gpu, c_opts), (_, r_profile, r_batch, r_opts) = seen
    assert c_profile.ports == launched.ports and c_gpu == 3 and c_opts is window
    assert r_profile.ports == launched.ports and r_batch == 2 and r_opts.baseline_s == 1.0


def test_look_from_turns_intervals_into_seconds() -> None:
    canary = [110.0, 112.0, 108.0, 111.0, 109.0, 113.0]
    control = [100.0, 101.0, 99.0, 100.0, 100.0, 102.0]
    est = paired(canary, control, look_level(0.95, 4))
    decision = decide(est, 0.03)
    look = look_from(6, decision, 5.0)
    assert isinstance(look, CanaryLook)
    assert (look.intervals, look.window_s, look.verdict) == (6, 30.0, decision.verdict)
    more = decision.more_intervals_to_bound
    assert look.more_s_to_bound == (None if more is None else more * 5.0)
