"""Rollback walks the fleet like a rollout, on a simulated fleet under the real pipeline (real
processes): one GPU at a time in reverse GPU order, each verified before the next, then the
fleet's verdict (its output tokens/s before the first GPU stopped against after the last one,
with its interval) in the CLI's output and the journal; every GPU at once only when asked.

The verdict is checked present and measured, never which way it went: that would compare
measured throughput, which belongs to the serial pass (tests/conftest.py).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_paths import ROOT
from rollout_helpers import PipelineRun, SimFleet, pipeline, sim_fleet, wait_done_at_least

from bench.simfleet import FAST_APPLY
from tui.ops.cli import apply as apply_cli
from tui.ops.cli import rollout as rollout_cli
from tui.ops.journal import read_journal
from tui.state.fleet_state import read_records

FAST_WALK = ["--timeout", "60", "--term-timeout", "5", "--release-timeout", "20"]
"""Short per-GPU timeouts."""
WINDOWS = ["--window", "3", "--warmup", "1", "--interval", "0.5", "--baseline", "0"]
"""A short fleet verdict: 3 s each side in 0.5 s samples, 1 s of warm-up."""
MEASURED = r"fleet throughput [\d,]+ -> [\d,]+ tok/s: (better|worse|no measurable difference)"
"""The verdict line of a measured walk."""


@pytest.fixture()
def loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SimFleet, PipelineRun]]:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    with (
        sim_fleet(tmp_path, 3, 40.0) as fleet,
        # short requests: each drain waits for the requests in flight (SGLang's drain)
        pipeline(tmp_path, fleet.urls, prompts=50_000, max_tokens=400) as run,
    ):
        wait_done_at_least(run, 20, timeout=30)
        assert apply_cli.main([str(fleet.files["aggressive"]), *FAST_APPLY]) == 0
        yield fleet, run


def test_rollback_walks_one_gpu_at_a_time_and_ends_with_the_fleet_verdict(
    loaded: tuple[SimFleet, PipelineRun], capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, run = loaded
    capsys.readouterr()
    assert rollout_cli.main(["--rollback", *FAST_WALK, *WINDOWS, "--settle", "0"]) == 0
    out = capsys.readouterr().out
    assert re.search(MEASURED, out), out
    assert "throughput: before window 3 s" in out and "throughput: after window 3 s" in out
    steps = [e for e in read_journal().entries if e.type.startswith("rollback")]
    assert [s.type for s in steps] == ["rollback-step"] * 3 + ["rollback"]
    assert [s.gpus for s in steps[:3]] == [(2,), (1,), (0,)], "one GPU at a time, reversed"
    for a, b in itertools.pairwise(steps[:3]):
        assert b.started_at >= a.finished_at, "each GPU verified before the next stops"
    summary = steps[-1]
    assert summary.ok and summary.verdict in ("better", "worse", "no measurable difference")
    assert re.search("; " + MEASURED, summary.summary), summary.summary
    verdict = summary.detail["verdict"]
    assert len(verdict["before"]) >= 3 and len(verdict["after"]) >= 3  # a verdict's least
    assert verdict["ci_low"] <= verdict["relative_change"] <= verdict["ci_high"]
    # beside the throughput, the fleet's TTFT p90 and tokens per joule, after against before
    beside = summary.detail["beside"]
    assert f"fleet {beside['words']}" in out
    for side in ("before", "after"):
        figures = beside[side]
        assert figures["gpus"] == [0, 1, 2] and figures["ttft_requests"] >= 20, figures
        assert figures["ttft_p90_s"] > 0 and figures["tokens_per_joule"] > 0, figures
        assert figures["tokens_per_joule"] == pytest.approx(figures["tokens"] / figures["joules"])
    assert beside["before"]["window"][1] <= beside["after"]["window"][0]
    assert beside["ttft_p90"]["relative"] is not None or "bucket" in beside["ttft_p90"]["note"]
    assert beside["tokens_per_joule"]["relative"] == pytest.approx(
        beside["after"]["tokens_per_joule"] / beside["before"]["tokens_per_joule"] - 1
    )
    assert {r.profile for r in read_records().values()} == {"t-baseline"}
    assert run.proc.poll() is None, "the job went on through the rollback"

    # All at once only when asked: `gpufleet apply --rollback --all-at-once` is one batch.
    assert apply_cli.main([str(fleet.files["aggressive"]), *FAST_APPLY]) == 0
    capsys.readouterr()
    assert apply_cli.main(["--rollback", "--all-at-once", *FAST_APPLY]) == 0
    out = capsys.readouterr().out
    assert "fleet throughput: not measured (no verdict was asked for)" in out  # --no-measure
    steps = [e for e in read_journal().entries if e.type.startswith("rollback")][-2:]
    assert [s.type for s in steps] == ["rollback-step", "rollback"]
    assert sorted(steps[0].gpus) == [0, 1, 2]
    assert {r.profile for r in read_records().values()} == {"t-baseline"}


def test_a_rollback_plan_within_the_fleet_leaves_other_gpus_records_alone() -> None:
    # A smaller demo after a larger one: the state remembers GPUs the door does not serve.
    from tui.profiles import load_profile, profile_to_dict
    from tui.rollout.rollout import rollback_plan
    from tui.state.fleet_state import GpuState, update_fleet

    doc = profile_to_dict(load_profile(ROOT / "profiles/sim-baseline.toml"))
    update_fleet(lambda _: {g: GpuState(g, 30000 + g, current=doc, previous=doc) for g in range(4)})
    assert [g for g, _ in rollback_plan()] == [3, 2, 1, 0]
    assert [g for g, _ in rollback_plan(within=(0, 1))] == [1, 0]
    assert [g for g, _ in rollback_plan([3], within=(0, 1))] == [3]  # named GPUs: as named
    assert rollback_plan(within=(7,)) == []
