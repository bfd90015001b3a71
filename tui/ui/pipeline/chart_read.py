"""What the generation pane's output-rate chart reads: the fleet's output rate over a range (the
console's history, or a Prometheus server scraping the agents), and the markers inside it."""

from __future__ import annotations

import itertools
from typing import Protocol

from tui.history.samples import OUT_TOK_S
from tui.ops.marks import OperationMark
from tui.ui.history.chart import MIN_JOB_S, ChartData, ChartRange


class SeriesSource(Protocol):
    """What the chart reads: the console's own ``HistoryStore``, or ``PrometheusChart`` (a
    Prometheus server scraping the agents, ``gpufleet console --prometheus URL``)."""

    def first_time(self, gpu: int | None, metric: str) -> float | None:
        """When the series starts (None: empty)."""

    def series(
        self, gpu: int | None, metric: str, since: float, until: float | None = None
    ) -> list[tuple[float, float]]:
        """(time, value) points from ``since`` on, oldest first."""


def chart_data(
    store: SeriesSource,
    span: ChartRange,
    end: float,
    marks: tuple[OperationMark, ...],
    job_start: float | None = None,
) -> ChartData | None:
    """The fleet's output rate over ``span`` ending at ``end``, with the marks inside it.

    Args:
        store: The history (the console's store, or Prometheus).
        span: The range (the job's: since ``job_start``, at least ``MIN_JOB_S``).
        end: The right edge (now).
        marks: The operations that changed servers.
        job_start: When the job started (the status document's ``started_at``); None: the
            whole history (since the series' first bucket).

    Returns:
        The chart's data, or None when the history holds nothing for it.
    """
    if span.seconds is None:
        first = job_start if job_start is not None else store.first_time(None, OUT_TOK_S.name)
        if first is None:
            return None
        start = min(first, end - MIN_JOB_S)
    else:
        start = end - span.seconds
    points = store.series(None, OUT_TOK_S.name, since=start - 15 * 60)  # one bucket to carry on
    if not any(start <= t <= end for t, _ in points):
        return None
    steps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points)) or [5.0]
    return ChartData(
        tuple(points),
        start,
        end,
        floor=OUT_TOK_S.floor,
        marks=tuple(m for m in marks if start <= m.t <= end),
        gap_s=max(30.0, 3 * steps[len(steps) // 2]),
    )
