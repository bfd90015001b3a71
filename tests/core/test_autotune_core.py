"""Autotune's pure parts: the space, the strategy's moves and order, the budget, the status and
control files, and the CLI's refusals (no servers: fast)."""

from __future__ import annotations

import asyncio
import os
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bench.simfleet import BASELINE, sim_profile_text
from tui.autotune import cli
from tui.autotune.budget import Budget, Spent, exploration_cost
from tui.autotune.options import AutotuneOptions, parse_knob
from tui.autotune.search import Autotuner
from tui.autotune.space import (
    Candidate,
    SearchSpace,
    candidate_profile,
    knobs_of,
    space_from,
)
from tui.autotune.status import (
    describe_status,
    holder_alive,
    read_request,
    read_status,
    request,
    status_file,
    write_status,
)
from tui.autotune.strategy import (
    apply_move,
    coupled_moves,
    further,
    kv_room,
    neighbours,
    point_key,
    rank,
    same_server,
    starves_kv,
    with_room,
)
from tui.ops.service import FleetOps
from tui.profiles import Profile, ProfileError, flags_for, profile_from_dict
from tui.retune.preflight import preflight
from tui.rollout.canary_result import CanaryResult
from tui.rollout.cost import RetuneCost
from tui.rollout.stats import paired
from tui.state.files import StateFileError


def seed_profile(tmp_path: Path) -> Profile:
    text = sim_profile_text("t-baseline", [0, 1], [41000, 41001], str(tmp_path), BASELINE, 10.0)
    return profile_from_dict(tomllib.loads(text), "t-baseline")


def on_the_ridge(tmp_path: Path, **knobs: float) -> Profile:
    """The seed's baseline with ``knobs`` set (a point of the Mamba ridge the tests start on)."""
    return candidate_profile(seed_profile(tmp_path), Candidate.of(knobs), "inc")


def test_parse_knob_and_its_errors() -> None:
    assert parse_knob("max_running_requests=32,16,32") == ("max_running_requests", (16, 32))
    assert parse_knob("mem_fraction_static=0.9") == ("mem_fraction_static", (0.9,))
    with pytest.raises(
        ValueError, match=r"knob 'max_tokens': unknown.*allowed: mem_fraction_static"
    ):
        parse_knob("max_tokens=3")
    with pytest.raises(ValueError, match=r"max_running_requests.values '1\.5': not an integer"):
        parse_knob("max_running_requests=1.5")
    with pytest.raises(ValueError, match="expected NAME=V1,V2"):
        parse_knob("max_running_requests")
    space = space_from([("max_running_requests", (8, 16))])
    assert space.knobs() == ["max_running_requests"]
    assert SearchSpace.default().size() == 4 * 9 * 4 * 9 * 4 * 3


def test_candidate_profile_sets_the_knobs_and_steps_pin_draft_tokens(tmp_path: Path) -> None:
    inc = seed_profile(tmp_path)
    move = Candidate.of({"speculative_num_steps": 4, "cuda_graph_max_bs_decode": 48})
    cand = candidate_profile(inc, move, "c1")
    flags = flags_for(cand, 0)
    assert cand.name == "c1" and flags.speculative_num_steps == 4
    # topk 1: SGLang 0.5.23 pins draft tokens to steps + 1 (speculative_hook.py)
    assert flags.speculative_num_draft_tokens == 5
    assert dict(flags.extra_flags)["cuda_graph_max_bs_decode"] == 48
    assert flags.mem_fraction_static == 0.88  # untouched knobs stay the incumbent's
    with pytest.raises(ProfileError, match="max_running_requests"):
        candidate_profile(inc, Candidate.of({"max_running_requests": 0}), "bad")


def test_neighbours_move_one_knob_to_the_adjacent_values(tmp_path: Path) -> None:
    inc = seed_profile(tmp_path)
    space = space_from(
        [("mem_fraction_static", (0.84, 0.88, 0.91, 0.93)), ("max_running_requests", (16, 32))]
    )
    current = knobs_of(inc, space)
    assert current == {"mem_fraction_static": 0.88, "max_running_requests": None}
    keys = [c.key() for c in neighbours(space, current)]
    # next value down and up for a set knob; every value for one on SGLang's auto
    assert keys == [
        "mem_fraction_static=0.84",
        "mem_fraction_static=0.91",
        "max_running_requests=16",
        "max_running_requests=32",
    ]
    moved = apply_move(current, Candidate.of({"max_running_requests": 32}))
    assert point_key(moved) == "mem_fraction_static=0.88,max_running_requests=32"
    assert [c.key() for c in neighbours(space, moved)][-1] == "max_running_requests=16"


