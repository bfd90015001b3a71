"""Canary: a candidate profile on ONE GPU, measured against the others over the same seconds.

Steps: validate -> sample every GPU's counters for a short baseline -> apply the candidate to the
canary GPU through the retune engine (stop, release, launch, ready, verify report) -> warm-up
(ignored by the verdict) -> one paired sample (canary rate, mean control rate) per interval ->
after ``min_intervals``, a look per interval at the Bonferroni-corrected level (see
``tui.rollout.stats``): stop as soon as the interval excludes 0 (better / worse) or lies within
+/- margin (no measurable difference); at ``window_s`` stop too unless the observed spread says
a verdict is reachable by ``max_window_s``. The canary GPU keeps the candidate afterwards (a
rollout can continue from it; ``gpufleet rollout --rollback --gpus N`` undoes it).

Every reading also carries the load each server held (``tui.rollout.load``). When the controls'
offered load leaves the band of the baseline's, the window starts again once from where it
changed, against the new level (a server joined, the job slowed): ``remeasured`` says so; a
second change, or one to no load at all (the job ended), ends it ``not measured: the load
changed (...)``. At each look the canary and its controls must have been offered comparable
load (a canary whose client gave up on its restart holds nothing): otherwise the same. A canary
that made no tokens while its controls did is not measured either (``worse: -100%`` said
only that nothing reached it). The looks of both tries share the one Bonferroni divisor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from statistics import fmean
from typing import Any, Protocol

from tui.profiles import Profile, diff
from tui.retune.events import ApplyResult, VerifyReport
from tui.rollout.beside import measured_beside
from tui.rollout.canary_options import CanaryOptions
from tui.rollout.canary_result import CanaryLook, CanaryResult, look_from
from tui.rollout.cost import CostMeter
from tui.rollout.load import (
    LoadChange,
    follow,
    known,
    offered,
    offered_mismatch,
    per_interval,
    seen,
)
from tui.rollout.sampling import IntervalRates, Sampler
from tui.rollout.stats import PairedEstimate, decide, look_level, paired
from tui.state.fleet_state import GpuState, profile_of, read_fleet

Applier = Callable[[Profile, Sequence[int]], Awaitable[ApplyResult]]
"""Relaunches GPUs with a profile and verifies them (the operations core's engine run; it
records the outcome in the fleet state)."""


class SamplerFactory(Protocol):
    """Makes a (not started) counters sampler over some GPUs of the fleet."""

    def __call__(self, gpus: Sequence[int], interval_s: float) -> Sampler:
        """A sampler over ``gpus`` every ``interval_s``."""
        ...


class Canary:
    """One canary of ``profile`` on ``gpu`` against every other running GPU of the fleet.

    Args:
        profile: The candidate profile, fitted to the running fleet.
        gpu: The canary GPU.
        apply: Relaunches and verifies GPUs (the operations core's engine run).
        sampler: Makes the counters sampler over the canary and its controls.
        options: Windows, levels, timeouts.
        controls: Control GPUs (default: every other GPU of the profile with a running server).
        on_look: Called with every look of the measuring window.
        state: Reads the fleet state (the canary GPU's profile before; default: this node's).
        lost: The GPUs whose readings no longer count (a many-node canary: those of a node that
            stopped answering); read at every reading. Lost controls leave the verdict (every
            interval is paired again without them); with the canary GPU or every control lost
            the window ends with no verdict. Default: none is ever lost.
    """

    def __init__(
        self,
        profile: Profile,
        gpu: int,
        apply: Applier,
        sampler: SamplerFactory,
        options: CanaryOptions | None = None,
        controls: list[int] | None = None,
        on_look: Callable[[CanaryLook], None] | None = None,
        state: Callable[[], Mapping[int, GpuState]] = read_fleet,
        lost: Callable[[], Collection[int]] = frozenset,
    ) -> None:
        self.profile = profile
        self.gpu = gpu
        self.options = options or CanaryOptions()
        self._apply = apply
        self._sampler = sampler
        self._controls = controls
        self._on_look = on_look
        self._state = state
        self._lost = lost

    def _validate(self, controls: list[int]) -> list[str]:
        errors = self.options.errors()
        if self.gpu not in self.profile.gpus:
            errors.append(
                f"gpu={self.gpu}: not in profile {self.profile.name!r} ({self.profile.gpus})"
            )
        if not controls:
            errors.append("controls: no other GPU of the fleet is running to compare with")
        if self.gpu in controls:
            errors.append(f"controls: the canary GPU {self.gpu} cannot be its own control")
        return errors

    async def run(self) -> CanaryResult:
        """Run the canary (the caller journals the result)."""
        started = time.time()
        opts = self.options
        state = self._state()
        running = [g for g in self.profile.gpus if g in state and state[g].server is not None]
        controls = sorted(
            self._controls if self._controls is not None else [g for g in running if g != self.gpu]
        )
        before = state.get(self.gpu)
        previous = before.current_name if before is not None else None
        if previous is None and before is not None and before.server is not None:
            previous = before.server.profile or None
        diff_lines: tuple[str, ...] = ()
        if before is not None and before.current:
            try:
                diff_lines = tuple(str(c) for c in diff(profile_of(before.current), self.profile))
            except Exception:  # a stored profile that no longer validates: no diff to show
                diff_lines = ()
        base = CanaryResult(
            self.profile.name,
            self.gpu,
            tuple(controls),
            previous,
            "not measured",
            "",
            None,
            None,
            margin=opts.margin,
            family_level=opts.level,
            diff=diff_lines,
            started_at=started,
        )
        errors = self._validate(controls)
        if errors:
            return replace(base, refused=tuple(errors), reason="refused", finished_at=time.time())
        sampler = self._sampler([self.gpu, *controls], opts.interval_s)
        sampler.start()
        try:
            return await self._measured(base, sampler, controls)
        finally:
            await sampler.stop()

    async def _measured(
        self, base: CanaryResult, sampler: Sampler, controls: list[int]
    ) -> CanaryResult:
        opts = self.options
        loop = asyncio.get_running_loop()
        t_start = loop.time()
        wall = time.time() - t_start  # loop time -> time.time(), for the windows on record
        meter = CostMeter(sampler, opts.settle_s)
        baseline_until = t_start + max(opts.baseline_s, 2 * opts.interval_s)
        while loop.time() < baseline_until:
            await sampler.next_reading()
        answering = [g for g in controls if g not in self._lost()] or controls
        pre = _pairs(sampler.rates(), self.gpu, answering, t_start, loop.time())
        pre_rel = fmean(pre[0]) / fmean(pre[1]) - 1.0 if pre[0] and fmean(pre[1]) > 0 else None
        # The controls' offered load before anything changed: the band the window must keep.
        reference = known(offered(per_interval(sampler.rates(), answering, t_start, loop.time())))
        base = replace(base, baseline_window=(wall + t_start, wall + loop.time()))
        meter.begin()
        applied = await self._apply(self.profile, [self.gpu])
        meter.end()
        report = applied.reports[0] if applied.reports else None
        if applied.refused:
            cost = await meter.finish()
            return replace(
                base, refused=applied.refused, reason="refused", cost=cost, finished_at=time.time()
            )
        if report is None or not report.ok:
            cost = await meter.finish()
            return replace(
                base,
                report=report,
                pre_relative=pre_rel,
                cost=cost,
                reason="the canary GPU did not come up",
                finished_at=time.time(),
            )
        measure_from = loop.time() + opts.warmup_s
        result = await self._window(
            base, sampler, meter, controls, measure_from, report, pre_rel, reference
        )
        if result.canary_tokens:  # a window was measured: from its start to the last reading
            window = (wall + measure_from, result.finished_at)
            result = replace(result, measure_window=window)
        return result

    async def _window(
        self,
        base: CanaryResult,
        sampler: Sampler,
        meter: CostMeter,
        controls: list[int],
        measure_from: float,
        report: VerifyReport,
        pre_rel: float | None,
        reference: list[float],
    ) -> CanaryResult:
        opts = self.options
        level = look_level(opts.level, opts.looks)
        looks = 0
        decision = decide(None, opts.margin)
        tok: PairedEstimate | None = None
        canary: list[float] = []
        control: list[float] = []
        remeasured = ""
        while True:
            await sampler.next_reading()
            rates = sampler.rates()
            gone = self._lost()
            live = [g for g in controls if g not in gone]
            if self.gpu in gone or not live:
                whose = f"the canary GPU {self.gpu}" if self.gpu in gone else "every control GPU"
                return self._unmeasured(base, meter, report, pre_rel, controls, live, whose)
            canary, control = _pairs(rates, self.gpu, live, measure_from, float("inf"))
            c_load = per_interval(rates, [self.gpu], measure_from, float("inf"))
            k_load = per_interval(rates, live, measure_from, float("inf"))
            may_restart = not remeasured and looks < opts.looks
            step = follow(reference, offered(k_load), opts.interval_s, may_restart=may_restart)
            past_end = len(canary) >= opts.max_intervals
            if step.change is not None and (step.action == "stop" or past_end):
                return self._load_changed(
                    base, meter, report, pre_rel, controls, live, step.change, remeasured,
                    (canary, control, c_load, k_load, reference),
                )  # fmt: skip
            if step.action == "restart" and step.change is not None:
                # Once: the window starts again where the load settled, against its new level.
                remeasured = f"re-measured from there: {step.change.words()}"
                measure_from = _nth_start(rates, measure_from, step.restart_at)
                reference = list(step.reference)
                continue
            if step.action == "wait" and not past_end:
                continue
            n = len(canary)
            if n < opts.min_intervals:
                continue
            mismatch = offered_mismatch(c_load, k_load)
            if mismatch is None and fmean(control) > 0.0 and not any(canary):
                # No gauges to say it, and still plain: nothing reached the canary GPU.
                mismatch = LoadChange(
                    f"the canary GPU made no tokens while its controls made "
                    f"{fmean(control):,.0f} tok/s per GPU: did its client give up on the restart?"
                )
            if mismatch is not None:
                return self._load_changed(
                    base, meter, report, pre_rel, controls, live, mismatch, remeasured,
                    (canary, control, c_load, k_load, reference),
                )  # fmt: skip
            looks += 1
            tok = paired(canary, control, level)
            decision = decide(tok, opts.margin)
            if self._on_look is not None:
                self._on_look(look_from(self.gpu, n, decision, opts.interval_s))
            if decision.final:
                reason = decision.reason
                break
            if n >= opts.max_intervals or looks >= opts.looks:
                reason = f"longest window ({opts.max_window_s:g} s) reached"
                break
            if n * opts.interval_s >= opts.window_s - 1e-9:
                need = min(
                    x
                    for x in (
                        decision.more_intervals_to_exclude_zero,
                        decision.more_intervals_to_bound,
                        10**9,
                    )
                    if x is not None
                )
                if n + need > opts.max_intervals:
                    reason = (
                        f"window {opts.window_s:g} s ended; a verdict would need about "
                        f"{need * opts.interval_s:.0f} s more (beyond --max-window)"
                    )
                    break
        if tok is None:
            # The controls made no tokens (no job sending requests, or it paused): nothing to
            # pair the canary against, so no verdict, said, instead of a crash at the end.
            idle = replace(
                self._unmeasured(base, meter, report, pre_rel, controls, live, ""),
                reason=(
                    f"no verdict: the control GPUs made no tokens in the {len(canary)} "
                    "intervals of the window (is the job sending requests?)"
                ),
                canary_tokens=tuple(round(x, 3) for x in canary),
                control_tokens=tuple(round(x, 3) for x in control),  # the zeros, on record
            )
            return idle
        req_c, req_k = _pairs(rates, self.gpu, live, measure_from, float("inf"), "requests")
        reqs = paired(req_c, req_k, level)
        window = [r for r in rates if r.t0 >= measure_from - 1e-9]
        per_gpu = {
            g: round(fmean(r.tokens.get(g, 0.0) for r in window), 3) for g in [self.gpu, *live]
        }
        # The window usually outlasts the settle time; the cost is what was measured until then.
        cost = meter.current()
        window_t = (measure_from, float("inf"))
        beside = measured_beside(
            sampler.readings, ("canary", [self.gpu], window_t), ("control", live, window_t),
            opts.level,
        )  # fmt: skip

        def secs(k: int | None) -> float | None:
            return None if k is None else round(k * opts.interval_s, 1)

        return replace(
            base,
            controls=tuple(live),
            dropped_controls=tuple(g for g in controls if g not in live),
            verdict=decision.verdict,
            reason=reason,
            tokens=tok,
            requests=reqs,
            canary_tokens=tuple(round(x, 3) for x in canary),
            control_tokens=tuple(round(x, 3) for x in control),
            per_gpu_tokens=per_gpu,
            pre_relative=pre_rel,
            more_s_to_exclude_zero=secs(decision.more_intervals_to_exclude_zero),
            more_s_to_bound=secs(decision.more_intervals_to_bound),
            looks=looks,
            look_level=level,
            stopped_early=decision.final and tok.n * opts.interval_s < opts.window_s - 1e-9,
            window_s=round(tok.n * opts.interval_s, 3),
            report=report,
            cost=cost,
            finished_at=time.time(),
            load=seen(c_load, k_load, reference),
            remeasured=remeasured,
            beside=beside,
        )

    def _load_changed(
        self,
        base: CanaryResult,
        meter: CostMeter,
        report: VerifyReport,
        pre_rel: float | None,
        controls: list[int],
        live: list[int],
        change: LoadChange,
        remeasured: str,
        window: tuple[list[float], list[float], list[Any], list[Any], list[float]],
    ) -> CanaryResult:
        """The window ended without a verdict: the load changed (``change`` says which)."""
        canary, control, c_load, k_load, reference = window
        return replace(
            self._unmeasured(base, meter, report, pre_rel, controls, live, ""),
            reason=change.words(),
            canary_tokens=tuple(round(x, 3) for x in canary),
            control_tokens=tuple(round(x, 3) for x in control),
            window_s=round(len(canary) * self.options.interval_s, 3),
            load=seen(c_load, k_load, reference),
            load_change=change,
            remeasured=remeasured,
        )

    def _unmeasured(
        self,
        base: CanaryResult,
        meter: CostMeter,
        report: VerifyReport,
        pre_rel: float | None,
        controls: list[int],
        live: list[int],
        whose: str,
    ) -> CanaryResult:
        """The window ended without a verdict: ``whose`` readings stopped."""
        return replace(
            base,
            controls=tuple(live),
            dropped_controls=tuple(g for g in controls if g not in live),
            reason=f"no verdict: {whose} stopped answering",
            pre_relative=pre_rel,
            report=report,
            cost=meter.current(),
            finished_at=time.time(),
        )


def _nth_start(rates: list[IntervalRates], t_from: float, index: int) -> float:
    """The start of the ``index``-th interval from ``t_from`` (the last one's when fewer)."""
    inside = [r for r in rates if r.t0 >= t_from - 1e-9]
    return inside[min(index, len(inside) - 1)].t0 if inside else t_from


def _pairs(
    rates: list[Any],
    gpu: int,
    controls: list[int],
    t_from: float,
    t_to: float,
    what: str = "tokens",
) -> tuple[list[float], list[float]]:
    """(canary rate, mean control rate) of every interval inside [t_from, t_to]."""
    canary: list[float] = []
    control: list[float] = []
    for r in rates:
        if r.t0 < t_from - 1e-9 or r.t1 > t_to + 1e-9:
            continue
        values = getattr(r, what)
        canary.append(values.get(gpu, 0.0))
        control.append(fmean(values.get(g, 0.0) for g in controls))
    return canary, control
