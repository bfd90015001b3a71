"""The last hour of pipeline throughput, kept from successive status documents (pure)."""

from __future__ import annotations

from tui.pipeline.status import PipelineStatus

HISTORY_WINDOW_S = 3600.0
"""How far back the generation pane's sparkline reaches."""

Sample = tuple[float, float]
"""(updated_at, output tokens/s over the last minute)."""


def append_sample(history: tuple[Sample, ...], status: PipelineStatus) -> tuple[Sample, ...]:
    """Add the document's 1-minute rate unless it is not newer, and drop what is over an hour old.

    Args:
        history: Samples so far, oldest first.
        status: The newest document.

    Returns:
        The new history (the same object when the document was not newer).
    """
    if history and status.updated_at <= history[-1][0]:
        return history
    cutoff = status.updated_at - HISTORY_WINDOW_S
    kept = tuple(sample for sample in history if sample[0] >= cutoff)
    return (*kept, (status.updated_at, status.rate_1m.output_tokens_per_s))


def window(history: tuple[Sample, ...]) -> tuple[float, float]:
    """The span the chart covers: the oldest sample (at most an hour back) to the newest."""
    if not history:
        return (0.0, 0.0)
    end = history[-1][0]
    return (max(history[0][0], end - HISTORY_WINDOW_S), end)


def column_of(t: float, start: float, end: float, width: int) -> int:
    """The chart column of time ``t`` (clamped to the chart)."""
    if end <= start or width <= 1:
        return width - 1 if width > 0 else 0
    return min(width - 1, max(0, int((t - start) / (end - start) * (width - 1) + 0.5)))


def resample(history: tuple[Sample, ...], width: int) -> list[float]:
    """One value per chart column: the mean of its samples, carried forward over gaps.

    Args:
        history: Samples, oldest first.
        width: Columns of the chart.

    Returns:
        ``width`` values (fewer when there are fewer samples than columns at the start).
    """
    if width <= 0 or not history:
        return []
    start, end = window(history)
    sums = [0.0] * width
    counts = [0] * width
    for t, value in history:
        if t < start:
            continue
        column = column_of(t, start, end, width)
        sums[column] += value
        counts[column] += 1
    values: list[float] = []
    last = 0.0
    for total, count in zip(sums, counts, strict=True):
        if count:
            last = total / count
        values.append(last)
    return values


def marker_columns(marks: tuple[float, ...], history: tuple[Sample, ...], width: int) -> set[int]:
    """Columns of the retunes that fall within the chart's span."""
    start, end = window(history)
    return {column_of(t, start, end, width) for t in marks if start <= t <= end}