def test_rank_drops_what_does_not_fit_and_puts_more_concurrency_first(tmp_path: Path) -> None:
    inc = seed_profile(tmp_path)
    moves = [
        Candidate.of({"mem_fraction_static": 0.35}),  # weights leave no room: does not fit
        Candidate.of({"max_running_requests": 4}),
        Candidate.of({"max_mamba_cache_size": 120}),  # 120 slots / 5 per request: 24 running
    ]
    predicted = [(m, preflight(candidate_profile(inc, m, "c"), 0)) for m in moves]
    assert not predicted[0][1].fits and "does not fit" in (predicted[0][1].why_not or "")
    order = [r.candidate.key() for r in rank(predicted)]
    assert order == ["max_mamba_cache_size=120", "max_running_requests=4"]


def test_rank_tries_a_graph_ceiling_below_the_batch_after_moves_that_keep_it_covered(
    tmp_path: Path,
) -> None:
    inc = on_the_ridge(tmp_path, max_mamba_cache_size=320, max_running_requests=64)
    moves = [
        Candidate.of({"cuda_graph_max_bs_decode": 16}),  # 64 running, graphs up to 16
        Candidate.of({"speculative_num_steps": 2}),  # 64 running, graphs cover them
    ]
    predicted = [(m, preflight(candidate_profile(inc, m, "c"), 0)) for m in moves]
    low, steps = (p for _, p in predicted)
    assert low.max_running_effective == steps.max_running_effective == 64
    assert low.plan.cuda_graph_max_bs == 16 and steps.plan.cuda_graph_max_bs >= 64
    order = [r.candidate.key() for r in rank(predicted)]
    assert order == ["speculative_num_steps=2", "cuda_graph_max_bs_decode=16"]


def test_a_move_that_outgrows_the_kv_pool_is_also_proposed_with_more_memory(
    tmp_path: Path,
) -> None:
    inc = on_the_ridge(
        tmp_path, max_mamba_cache_size=360, max_running_requests=72, speculative_num_steps=2
    )
    space = SearchSpace.default()
    knobs = knobs_of(inc, space)
    current = preflight(inc, 0)
    move = Candidate.of({"max_mamba_cache_size": 400, "max_running_requests": 80})
    tight = preflight(candidate_profile(inc, move, "m"), 0)
    assert tight.max_running_effective == 80 > current.max_running_effective
    assert kv_room(tight, 2500) < kv_room(current, 2500)  # 80 running on a pool sized for 72
    roomier = with_room(space, knobs, move, tight, current, 2500)
    assert roomier is not None and roomier.as_dict() == {
        "mem_fraction_static": 0.91,
        "max_mamba_cache_size": 400,
        "max_running_requests": 80,
    }
    roomy = preflight(candidate_profile(inc, roomier, "r"), 0)
    assert roomy.fits and kv_room(roomy, 2500) > kv_room(tight, 2500)
    order = [r.candidate for r in rank([(move, tight), (roomier, roomy)])]
    assert order == [roomier, move]  # same batch, more room first
    # a move that does not raise the batch, or already sets the fraction, is left alone
    slots = Candidate.of({"max_mamba_cache_size": 400})
    same = preflight(candidate_profile(inc, slots, "s"), 0)
    assert with_room(space, knobs, slots, same, current, 2500) is None
    assert with_room(space, knobs, roomier, roomy, current, 2500) is None
    # ... and that one (the same 72 running, the Mamba pool taking the KV pool's memory) is
    # predicted to retract: never canaried; more memory at the same batch is not
    assert same.max_running_effective == 72 and kv_room(same, 2500) < kv_room(current, 2500)
    assert starves_kv(same, current, 2500)
    more = preflight(candidate_profile(inc, Candidate.of({"mem_fraction_static": 0.91}), "f"), 0)
    assert not starves_kv(more, current, 2500)
    assert not starves_kv(roomy, current, 2500)  # a larger batch is judged by its canary


