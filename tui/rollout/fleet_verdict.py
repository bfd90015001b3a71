"""The fleet's verdict on a rollout or a rollback: fleet output tokens/s before it vs after it.

A canary compares one GPU with its controls over the same seconds; a rollout (or a rollback)
changes the whole fleet, so nothing is left to compare with at the same time. Its verdict is the
fleet's own before and after, as an apply's is: **before**, the window sampled just before the
first batch stops anything; **after**, a window of the same length once the last batch settled
and a warm-up passed (the pipeline refills the restarted servers' queues). Each window is cut
into intervals of ``interval_s`` (the rollout's sampler reads every GPU each second; those
readings are pooled), each interval's rate is the sum over every GPU of the fleet (a GPU that
failed counts its zero), and the two sets go to Welch's interval on the throughput ratio
(``tui.retune.verdict.compare``: on its log, so never below -100%): better / worse / no
measurable difference with its interval, or "not measured (no load before)" when a window had
no traffic (the job had ended) instead of a verdict from an idle window.

The load is read beside (``tui.rollout.load``): the fleet's offered load per GPU (running +
queued requests) in the window after must stay within the band of the window before. Under a
closed loop a faster fleet does not change it (requests move from the queues to the batches);
the job's tail does, and so does a server that joined: "not measured: the load changed (the
fleet's offered load fell from 48 to 6 requests per GPU, 12 s into the window after)", never a
verdict on the job's tail. The before window cannot be taken again once the fleet changed: the
verdict is not re-measured, it is left unmeasured and said.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Literal

from tui.retune.events import MeasureProgress, ThroughputComparison
from tui.retune.verdict import compare
from tui.rollout.beside import Beside, measured_beside
from tui.rollout.load import control_change, known, offered, per_interval
from tui.rollout.sampling import IntervalRates, Sampler


@dataclass(frozen=True, slots=True)
class VerdictWindows:
    """How the fleet verdict of a rollout measures."""

    window_s: float = 60.0
    """Length of each window (before, after); 0 takes no verdict."""
    warmup_s: float = 30.0
    """Ignored seconds after the last batch settled, before the 'after' window."""
    interval_s: float = 5.0
    """One fleet rate per interval of this length (the verdict's samples)."""
    level: float = 0.95
    """Two-sided confidence level of the interval."""

    @property
    def enabled(self) -> bool:
        """Whether a verdict is taken at all."""
        return self.window_s > 0

    def errors(self) -> list[str]:
        """Invalid fields, each naming field, value and allowed range."""
        out = []
        for name in ("window_s", "warmup_s"):
            if getattr(self, name) < 0:
                out.append(f"verdict.{name}={getattr(self, name)!r}: must be >= 0")
        if not self.interval_s > 0:
            out.append(f"verdict.interval_s={self.interval_s!r}: must be > 0")
        if not 0 < self.level < 1:
            out.append(f"verdict.level={self.level!r}: must be in (0, 1)")
        return out


def fleet_rates(
    rates: Sequence[IntervalRates],
    gpus: Sequence[int],
    start: float,
    end: float,
    interval_s: float,
) -> tuple[float, ...]:
    """The fleet's output tokens/s over consecutive intervals of ``interval_s`` in [start, end].

    Args:
        rates: The sampler's per-GPU rates (monotonic times), in time order.
        gpus: Every GPU of the fleet (summed).
        start: Window start (monotonic).
        end: Window end (monotonic).
        interval_s: Length of one pooled interval (> 0).

    Returns:
        One fleet rate per pooled interval; a trailing piece shorter than half an interval is
        dropped (too short to weigh like the others).
    """
    out: list[float] = []
    tokens = span = 0.0
    for r in rates:
        # Only the part of a reading's interval inside the window counts (flat within it).
        dt = min(r.t1, end) - max(r.t0, start)
        if dt <= 1e-9:
            continue
        tokens += sum(r.tokens.get(g, 0.0) for g in gpus) * dt
        span += dt
        if span >= interval_s - 1e-9:
            out.append(tokens / span)
            tokens = span = 0.0
    if span >= interval_s / 2:
        out.append(tokens / span)
    return tuple(out)


def fleet_verdict(
    rates: Sequence[IntervalRates],
    gpus: Sequence[int],
    before: tuple[float, float],
    after: tuple[float, float],
    windows: VerdictWindows,
) -> ThroughputComparison:
    """Compare the fleet's throughput in the ``before`` window with the ``after`` one.

    Args:
        rates: The sampler's per-GPU rates over both windows (monotonic times).
        gpus: Every GPU of the fleet.
        before: (start, end) of the window before the first batch.
        after: (start, end) of the window after the warm-up.
        windows: Interval length and confidence level.

    Returns:
        The comparison (``describe()`` is its line); "not measured" with the reason when a
        window had too few intervals or no load, or the load changed between them.
    """
    b = fleet_rates(rates, gpus, *before, windows.interval_s)
    a = fleet_rates(rates, gpus, *after, windows.interval_s)
    result = compare(b, a, windows.level)
    load_b = offered(per_interval(rates, gpus, *before))
    load_a = offered(per_interval(rates, gpus, *after))
    seen_b, seen_a = known(load_b), known(load_a)
    result = replace(
        result,
        load_before=round(fmean(seen_b), 2) if seen_b else None,
        load_after=round(fmean(seen_a), 2) if seen_a else None,
    )
    if result.verdict == "not measured":
        return result  # no load, too few samples: said already
    step = rates[0].t1 - rates[0].t0 if rates else windows.interval_s
    change = control_change(
        seen_b, load_a, step, complete=True, whose="the fleet's", where="into the window after"
    )
    if change is None:
        return result
    return replace(
        result,
        verdict="not measured",
        relative_change=None,
        ci_low=None,
        ci_high=None,
        sureness=None,
        note=change.words(),
    )


def fleet_line(verdict: ThroughputComparison | None) -> str:
    """The verdict as the reports say it.

    'fleet throughput 1,520 -> 1,890 tok/s: better: +24.3% (95% CI +18.0% .. +30.6%, sure
    100.0%)'; 'fleet throughput: not measured (no load after)'; 'fleet throughput: not measured
    (no verdict was asked for)' when the operation measured nothing.
    """
    if verdict is None:
        return "fleet throughput: not measured (no verdict was asked for)"
    if verdict.relative_change is None or not verdict.before or not verdict.after:
        return f"fleet throughput: {verdict.describe()}"
    means = f"{fmean(verdict.before):,.0f} -> {fmean(verdict.after):,.0f} tok/s"
    return f"fleet throughput {means}: {verdict.describe()}"


class VerdictMeter:
    """Takes the fleet verdict's windows on a running sampler around an operation.

    Call ``before`` (it returns once the 'before' window is full: the operation starts then),
    run the operation, then ``after`` (the warm-up, the 'after' window, the verdict).

    Args:
        sampler: A started sampler over every GPU of the fleet.
        windows: The windows.
        on_measure: Told as each window starts and fills (one progress per interval).
    """

    def __init__(
        self,
        sampler: Sampler,
        windows: VerdictWindows,
        on_measure: Callable[[MeasureProgress], None] | None = None,
    ) -> None:
        self.sampler = sampler
        self.windows = windows
        self._on_measure = on_measure
        self._before: tuple[float, float] | None = None
        self.beside: Beside | None = None
        """After ``after``: the fleet's TTFT p90, ITL p90 and tokens per joule, after against
        before (None: no throughput verdict, or nothing observed)."""

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def before(self, at_least_s: float = 0.0) -> None:
        """Sample the 'before' window (at least ``at_least_s``: the cost's baseline too), from
        the sampler's first reading (a slow first answer must not eat the window)."""
        if not self.sampler.readings:
            await self.sampler.next_reading()
        first = self.sampler.readings[0].t
        length = max(at_least_s, self.windows.window_s if self.windows.enabled else 0.0)
        await self._window("before", first, length)
        began = self._now()
        self._before = (max(first, began - self.windows.window_s), began)

    async def after(self) -> ThroughputComparison:
        """From now (the operation's end): the warm-up, the 'after' window, the verdict."""
        if self._before is None:
            return unmeasured("no window was sampled before the operation")
        ended = self._now()
        if self.windows.warmup_s > 0:
            await self._window("warm-up", ended, self.windows.warmup_s)
        start = ended + self.windows.warmup_s
        await self._window("after", start, self.windows.window_s)
        after = (start, start + self.windows.window_s)
        verdict = fleet_verdict(
            self.sampler.rates(), self.sampler.gpus, self._before, after, self.windows
        )
        if verdict.relative_change is not None:  # beside a throughput verdict, never instead
            gpus = self.sampler.gpus
            self.beside = measured_beside(
                self.sampler.readings, ("after", gpus, after), ("before", gpus, self._before),
                self.windows.level,
            )  # fmt: skip
        return verdict

    async def _window(
        self, stage: Literal["before", "warm-up", "after"], start: float, length: float
    ) -> None:
        """Wait on the sampler's readings until ``start + length``, saying how far it is.

        Its start is always said first (0 intervals done), even when this coroutine comes to it
        late: the command line prints the window's line at 0, and under two busy cores the first
        reading of the after window once came one interval in (the line was never printed)."""
        said = 0
        if self._on_measure is not None:
            self._on_measure(MeasureProgress(stage, 0, length))
        while True:
            done = int(max(self._now() - start, 0.0) / self.windows.interval_s + 1e-9)
            if self._on_measure is not None and done != said:
                self._on_measure(MeasureProgress(stage, done, length))
                said = done
            if self._now() >= start + length:
                return
            await self.sampler.next_reading()


def unmeasured(note: str) -> ThroughputComparison:
    """A verdict that could not be taken, and why."""
    return ThroughputComparison((), (), "not measured", note=note)
