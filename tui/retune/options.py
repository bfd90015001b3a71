"""Options of one apply: per-GPU timeouts, stagger, throughput windows."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApplyOptions:
    """How one apply runs."""

    timeout_s: float = 600.0
    """Per-GPU limit from launch to ready."""
    release_timeout_s: float = 120.0
    """Per-GPU limit for the old processes' GPU memory to be released."""
    poll_s: float = 0.5
    """Cadence of log reads, exit checks and readiness probes."""
    stagger_s: float = 0.0
    """When > 0, launches are spaced by this many seconds, in GPU order (the profile asks)."""
    measure: bool = True
    """Take the before/after throughput windows."""
    window_s: float = 60.0
    """Length of each throughput window."""
    warmup_s: float = 30.0
    """Ignored time after every GPU settled, before the 'after' window."""
    interval_s: float = 5.0
    """Throughput sampling interval (one sample per interval)."""
    confidence_level: float = 0.95
    """Two-sided level of the verdict's interval."""

    def errors(self) -> list[str]:
        """Invalid options, each naming field, value and allowed range."""
        out = []
        for name in ("timeout_s", "release_timeout_s", "poll_s", "interval_s"):
            value = getattr(self, name)
            if not value > 0:
                out.append(f"{name}={value!r}: must be > 0")
        for name in ("stagger_s", "window_s", "warmup_s"):
            value = getattr(self, name)
            if value < 0:
                out.append(f"{name}={value!r}: must be >= 0")
        if not 0 < self.confidence_level < 1:
            out.append(f"confidence_level={self.confidence_level!r}: must be in (0, 1)")
        return out