async def test_the_search_records_a_move_predicted_to_retract_as_skipped_never_launched(
    tmp_path: Path,
) -> None:
    inc = on_the_ridge(
        tmp_path, max_mamba_cache_size=360, max_running_requests=72, speculative_num_steps=2
    )
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(gpu=0))
    tuner.incumbent, tuner.gpu = inc, 0
    tuner.knobs = knobs_of(inc, tuner.options.space)
    visited: set[str] = set()
    move = Candidate.of({"max_mamba_cache_size": 400})
    assert await tuner._predict_one(move, preflight(inc, 0), visited) is None
    (record,) = tuner.records
    assert record.decision == "skipped" and not record.launched
    assert record.why.startswith("predicted to retract: the same batch of 72 with ")
    assert point_key(apply_move(tuner.knobs, move)) in visited  # never proposed again


async def test_a_move_measured_worse_still_brings_its_variant_with_more_memory(
    tmp_path: Path,
) -> None:
    # On 320 slots / 64 running at fraction 0.88, the line went on to 360 slots / 72 running,
    # measured -36% (the KV pool binds): visited. Its variant at fraction 0.91 is proposed.
    inc = on_the_ridge(tmp_path, max_mamba_cache_size=320, max_running_requests=64)
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(gpu=0))
    tuner.incumbent, tuner.gpu = inc, 0
    tuner.knobs = knobs_of(inc, tuner.options.space)
    worse = Candidate.of({"max_mamba_cache_size": 360, "max_running_requests": 72})
    visited = {point_key(apply_move(tuner.knobs, worse))}
    ranked = await tuner._predict([], visited, [worse])
    assert [r.candidate.as_dict() for r in ranked] == [
        {"mem_fraction_static": 0.91, "max_mamba_cache_size": 360, "max_running_requests": 72}
    ]
    assert tuner.records == []  # the tried move is not recorded again


async def test_a_canary_whose_controls_made_no_tokens_ends_the_search(tmp_path: Path) -> None:
    """On a fleet no job sends requests to, every candidate would cost its GPU a relaunch and a
    window for the same "not measured": the first such canary ends the search, its candidate
    recorded as failed and the canary GPU put back on the incumbent. A canary that failed for
    its own reasons (controls busy) lets the search go on to the next candidate."""
    from dataclasses import replace

    from ui_helpers import verify_report

    from tui.autotune.strategy import Ranked
    from tui.autotune.trials import IDLE_FLEET

    inc = on_the_ridge(tmp_path, max_mamba_cache_size=320, max_running_requests=64)
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(gpu=0))
    tuner.incumbent, tuner.gpu = inc, 0
    tuner.knobs = knobs_of(inc, tuner.options.space)
    idle = CanaryResult(
        "c",
        0,
        (1,),
        "inc",
        "not measured",
        "no verdict: the control GPUs made no tokens in the 6 intervals of the window",
        None,
        None,
        canary_tokens=(0.0,) * 6,
        control_tokens=(0.0,) * 6,
        report=verify_report(0, "c"),
    )
    assert idle.ok and idle.controls_idle
    results = [idle]
    back: list[str] = []

    async def canary(profile: Profile, controls: list[int]) -> tuple[CanaryResult, bool]:
        return results[-1], False

    async def back_to(profile: Profile, gpus: list[int] | None = None) -> None:
        back.append(profile.name)

    tuner._canary = canary  # type: ignore[method-assign]  # the test's stand-in
    tuner._back_to = back_to  # type: ignore[method-assign]  # the test's stand-in
    move = Candidate.of({"max_running_requests": 72})
    best = Ranked(move, preflight(inc, 0), (1.0,))
    assert await tuner._try(best, [1]) == IDLE_FLEET
    (record,) = tuner.records
    assert record.decision == "failed" and record.why.startswith("not measured")
    assert back == [inc.name]
    # busy controls, the canary unmeasured for another reason: the search goes on
    busy = replace(idle, control_tokens=(900.0,) * 6, reason="no verdict: GPU 0 stopped")
    assert not busy.controls_idle
    results.append(busy)
    assert await tuner._try(best, [1]) is None
    assert len(tuner.records) == 2 and back == [inc.name, inc.name]


def canary_result(relative: float, window_s: float, lost: float | None) -> CanaryResult:
    canary = [100.0 * (1 + relative) + (i % 2) for i in range(6)]
    control = [100.0 + (i % 3) for i in range(6)]
    cost = RetuneCost(lost, lost, lost, 700.0, 100.0, 7, 10.0, True)
    tok = paired(canary, control, 0.95)
    return CanaryResult("c", 0, (1,), "b", "worse", "", tok, None, window_s=window_s, cost=cost)


