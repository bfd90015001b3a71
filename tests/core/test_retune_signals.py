"""Log lines -> engine facts: phases, effective values, the OOM line of a crash chain."""

from __future__ import annotations

import repo_paths
from retune_helpers import FakeTarget, Script

from tui.logs.parser import parse_line
from tui.retune.engine import ApplyOptions, RetuneEngine
from tui.retune.ports import ServerSignal
from tui.retune.signals import SignalAdapter

FIXTURES = repo_paths.FIXTURES / "retune"


def signals_of(name: str) -> list[ServerSignal]:
    lines = (FIXTURES / name).read_text().splitlines()
    events = [e for e in (parse_line(t) for t in lines) if e is not None]
    return SignalAdapter().translate(events)


def test_startup_log_gives_phases_and_effective_values() -> None:
    signals = signals_of("aggressive_gpu0.log")
    phases = [s.text for s in signals if s.kind == "phase"]
    for phase in ("loading weights", "allocating pools", "capturing CUDA graphs", "warmed up"):
        assert phase in phases
    assert phases.index("loading weights") < phases.index("capturing CUDA graphs")
    effective = [s.effective for s in signals if s.kind == "effective"]
    # The draft pool's second KV line is not taken for the target pool.
    assert [e.kv_tokens for e in effective if e.kv_tokens] == [798080, 798080]
    assert any(e.cap_line and "capped to 40" in e.cap_line for e in effective)
    assert any(e.max_running_requests == 40 and e.available_gpu_mem_gb == 10.9 for e in effective)
    assert not [s for s in signals if s.kind == "error"]


async def test_oom_line_wins_over_the_first_line_of_the_crash_chain() -> None:
    signals = signals_of("oom_chain.log")
    reasons = [s.reason for s in signals if s.kind == "error"]
    assert reasons[0] != "oom" and "oom" in reasons  # the chain starts with another line
    script = Script(signals=[(0.0, s) for s in signals])
    target = FakeTarget({4: script})
    opts = ApplyOptions(timeout_s=5.0, poll_s=0.01, measure=False)
    result = await RetuneEngine(target, [4], opts).run()
    report = result.reports[0]
    assert report.error_reason == "oom"
    assert report.error_line is not None and "Not enough memory" in report.error_line


async def test_oom_line_arriving_after_the_first_error_still_wins() -> None:
    signals = signals_of("oom_chain.log")
    first, *rest = [s for s in signals if s.kind == "error"]
    # The OOM line is written after the engine already saw the chain's first line.
    script = Script(signals=[(0.0, first)] + [(0.05, s) for s in rest])
    target = FakeTarget({4: script})
    opts = ApplyOptions(timeout_s=5.0, poll_s=0.01, measure=False, release_timeout_s=1.0)
    # The fake target's release wait lets the later lines become due before the re-read.
    target.release_s = {4: 0.1}
    result = await RetuneEngine(target, [4], opts).run()
    assert result.reports[0].error_reason == "oom"
