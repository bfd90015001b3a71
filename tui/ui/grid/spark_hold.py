"""How often a panel's sparkline takes the newest throughput history."""

from __future__ import annotations

import time

from tui.fleet.snapshot import GpuPanel

SPARK_EVERY_S = 3.0
"""How often a panel's sparkline takes the newest throughput history. Why: the history shifts
one cell with every Decode line, so each busy panel resent its whole sparkline every second
(most of the console's bytes to the terminal with seven servers, and a rendered line each);
the rate beside it stays live at every reading."""


class SparkHold:
    """The throughput history one panel's sparkline draws, taken at most every
    ``SPARK_EVERY_S``."""

    def __init__(self) -> None:
        self._history: tuple[float, ...] | None = None
        """The history the sparkline shows."""
        self._at = 0.0
        """time.monotonic() when it was taken."""
        self._for: GpuPanel | None = None
        """The reading it was last looked at for."""

    def history(self, panel: GpuPanel | None) -> tuple[float, ...] | None:
        """The history to draw for ``panel`` (None: no server): the server's as taken at most
        ``SPARK_EVERY_S`` ago. Looked at once per reading (the same reading again answers the
        same)."""
        server = panel.server if panel is not None else None
        if server is None:
            return None
        if self._for is panel:
            return self._history
        self._for = panel
        history = server.throughput_history
        now = time.monotonic()
        held = self._history
        if (
            held is None
            or history == held
            or not held
            or not history
            or now - self._at >= SPARK_EVERY_S
        ):
            self._history, self._at = history, now
        return self._history