def test_budget_counts_restart_dip_and_regression_and_stops_before_overspending() -> None:
    worse = canary_result(-0.5, 10.0, 3.0)
    assert exploration_cost(worse) == pytest.approx(3.0 + 0.5 * 10.0, abs=0.3)
    assert exploration_cost(canary_result(0.4, 10.0, 2.0)) == 2.0  # a gain is not credited
    assert exploration_cost(canary_result(0.4, 10.0, None)) == 0.0
    budget = Budget(wall_s=100, explore_gpu_s=20, max_regression=0.2)
    assert Spent(explore_gpu_s=8, canaries=1).exhausted(budget) is None
    why = Spent(explore_gpu_s=12, canaries=1).exhausted(budget)
    assert why is not None and "exploration budget" in why  # 12 + 12 would pass 20
    assert "wall-time" in (Spent(wall_s=100).exhausted(budget) or "")
    assert Budget(0, -1, 1.5).errors() == [
        "wall_s=0: must be > 0 seconds",
        "explore_gpu_s=-1: must be > 0 GPU-seconds",
        "max_regression=1.5: must be in (0, 1)",
    ]


def test_status_is_replaced_whole_and_requests_older_than_the_search_are_ignored() -> None:
    assert read_status() is None
    me = {"phase": "searching", "pid": os.getpid(), "candidates": []}
    import psutil

    me["create_time"] = psutil.Process().create_time()
    write_status(me)
    doc = read_status()
    assert doc is not None and doc["phase"] == "searching" and doc["updated_at"] > 0
    assert holder_alive(doc)
    assert not holder_alive({**doc, "create_time": doc["create_time"] - 100})  # a reused pid
    assert "STALE" in describe_status({**doc, "create_time": 1.0})
    request("pause")
    assert read_request(time.time() - 60) is not None
    assert read_request(time.time() + 60) is None
    with pytest.raises(ValueError, match="allowed: pause, resume, stop"):
        request("kill")  # type: ignore[arg-type]  # not an action, on purpose
    status_file().write_text("{not json")
    with pytest.raises(StateFileError, match=r"status\.json"):
        read_status()


def test_cli_refuses_bad_input_and_requests_without_a_search(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["start", "--knob", "max_tokens=3"]) == 2
    assert "knob 'max_tokens': unknown" in capsys.readouterr().err
    assert cli.main(["start", "--max-window", "1", "--window", "1"]) == 2
    assert "window_s" in capsys.readouterr().err
    # no running servers: refused before anything ran, in one line
    assert cli.main(["start", "--knob", "max_running_requests=8"]) == 2
    assert "at least 2 running GPUs" in capsys.readouterr().err
    assert cli.main(["stop"]) == 2
    assert "no search is running" in capsys.readouterr().err
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "autotune:" in out


def test_a_move_predicted_to_run_exactly_as_the_incumbent_is_recognised(tmp_path: Path) -> None:
    inc = seed_profile(tmp_path)
    current = preflight(inc, 0)
    assert current.max_running_effective == 16  # SGLang's Mamba cap: 80 slots / 5 per request

    def same(knobs: dict[str, float]) -> bool:
        return same_server(preflight(candidate_profile(inc, Candidate.of(knobs), "c"), 0), current)

    # above the cap, or a graph ceiling above the batch that can run: nothing changes
    assert same({"max_running_requests": 48})
    assert same({"cuda_graph_max_bs_decode": 64})
    # more Mamba slots, fewer speculative steps, a ceiling below the batch: a different server
    assert not same({"max_mamba_cache_size": 120})
    assert not same({"speculative_num_steps": 2})
    assert not same({"cuda_graph_max_bs_decode": 8})


def test_coupled_knobs_also_move_together_one_step_each() -> None:
    space = space_from(
        [("max_mamba_cache_size", (80, 120, 160)), ("max_running_requests", (16, 24, 32))]
    )
    current = {"max_mamba_cache_size": 120, "max_running_requests": 24}
    assert [c.key() for c in coupled_moves(space, current)] == [
        "max_mamba_cache_size=160,max_running_requests=32",
        "max_mamba_cache_size=80,max_running_requests=16",
    ]
    keys = [c.key() for c in neighbours(space, current)]
    assert keys[:4] == [
        "max_mamba_cache_size=80",
        "max_mamba_cache_size=160",
        "max_running_requests=16",
        "max_running_requests=32",
    ]
    assert keys[4:] == [c.key() for c in coupled_moves(space, current)]
    # at the top of one knob's list there is no joint step up
    top = {"max_mamba_cache_size": 160, "max_running_requests": 24}
    assert [c.key() for c in coupled_moves(space, top)] == [
        "max_mamba_cache_size=120,max_running_requests=16"
    ]
    # a space without both knobs of a pair has no joint moves
    assert coupled_moves(space_from([("max_running_requests", (16, 24))]), current) == []


