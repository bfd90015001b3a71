"""How one canary measures: its windows, levels and timeouts (``tui.rollout.canary`` runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.retune.options import ApplyOptions


@dataclass(frozen=True, slots=True)
class CanaryOptions:
    """How one canary measures."""

    window_s: float = 60.0
    """Planned measuring window after the warm-up."""
    warmup_s: float = 20.0
    """Ignored seconds after the canary is ready (its batch fills, caches warm)."""
    max_window_s: float = 180.0
    """Longest the window may be extended when a verdict is in reach."""
    interval_s: float = 5.0
    """One paired sample per interval."""
    level: float = 0.95
    """Family-wise two-sided confidence level over all looks."""
    min_intervals: int = 5
    """No look before this many paired samples."""
    margin: float = 0.03
    """'No measurable difference' is shown once the interval lies within +/- this (relative)."""
    baseline_s: float = 10.0
    """Seconds sampled before the canary restarts (the cost's baseline)."""
    settle_s: float = 30.0
    """Longest the cost is integrated after the canary is ready."""
    apply: ApplyOptions = field(default_factory=lambda: ApplyOptions(measure=False))
    """The retune engine's timeouts for the canary GPU (its own measurement is off)."""

    @property
    def max_intervals(self) -> int:
        """Most paired samples the window can take."""
        return max(self.min_intervals, int(self.max_window_s / self.interval_s + 1e-9))

    @property
    def looks(self) -> int:
        """Looks the window may take (the Bonferroni divisor)."""
        return self.max_intervals - self.min_intervals + 1

    def errors(self) -> list[str]:
        """Invalid options, each naming field, value and allowed range."""
        out = [f"apply.{e}" for e in self.apply.errors()]
        if not self.interval_s > 0:
            out.append(f"interval_s={self.interval_s!r}: must be > 0")
        for name in ("warmup_s", "baseline_s", "settle_s"):
            if getattr(self, name) < 0:
                out.append(f"{name}={getattr(self, name)!r}: must be >= 0")
        if self.min_intervals < 3:
            out.append(f"min_intervals={self.min_intervals!r}: must be >= 3")
        if self.window_s < self.min_intervals * self.interval_s:
            out.append(
                f"window_s={self.window_s!r}: must be >= min_intervals * interval_s "
                f"({self.min_intervals * self.interval_s:g})"
            )
        if self.max_window_s < self.window_s:
            out.append(
                f"max_window_s={self.max_window_s!r}: must be >= window_s ({self.window_s:g})"
            )
        if not 0 < self.level < 1:
            out.append(f"level={self.level!r}: must be in (0, 1)")
        if not 0 < self.margin < 1:
            out.append(f"margin={self.margin!r}: must be in (0, 1)")
        return out
