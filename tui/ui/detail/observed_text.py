"""The detail screen's latency table and its pools, draft and energy lines (words only).

TTFT, inter-token, end-to-end and queue-time percentiles (p50/p90/p99) with the observations
they come from and the window they cover (``ServerSnapshot.latency``, from the server's own
histograms differenced between scrapes: ``tui.fleet.latency``).
"""

from __future__ import annotations

from textual.content import Content

from tui.fleet.latency import LatencySummary, Percentiles
from tui.fleet.snapshot import GpuPanel, ServerSnapshot
from tui.ui.format import NA, duration, num
from tui.ui.grid.panel_observed import energy_words, pool_parts, spec_words

LATENCIES = (
    ("ttft", "TTFT", "requests"),
    ("itl", "ITL", "tokens"),
    ("e2e", "E2E", "requests"),
    ("queue", "queue", "requests"),
)
"""``LatencySummary`` field, its label, what its count counts."""


def seconds(value: float | None) -> str:
    """A latency: ``850 ms`` below a second, ``2.41 s`` above; a dash when unknown."""
    if value is None:
        return NA
    if value < 1.0:
        return f"{value * 1000:.0f} ms" if value >= 0.01 else f"{value * 1000:.1f} ms"
    return f"{value:.2f} s"


def window_words(summary: LatencySummary) -> str:
    """``over the last 5m 00s``, or ``since the server started`` (one reading so far)."""
    if summary.window_s is None:
        return "since the server started"
    return f"over the last {duration(summary.window_s)}"


def latency_lines(summary: LatencySummary | None) -> list[Content]:
    """A heading naming the window and the columns, then one line per latency: ``TTFT
    120 ms  850 ms  2.41 s  1,204 requests``; why there is none when there is none."""
    if summary is None:
        return [Content.styled("latency: no /metrics histograms read yet", "$text-muted")]
    head = f"latency {window_words(summary)}"
    lines = [Content.styled(f"{head}\n{'':<6}{'p50':>9}{'p90':>9}{'p99':>9}", "bold")]
    for field, label, counted in LATENCIES:
        part: Percentiles | None = getattr(summary, field)
        if part is None:
            lines.append(Content(f"{label:<6} not exported"))
            continue
        count = "count unknown" if part.count is None else f"{num(part.count)} {counted}"
        cells = "".join(f"{seconds(v):>9}" for v in (part.p50, part.p90, part.p99))
        lines.append(Content(f"{label:<6}{cells}  {count}"))
    return lines


def observed_lines(panel: GpuPanel, server: ServerSnapshot) -> list[Content]:
    """The pools with the cache's hit rate, the draft, the energy."""
    lines = [
        Content("use " + "  ".join(pool_parts(server))),
        Content(spec_words(server.spec) + _draft_tokens(server)),
    ]
    if panel.energy is not None:
        joules = f"  ({num(panel.energy.joules / 1000, 1)} kJ metered)"
        lines.append(Content(energy_words(panel.energy, digits=3) + joules))
    return lines


def _draft_tokens(server: ServerSnapshot) -> str:
    spec = server.spec
    if spec is None or spec.draft_tokens is None:
        return ""
    return f"  draft tokens {spec.draft_tokens}"