def key_of(move: Candidate | None) -> str | None:
    """A move's key (None: no move)."""
    return None if move is None else move.key()


def test_further_takes_a_better_move_on_along_its_line() -> None:
    space = space_from(
        [
            ("max_mamba_cache_size", (80, 120, 160, 200, 240, 280)),
            ("max_running_requests", (16, 24, 32)),
            ("mem_fraction_static", (0.85, 0.88)),
        ]
    )
    incumbent = {"max_mamba_cache_size": 80, "max_running_requests": None}
    up = Candidate.of({"max_mamba_cache_size": 120})
    assert [key_of(further(space, incumbent, up, n)) for n in (1, 2, 4)] == [
        "max_mamba_cache_size=160",
        "max_mamba_cache_size=200",
        "max_mamba_cache_size=280",
    ]
    assert key_of(further(space, incumbent, up, 9)) == "max_mamba_cache_size=280"
    down = Candidate.of({"max_mamba_cache_size": 200})
    assert key_of(further(space, {"max_mamba_cache_size": 240}, down, 2)) == (
        "max_mamba_cache_size=120"
    )
    # at the end of the list, or from SGLang's automatic value, there is no line to follow
    assert further(space, incumbent, Candidate.of({"max_mamba_cache_size": 280}), 1) is None
    assert further(space, incumbent, Candidate.of({"max_running_requests": 24}), 1) is None
    # a coupled move goes on together; a knob at its end stays while the other moves on
    pair = Candidate.of({"max_mamba_cache_size": 240, "max_running_requests": 32})
    start = {"max_mamba_cache_size": 200, "max_running_requests": 24}
    assert key_of(further(space, start, pair, 1)) == (
        "max_mamba_cache_size=280,max_running_requests=32"
    )


def test_on_the_mamba_ridge_only_a_coupled_move_raises_the_batch(tmp_path: Path) -> None:
    # Speculative decoding with max_running_requests on auto: SGLang 0.5.23 runs 48. More Mamba
    # slots alone still run 48 and more running requests alone are capped back to 48, so the
    # single-knob climb stopped here (0.871 of the grid's best, measured); the joint move runs 56.
    space = SearchSpace.default()
    inc = candidate_profile(
        seed_profile(tmp_path), Candidate.of({"max_mamba_cache_size": 240}), "i"
    )
    current = knobs_of(inc, space)
    assert current["max_running_requests"] is None
    base = preflight(inc, 0)
    assert base.max_running_effective == 48
    predicted = []
    for move in neighbours(space, current):
        prediction = preflight(candidate_profile(inc, move, "c"), 0)
        if len(move.knobs) == 1:
            assert prediction.max_running_effective <= 48, move.key()
        if prediction.fits and not same_server(prediction, base):
            predicted.append((move, prediction))
    ranked = rank(predicted)
    assert ranked[0].candidate.key() == "max_mamba_cache_size=280,max_running_requests=56"
    assert ranked[0].prediction.max_running_effective == 56
    # 280 slots with 64, 72 or 80 running are capped to the same 56: one canary, not four
    tried = [r.candidate.key() for r in ranked]
    assert "max_mamba_cache_size=280,max_running_requests=64" not in tried
    for i, earlier in enumerate(ranked):
        assert not any(same_server(earlier.prediction, r.prediction) for r in ranked[i + 1 :])


