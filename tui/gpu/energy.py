"""Joules a GPU used: from the driver's total energy counter, else its power samples integrated.

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` counts millijoules since the driver loaded
(Volta and later); it costs ~4 ms a call on an H200, so it is read rarely (``sample_slow``),
while power is sampled every second. One :class:`EnergyMeter` per GPU joins them:

* between two counter readings, the power samples bridge (trapezoids), so the total moves every
  second; each counter reading then replaces what the power said for its interval (the counter
  is the driver's own integral, at its own rate);
* a device without the counter (``None``: NotSupported, an older GPU) is metered by the power
  samples alone (``counter`` False says so);
* a counter that went down (the driver reloaded), or power samples further apart than
  ``MAX_GAP_S`` (nothing measured then), count nothing for that interval, never a negative or
  a guessed amount; a counter's difference is exact however far apart its two readings are.

Pure and cheap: feed it readings, read ``joules``.
"""

from __future__ import annotations

MAX_GAP_S = 120.0
"""Longest interval between two power samples that is integrated: a longer one (the reader was
stopped, a hung driver) is a gap, not a straight line."""


class EnergyMeter:
    """One GPU's joules since the meter started. Not thread-safe: one reader feeds it."""

    def __init__(self) -> None:
        self._counted = 0.0
        """Joules up to the last counter reading (or, without a counter, up to the last sample)."""
        self._bridge = 0.0
        """Joules the power samples add since the last counter reading."""
        self._power: tuple[float, float] | None = None
        """(t, watts) of the last power sample."""
        self._counter: tuple[float, int] | None = None
        """(t, mJ) of the last counter reading."""
        self.counter = False
        """Whether the last readings came from the driver's energy counter."""

    @property
    def joules(self) -> float:
        """Joules used since the meter's first reading."""
        return self._counted + self._bridge

    def power(self, t: float, watts: float | None) -> None:
        """A power sample (``None``: not supported; a gap in the power integral)."""
        if watts is None:
            self._power = None
            return
        last = self._power
        self._power = (t, watts)
        if last is None or not 0 < t - last[0] <= MAX_GAP_S:
            return
        start, begin = last
        if self._counter is not None and start < self._counter[0]:
            # The counter already holds the interval up to its reading: only what follows it,
            # from the power interpolated at that moment.
            read = self._counter[0]
            if read >= t:
                return
            begin += (watts - begin) * (read - start) / (t - start)
            start = read
        self._bridge += (begin + watts) / 2 * (t - start)

    def energy_counter(self, t: float, millijoules: int | None) -> None:
        """A reading of the driver's total energy counter (``None``: the device has none)."""
        if millijoules is None:
            self.counter = False
            if self._counter is not None:
                self._counter = None  # no longer counted: the power samples carry on alone
            return
        last = self._counter
        self._counter = (t, millijoules)
        self.counter = True
        if last is None:
            # The first reading: what the power said so far stays, the counter takes over now.
            self._counted += self._bridge
        elif millijoules >= last[1]:
            # Exact however long ago the last reading was: the driver integrated meanwhile.
            self._counted += (millijoules - last[1]) / 1000.0
        # else: the driver reloaded (its counter began again): the interval counts nothing.
        self._bridge = 0.0
