"""The coarser tiers' open buckets: summed in memory while open, written once they close.

The console writes its readings every 5 s; a minute's and a quarter-hour's bucket of every series
were upserted again at each of those writes (two thirds of a write's rows, 0.8 ms of the poll).
Instead each finest bucket written is added here to its coarser buckets, and a coarser bucket is
handed back to be written once a reading past its end arrives (``add``), or when the store
closes (``drain``). Until then the store that holds it still shows it, as it is so far
(``add_to``). A store killed without closing loses the open minute and quarter-hour of the
coarser tiers, which the finest tier still holds for two hours.
"""

from __future__ import annotations

from collections.abc import Sequence

Key = tuple[int, int, int]
"""(tier, series, bucket start)."""
Row = tuple[Key, list[float]]
"""A bucket to upsert: its key and [sum, count]."""


class OpenBuckets:
    """The open buckets of the tiers after the finest, by tier and series. Not thread-safe: the
    store's lock guards it.

    Args:
        widths: Every tier's bucket width, finest first (each a multiple of the finest's).
    """

    def __init__(self, widths: Sequence[int]) -> None:
        self.widths = tuple(widths)
        self._open: dict[tuple[int, int], dict[int, list[float]]] = {}

    def add(self, finest: dict[tuple[int, int], list[float]]) -> list[Row]:
        """Add finest buckets ((series, start) -> [sum, count]) to their coarser ones.

        Returns:
            The coarser buckets now closed (a reading of ``finest`` starts after their end), to
            be written; they stay open here until ``written`` says they were.
        """
        newest = 0
        for (series, start), (total, count) in finest.items():
            newest = max(newest, start)
            for tier in range(1, len(self.widths)):
                width = self.widths[tier]
                group = self._open.setdefault((tier, series), {})
                bucket = start // width * width
                sums = group.get(bucket)
                if sums is None:
                    group[bucket] = [total, count]
                else:
                    sums[0] += total
                    sums[1] += count
        return [
            ((tier, series, start), sums)
            for (tier, series), group in self._open.items()
            for start, sums in group.items()
            if start + self.widths[tier] <= newest
        ]

    def written(self, rows: list[Row]) -> None:
        """Forget buckets ``add`` handed back, once the store has written them."""
        for (tier, series, start), _ in rows:
            group = self._open[(tier, series)]
            del group[start]
            if not group:
                del self._open[(tier, series)]

    def drain(self) -> list[Row]:
        """Every open bucket, to be written now (the store closes); none is kept."""
        rows = [
            ((tier, series, start), sums)
            for (tier, series), group in self._open.items()
            for start, sums in group.items()
        ]
        self._open.clear()
        return rows

    def add_to(
        self, sums: dict[int, list[float]], tier: int, series: int, first: float, last: float
    ) -> None:
        """Add one series' open buckets of ``tier`` between ``first`` and ``last`` to what the
        file holds (start -> [sum, count]): what the store shows is its own reading so far."""
        for start, (total, count) in self._open.get((tier, series), {}).items():
            if first <= start <= last:
                found = sums.setdefault(start, [0.0, 0])
                found[0] += total
                found[1] += count