def _tuner_with_canary(
    tmp_path: Path, results: list[CanaryResult], max_regression: float = 0.25
) -> tuple[Autotuner, list[str]]:
    """A tuner on the ridge whose canaries answer ``results`` (the last one again and again)
    and whose walks back are recorded, no servers."""
    from tui.autotune.budget import Budget

    inc = on_the_ridge(tmp_path, max_mamba_cache_size=320, max_running_requests=64)
    opts = AutotuneOptions(gpu=0, budget=Budget(max_regression=max_regression))
    tuner = Autotuner(FleetOps(by="autotune"), opts)
    tuner.incumbent, tuner.gpu = inc, 0
    tuner.knobs = knobs_of(inc, tuner.options.space)
    back: list[str] = []

    async def canary(profile: Profile, controls: list[int]) -> tuple[CanaryResult, bool]:
        return results[0] if len(results) == 1 else results.pop(0), False

    async def back_to(profile: Profile, gpus: list[int] | None = None) -> None:
        back.append(profile.name)

    tuner._canary = canary  # type: ignore[method-assign]  # the test's stand-in
    tuner._back_to = back_to  # type: ignore[method-assign]  # the test's stand-in
    return tuner, back


def _load_changed(idle: bool) -> CanaryResult:
    from ui_helpers import verify_report

    from tui.rollout.load import LoadChange

    what = (
        "the controls' offered load fell from 48 to 0 requests per GPU, 35 s into the window: "
        "the job's requests stopped"
        if idle
        else "the controls' offered load fell from 48 to 24 requests per GPU, 35 s into the window"
    )
    change = LoadChange(what, 35.0, 0.0 if idle else 24.0, idle)
    return CanaryResult(
        "c",
        0,
        (1,),
        "inc",
        "not measured",
        change.words(),
        None,
        None,
        canary_tokens=(1263.0,) * 6,
        control_tokens=(2768.0,) * 6,
        report=verify_report(0, "c"),
        load_change=change,
    )


async def test_a_job_that_ends_during_a_trial_abandons_it_and_spends_no_regression_budget(
    tmp_path: Path,
) -> None:
    """The demo's candidate #16: the job finished during its canary. It read 'worse: -54.4%'
    and ended the search on its regression budget; now it is abandoned, said, and the search
    ends on the job, the canary GPU back on the incumbent."""
    from tui.autotune.strategy import Ranked
    from tui.autotune.trials import JOB_STOPPED

    tuner, back = _tuner_with_canary(tmp_path, [_load_changed(idle=True)])
    move = Candidate.of({"max_running_requests": 72})
    assert tuner.incumbent is not None
    best = Ranked(move, preflight(tuner.incumbent, 0), (1.0,))
    tuner.visited.add(point_key(apply_move(tuner.knobs, move)))
    reason = await tuner._try(best, [1])
    assert reason == JOB_STOPPED.format(index=1)
    assert "regression budget" not in str(reason)
    (record,) = tuner.records
    assert record.decision == "abandoned" and record.verdict == "not measured"
    assert record.relative is None and record.rel_low is None  # no interval, none beyond -100%
    assert record.why.startswith("not measured: the load changed (the controls' offered load")
    assert record.why.endswith("; rolled back to inc")
    assert back == ["inc"]
    assert tuner.spent.canaries == 1


async def test_a_trial_the_load_changed_under_is_measured_again_once(tmp_path: Path) -> None:
    from tui.autotune.strategy import Ranked

    tuner, back = _tuner_with_canary(tmp_path, [_load_changed(idle=False)])
    move = Candidate.of({"max_running_requests": 72})
    assert tuner.incumbent is not None
    best = Ranked(move, preflight(tuner.incumbent, 0), (1.0,))
    point = point_key(apply_move(tuner.knobs, move))
    tuner.visited.add(point)
    assert await tuner._try(best, [1]) is None  # the search goes on
    assert tuner.records[-1].why.endswith("rolled back to inc; to be measured again")
    assert point not in tuner.visited  # proposed again next round
    tuner.visited.add(point)
    assert await tuner._try(best, [1]) is None
    assert not tuner.records[-1].why.endswith("to be measured again")
    assert point in tuner.visited  # once is enough
    assert [r.decision for r in tuner.records] == ["abandoned", "abandoned"]
    assert back == ["inc", "inc"]


