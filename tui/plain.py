"""``GPUFLEET_PLAIN``: a benchmarking switch that turns gpufleet's hand-written replacements of a
library off, one by one, so a benchmark can measure what each buys in the same run.

Each replacement exists for the console's CPU (``bench.gpu_overhead``, ``bench.bench_console``);
one is kept only where it buys at least a tenth of the console's CPU under load. With its name
in ``GPUFLEET_PLAIN`` (comma-separated; ``render`` and ``all`` name groups), gpufleet runs the
code a user would get if the replacement were deleted: the library's own path. The variable is
read here alone, once per process; every replacement asks :func:`off` at its one seam.

    GPUFLEET_PLAIN=keepalive,gcfreeze gpufleet console ...

Not an operator's setting: the console is slower with any of these off, never more correct.
"""

from __future__ import annotations

import os
from functools import cache

ENV = "GPUFLEET_PLAIN"
"""The environment variable (a benchmarking switch; docs/performance.md)."""

SWITCHES: dict[str, str] = {
    "keepalive": "HTTP through httpx's own client and transport (httpcore), not "
    "tui.servers.keepalive",
    "batch": "the monitor's steady /metrics reads on the event loop, not tui.servers.batch_fetch",
    "gcfreeze": "the console does not gc.freeze its start-up heap",
    "compositor": "Textual's own compositor on the main screen (no DirtyRowsCompositor)",
    "rows": "a panel's rows framed by Textual's styles cache, not the panel's kept frame",
    "strips": "a panel's lines drawn by Textual's Visual.to_strips, none kept",
    "linediff": "a changed panel is repainted whole, not its changed cells alone",
}
"""Each replacement that can be switched off, and what runs instead."""

GROUPS: dict[str, tuple[str, ...]] = {
    "render": ("compositor", "rows", "strips", "linediff"),
    "all": tuple(SWITCHES),
}
"""Names for several switches at once."""


class PlainError(ValueError):
    """``GPUFLEET_PLAIN`` names something that is not a switch."""


def parse(text: str) -> frozenset[str]:
    """The switches ``text`` turns off (comma-separated names and groups; blanks ignored).

    Raises:
        PlainError: a name that is neither a switch nor a group, in one line naming the
            allowed ones.
    """
    names: set[str] = set()
    for word in text.split(","):
        name = word.strip().lower()
        if not name:
            continue
        if name in GROUPS:
            names.update(GROUPS[name])
        elif name in SWITCHES:
            names.add(name)
        else:
            allowed = ", ".join([*SWITCHES, *GROUPS])
            raise PlainError(f"{ENV}: {name!r} is not a switch; allowed: {allowed}")
    return frozenset(names)


@cache
def switched_off() -> frozenset[str]:
    """The switches this process runs without (``GPUFLEET_PLAIN``, read once).

    Raises:
        PlainError: as :func:`parse` (``tui.cli`` checks it before any command runs).
    """
    return parse(os.environ.get(ENV, ""))


def off(name: str) -> bool:
    """Whether the replacement ``name`` (a key of ``SWITCHES``) is switched off here."""
    if name not in SWITCHES:
        raise KeyError(f"{name!r} is not one of {', '.join(SWITCHES)}")
    return name in switched_off()
