"""Autotune's knobs, ranges and budget (one parser for the CLI, its config file and the console's
form), the wall budget that pauses do not spend, and a step that waits for a held operation lock
(no servers: fast)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from control_helpers import wait_for

from tui.autotune import cli
from tui.autotune.budget import WallClock
from tui.autotune.lockwait import LockWaitTimeout, WaitStopped, when_free
from tui.autotune.options import (
    MAX_VALUES,
    AutotuneOptions,
    OptionsError,
    SearchRequest,
    budget_of,
    knob_range,
    load_config,
    parse_knob,
    request_argv,
    space_of,
)
from tui.autotune.search import Autotuner
from tui.autotune.space import KNOBS, SearchSpace
from tui.autotune.status import read_status, request
from tui.ops.lock import Holder, operation_lock
from tui.ops.service import FleetOps


def test_ranges_give_their_values_and_a_blank_step_gives_the_defaults_in_the_range() -> None:
    assert knob_range("max_running_requests", "16", "48", "8") == (16, 24, 32, 40, 48)
    assert knob_range("mem_fraction_static", 0.84, 0.93, 0.03) == (0.84, 0.87, 0.9, 0.93)
    assert knob_range("speculative_num_steps", "2", "5", "2") == (2, 4)  # the step stops short
    # no step: the default list within the range plus its ends (the form's untouched range)
    for name, knob in KNOBS.items():
        low, high = min(knob.default_values), max(knob.default_values)
        assert knob_range(name, low, high, "") == knob.default_values, name
    assert knob_range("max_mamba_cache_size", "100", "170") == (100, 120, 160, 170)
    assert parse_knob("max_running_requests=16:32:8") == ("max_running_requests", (16, 24, 32))
    assert parse_knob("mamba_full_memory_ratio=0.5,0.4") == ("mamba_full_memory_ratio", (0.4, 0.5))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: knob_range("mem_fraction_static", "0.8", "1.2", "0.1"),
         "mem_fraction_static.high 1.2: allowed range (0, 1)"),
        (lambda: knob_range("max_running_requests", "x", "8", "1"),
         "max_running_requests.low 'x': not an integer; allowed range 1..4096"),
        (lambda: knob_range("max_running_requests", "48", "16", "8"),
         "max_running_requests.low 48 is above max_running_requests.high 16"),
        (lambda: knob_range("max_running_requests", "16", "48", "0"),
         "max_running_requests.step 0: must be > 0 (an integer >= 1)"),
        (lambda: knob_range("mem_fraction_static", "0.5", "0.9", "0.001"),
         f"mem_fraction_static.step 0.001: gives 401 values from 0.5 to 0.9; at most {MAX_VALUES}"),
        (lambda: knob_range("mamba_full_memory_ratio", "0.4", "nan"),
         "mamba_full_memory_ratio.high 'nan': allowed range (0, 10]"),
        (lambda: knob_range("speculative_num_steps", "1", "17"),
         "speculative_num_steps.high 17: allowed range 1..16"),
        (lambda: parse_knob("max_tokens=1:3"), "knob 'max_tokens': unknown (allowed: mem_"),
        (lambda: parse_knob("max_running_requests=1:2:3:4"), "a range is LOW:HIGH or"),
        (lambda: space_of([]), "knobs: none turned on"),
        (lambda: budget_of("0", 1, 0.1), "wall '0': allowed range (0, 10000000] seconds"),
        (lambda: budget_of("4x", 1, 0.1), "wall '4x': allowed range"),
        (lambda: budget_of("1h", "-5", 0.1),
         "explore_gpu_seconds '-5': allowed range (0, 1000000000] GPU-seconds"),
        (lambda: budget_of("1h", 10, "100%"), "max_regression '100%': allowed range (0, 1)"),
    ],
)  # fmt: skip
def test_bad_values_get_one_line_naming_the_field_and_the_range(
    call: Callable[[], object], message: str
) -> None:
    with pytest.raises(OptionsError) as caught:
        call()
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_budget_units_and_a_request_round_trips_through_the_cli() -> None:
    budget = budget_of("90m", "600", "20%")
    assert (budget.wall_s, budget.explore_gpu_s, budget.max_regression) == (5400.0, 600.0, 0.2)
    space = space_of(
        [
            ("speculative_num_steps", knob_range("speculative_num_steps", 2, 4, 1)),
            ("mem_fraction_static", (0.86, 0.88123456789)),
        ]
    )
    req = SearchRequest(space, budget)
    args = cli.build_parser().parse_args(["start", *request_argv(req)])
    options, _ = cli.options_from(args)
    assert options.space == space  # exact, knob order and all (not --knob order)
    assert options.space.knobs() == ["mem_fraction_static", "speculative_num_steps"]
    assert options.budget == budget


def test_config_file_and_flags_share_the_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "search.toml"
    config.write_text(
        textwrap.dedent(
            """
            [knobs.max_running_requests]
            low = 16
            high = 32
            step = 8
            [knobs.mem_fraction_static]
            values = [0.9, 0.86]
            [knobs.speculative_num_steps]
            enabled = false
            [budget]
            wall = "2h"
            max_regression = "10%"
            """
        )
    )
    space, budget = load_config(config)
    assert space == SearchSpace(
        (("mem_fraction_static", (0.86, 0.9)), ("max_running_requests", (16, 24, 32)))
    )
    assert budget == {"wall": 7200.0, "max_regression": 0.1}
    argv = ["start", "--config", str(config), "--wall", "600", "--lock-wait", "60"]
    options, _ = cli.options_from(cli.build_parser().parse_args(argv))
    assert options.lock_wait_s == 60.0
    assert options.space == space
    assert (options.budget.wall_s, options.budget.max_regression) == (600.0, 0.1)  # flag wins
    assert options.budget.explore_gpu_s == AutotuneOptions().budget.explore_gpu_s
    # A bad value in the file: one line naming it, exit 2, nothing started (no search status).
    config.write_text("[knobs.max_running_requests]\nlow = 0\nhigh = 8\n")
    assert cli.main(["start", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "gpufleet autotune start: max_running_requests.low 0: allowed range 1..4096"
    )
    config.write_text("[budget]\nwalltime = 3\n")
    assert cli.main(["start", "--config", str(config)]) == 2
    assert "budget.walltime: unknown (allowed: wall," in capsys.readouterr().err
    assert cli.main(["start", "--max-regression", "2"]) == 2
    assert "max_regression '2': allowed range (0, 1)" in capsys.readouterr().err
    assert read_status() is None


def test_the_wall_clock_does_not_count_pauses() -> None:
    now = [100.0]
    clock = WallClock(lambda: now[0])
    now[0] = 130.0
    clock.pause()
    now[0] = 1130.0  # 1000 s paused
    assert clock.paused and clock.elapsed() == 30.0 and clock.paused_s() == 1000.0
    clock.pause()  # idempotent
    clock.resume()
    now[0] = 1140.0
    assert not clock.paused and clock.elapsed() == 40.0
    clock.resume()  # idempotent
    assert clock.paused_s() == 1000.0


def test_the_wall_clock_does_not_count_lock_waits_and_counts_an_overlap_once() -> None:
    now = [0.0]
    clock = WallClock(lambda: now[0])
    now[0] = 10.0
    clock.wait()  # a step waits for an operator's rollout
    now[0] = 20.0
    clock.pause()  # the operator pauses meanwhile
    now[0] = 50.0
    clock.waited()  # the rollout ended; still paused
    now[0] = 60.0
    clock.resume()
    now[0] = 65.0
    assert clock.waited_s() == 40.0 and clock.paused_s() == 40.0
    assert clock.elapsed() == 15.0  # 65 s less the 50 s held (10-60), counted once
    clock.waited()  # idempotent
    assert clock.waited_s() == 40.0


async def test_a_pause_asked_while_a_step_waits_for_the_lock_holds_the_step(
    tmp_path: Path,
) -> None:
    child, _ = _hold_lock(tmp_path, "rollout of z")
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(poll_s=0.02))
    await asyncio.sleep(0.01)  # requests must be written after the search started
    ran: list[str] = []

    async def step() -> str:
        ran.append("canary")
        return "ran"

    try:
        tuner.phase = "canary"
        task = asyncio.ensure_future(
            tuner._when_free("canary", step, lambda: tuner._checkpoint("canary"))
        )
        deadline = time.monotonic() + 10
        while tuner.waiting_for is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert tuner.waiting_for == f"rollout of z (pid {child.pid})"
        request("pause")
        while tuner.phase != "paused" and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert tuner.phase == "paused"
        assert child.stdin is not None
        child.stdin.close()  # the lock is free now, but the operator paused: nothing runs
        child.wait(timeout=10)
        await asyncio.sleep(0.3)
        assert ran == [] and not task.done()
        request("resume")
        assert await asyncio.wait_for(task, 10) == "ran"
        assert ran == ["canary"] and tuner.phase == "canary"  # back to the step it held
        tuner._tick()
        assert tuner.spent.waited_s > 0 and tuner.spent.paused_s >= 0.3
        doc = read_status()
        assert doc is not None and doc["spent"]["waited_s"] > 0
    finally:
        child.kill()
        child.wait(timeout=10)


async def test_a_paused_search_does_not_spend_its_wall_budget() -> None:
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(poll_s=0.02))
    await asyncio.sleep(0.01)  # the request must be written after the search started
    request("pause")
    t0 = time.monotonic()
    checkpoint = asyncio.ensure_future(tuner._checkpoint())
    deadline = time.monotonic() + 10
    while tuner.phase != "paused" and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert tuner.phase == "paused"
    await asyncio.sleep(0.5)
    request("resume")
    assert await asyncio.wait_for(checkpoint, 10) is False  # go on, not stop
    total = time.monotonic() - t0
    tuner._tick()
    assert tuner.spent.paused_s >= 0.5
    assert tuner.spent.wall_s <= total - 0.5 + 0.05
    doc = read_status()
    assert doc is not None and doc["spent"]["paused_s"] > 0  # the status says so too


def _hold_lock(tmp_path: Path, operation: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A child process holding the fleet's operation lock until its stdin closes."""
    ready = tmp_path / "ready"
    code = textwrap.dedent(
        f"""
        import pathlib, sys
        from tui.ops.lock import operation_lock
        with operation_lock({operation!r}):
            pathlib.Path({str(ready)!r}).write_text("held")
            sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, env=dict(os.environ)
    )
    wait_for(ready.exists, 30, "the child to hold the lock")
    return child, ready


async def test_a_search_step_waits_for_a_held_operation_lock_and_then_runs(
    tmp_path: Path,
) -> None:
    child, _ = _hold_lock(tmp_path, "apply sim-x to GPUs [1]")
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(poll_s=0.02))
    ran: list[str] = []

    async def step() -> str:
        with operation_lock("rollback of GPU 0"):  # what FleetOps does: refused while held
            ran.append("rolled back")
            return "done"

    try:
        task = asyncio.ensure_future(tuner._when_free("rollback", step))
        # The status document is the observable: ``waiting_for`` is set before it is written
        # (seen under load: the attribute set, the document not yet there).
        deadline = time.monotonic() + 10
        doc = read_status()
        while (doc is None or doc["waiting_for"] is None) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            doc = read_status()
        assert doc is not None
        assert doc["waiting_for"] == f"apply sim-x to GPUs [1] (pid {child.pid})"
        await asyncio.sleep(0.2)
        assert not task.done() and ran == []  # still waiting, not failed
        assert child.stdin is not None
        child.stdin.close()  # the other operation ends: the lock is free
        assert await asyncio.wait_for(task, 10) == "done"
        assert ran == ["rolled back"]
        doc = read_status()
        assert doc is not None and doc["waiting_for"] is None
    finally:
        child.kill()
        child.wait(timeout=10)


async def test_the_wait_is_bounded_and_a_stop_ends_it(tmp_path: Path) -> None:
    child, _ = _hold_lock(tmp_path, "rollout of y")
    seen: list[Holder | None] = []

    async def note(holder: Holder | None) -> None:
        seen.append(holder)

    async def never() -> None:
        raise AssertionError("the step ran while the lock was held")

    try:
        with pytest.raises(
            LockWaitTimeout, match=rf"canary: waited 0 s .*rollout of y \(pid {child.pid}"
        ):
            await when_free(never, what="canary", wait_s=0.3, poll_s=0.02, on_wait=note)
        assert seen and seen[0] is not None and seen[0].operation == "rollout of y"

        looks = [0]

        async def stop() -> bool:  # the operator's stop arrives on the third look
            looks[0] += 1
            return looks[0] >= 3

        seen.clear()
        with pytest.raises(WaitStopped, match="stopped by the operator"):
            await when_free(never, what="canary", wait_s=60, poll_s=0.02, on_wait=note, gate=stop)
        assert seen[0] is not None and seen[-1] is None  # shown waiting, then the wait ended
    finally:
        child.kill()
        child.wait(timeout=10)


async def test_a_long_step_keeps_the_status_current() -> None:
    """A rollout of the winner takes minutes: the status is rewritten meanwhile (its spent
    time moves), not left at the phase's first write."""
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(poll_s=0.02))
    tuner.phase = "adopting"
    await tuner._status()
    first = read_status()
    assert first is not None
    async with tuner._heartbeat(every_s=0.05):
        deadline = time.monotonic() + 10
        doc = read_status()
        while (
            doc is None or doc["updated_at"] == first["updated_at"]
        ) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            doc = read_status()
    assert doc is not None and doc["updated_at"] > first["updated_at"]
    assert doc["spent"]["wall_s"] > first["spent"]["wall_s"]