async def test_only_a_worse_verdict_spends_the_regression_budget(tmp_path: Path) -> None:
    from ui_helpers import verify_report

    from tui.autotune.strategy import Ranked

    def result(canary: list[float]) -> CanaryResult:
        control = [1000.0 + 5 * (i % 3) for i in range(len(canary))]
        tok = paired(canary, control, 0.95)
        assert tok is not None
        verdict = "worse" if tok.rel_high < 0 else "no measurable difference"
        return CanaryResult(
            "c", 0, (1,), "inc", verdict, "", tok, None, report=verify_report(0, "c")
        )

    # -40%, its interval reaching above 0 (a noisy window): no evidence of a regression
    noisy = result([200.0, 1100.0, 300.0, 1000.0, 400.0, 600.0])
    assert noisy.tokens is not None and noisy.tokens.relative < -0.25 < noisy.tokens.rel_high
    tuner, _ = _tuner_with_canary(tmp_path, [noisy])
    assert tuner.incumbent is not None
    best = Ranked(Candidate.of({"max_running_requests": 72}), preflight(tuner.incumbent, 0), ())
    assert await tuner._try(best, [1]) is None
    assert tuner.records[-1].decision == "dropped"
    # -40%, its interval below 0: the budget is spent, the search ends
    worse = result([600.0, 610.0, 590.0, 605.0, 600.0, 595.0])
    tuner, _ = _tuner_with_canary(tmp_path, [worse])
    reason = await tuner._try(best, [1])
    assert reason is not None and reason.startswith("regression budget: candidate #1 measured -40")


async def test_a_move_predicted_to_run_a_server_measured_already_is_not_canaried_again(
    tmp_path: Path,
) -> None:
    # The demo's search canaried 120 slots, then 120 slots with 24, 32, ... 80 running: every
    # one capped to the same 24 (120 // 5), nine canaries of one server.
    inc = seed_profile(tmp_path)
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(gpu=0))
    tuner.incumbent, tuner.gpu = inc, 0
    tuner.knobs = knobs_of(inc, tuner.options.space)
    slots = Candidate.of({"max_mamba_cache_size": 120})
    tuner.measured = [(3, preflight(candidate_profile(inc, slots, "s"), 0))]
    visited: set[str] = set()
    pair = Candidate.of({"max_mamba_cache_size": 120, "max_running_requests": 48})
    assert await tuner._predict_one(pair, preflight(inc, 0), visited) is None
    (record,) = tuner.records
    assert record.decision == "skipped" and record.why == "predicted to run as #3, measured already"
    assert not record.launched
    # another server is still predicted and proposed
    more = Candidate.of({"max_mamba_cache_size": 160, "max_running_requests": 32})
    assert await tuner._predict_one(more, preflight(inc, 0), visited) is not None


async def test_the_status_stays_live_through_a_canary_and_lists_the_line_s_pending_best(
    tmp_path: Path,
) -> None:
    """'Spent:' froze through a canary (the status was written at its looks only: none in its
    baseline, restart and warm-up), and the line's best (#15, measured better, held while #16
    measured) was missing from 'autotune status' until the search ended."""
    from dataclasses import replace

    from ui_helpers import verify_report

    from tui.autotune.record import new_record
    from tui.autotune.status import status_document

    inc = seed_profile(tmp_path)
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(gpu=0, poll_s=0.02))
    tuner.incumbent, tuner.gpu = inc, 0
    tuner.knobs = knobs_of(inc, tuner.options.space)
    tuner.heartbeat_s = 0.05
    best = new_record(
        15, Candidate.of({"max_mamba_cache_size": 160}), "a-15", "inc", preflight(inc, 0)
    )
    tuner.pending[15] = replace(best, why="the best of its line so far")
    written: list[dict[str, Any]] = []

    async def status() -> None:
        tuner._tick()
        written.append(status_document(tuner))

    tuner._status = status  # type: ignore[method-assign]  # the test's stand-in
    done = CanaryResult("c", 0, (1,), "inc", "not measured", "", None, None)

    class Ops:
        async def canary(self, *args: object, **kwargs: object) -> CanaryResult:
            # a canary that takes as long as three heartbeats (a deadline, not a sleep)
            deadline = time.monotonic() + 10
            while len(written) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return replace(done, report=verify_report(0, "c"))

    tuner.ops = Ops()  # type: ignore[assignment]  # a stand-in: only its canary is called
    result, stop = await tuner._canary(inc, [1])
    assert result is not None and not stop
    assert len(written) >= 3, "the status was not rewritten during the canary"
    spent = [doc["spent"]["wall_s"] for doc in written]
    assert spent == sorted(spent) and spent[-1] > spent[0]
    # the line's best stays listed while it is undecided
    listed = [c["index"] for c in written[-1]["candidates"]]
    assert 15 in listed
    assert "#15 max_mamba_cache_size=160: pending" in describe_status(written[-1])
