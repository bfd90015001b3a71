"""The age of a panel's numbers: dimmed with their age when stale, blanked when older still.

Bounds are ``tui.fleet.freshness``'s (dim after three missed polls, blank after 30 s). A load
value's age is how late the console's reading is (``late_s``: the grid counts it from the
moment the snapshot arrived, so a monitor that stopped polling dims every panel) plus how old
the monitor's own reading was (``ServerSnapshot.load_age_s``). The generation rate is also
dimmed while it decays (no Decode line for ``THROUGHPUT_HOLD_S`` .. ``THROUGHPUT_ZERO_S``), with
the time since the last Decode line.
"""

from __future__ import annotations

from dataclasses import replace

from textual.content import Content

from tui.fleet.freshness import THROUGHPUT_HOLD_S, THROUGHPUT_ZERO_S, Freshness, freshness
from tui.fleet.snapshot import ServerSnapshot, ServerState

DIM_STYLE = "dim"
"""How a stale value is drawn."""


def duration_short(seconds: float) -> str:
    """``12s``, ``4m``, ``3h``: an age in at most four characters."""
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def load_age(server: ServerSnapshot, late_s: float) -> float | None:
    """Seconds since the server's load was read, as the panel shows it (None: unknown)."""
    if server.load_age_s is None:
        return late_s if late_s > 0 else None
    return server.load_age_s + late_s


def gen_age(server: ServerSnapshot, late_s: float) -> float | None:
    """The age to show beside the generation rate: the load's when that is stale, else the time
    since the last Decode line while the rate decays; None when it is live."""
    age = load_age(server, late_s)
    if freshness(age) is not Freshness.LIVE:
        return age
    decode = server.throughput_age_s
    if decode is not None and THROUGHPUT_HOLD_S < decode + late_s < THROUGHPUT_ZERO_S:
        return max(decode + late_s, age or 0.0)
    return None


GONE = frozenset({ServerState.STOPPED, ServerState.CRASHED, ServerState.FAILED, ServerState.ABSENT})
"""States of a server that does not run: what it last read is not what the GPU serves now."""


def blanked(server: ServerSnapshot, age: float | None) -> ServerSnapshot:
    """The server with its load values removed when they are older than the blank bound, and
    with every number of its own (load, throughput and its readings, KV tokens, Mamba slots,
    max running) removed when it does not run (``GONE``): a stopped or failed panel kept the
    last launch's numbers, which read as a server still there. The GPU's own readings
    (memory, utilisation) are the GPU's, read at each poll, and stay."""
    if server.state in GONE:
        if _nothing_to_blank(server):
            return server  # the monitor's own (its load is None when gone): no copy to make
        return replace(
            _no_load(server),
            kv_tokens=None,
            mamba_slots=None,
            max_running_effective=None,
            max_running_requested=None,
            capped=False,
            throughput_history=(),
        )
    if freshness(age) is not Freshness.BLANK:
        return server
    return _no_load(server)


def _nothing_to_blank(server: ServerSnapshot) -> bool:
    return (
        server.kv_tokens is None
        and server.mamba_slots is None
        and server.max_running_effective is None
        and server.max_running_requested is None
        and not server.capped
        and not server.throughput_history
        and all(getattr(server, name) is None for name in _LOAD)
    )


_LOAD = (
    "running",
    "queued",
    "token_usage",
    "mamba_usage",
    "swa_usage",
    "cache_hit_rate",
    "gen_throughput",
    "accept_len",
    "spec",
)
"""The load values (``blanked`` removes them)."""


def _no_load(server: ServerSnapshot) -> ServerSnapshot:
    return replace(
        server,
        running=None,
        queued=None,
        token_usage=None,
        mamba_usage=None,
        swa_usage=None,
        cache_hit_rate=None,
        gen_throughput=None,
        accept_len=None,
        spec=None,
    )


def aged(line: Content, age: float | None, *, always: bool = False) -> Content:
    """``line`` dimmed with `` · 12s`` when ``age`` is past the dim bound (or ``always``).

    Args:
        line: The rendered line.
        age: Seconds since its values were read (None: unknown, shown as is).
        always: Dim whenever an age is given (the decaying rate), not only past the bound.

    Returns:
        The line, or the dimmed line with its age.
    """
    if age is None or (not always and freshness(age) is Freshness.LIVE):
        return line
    return Content.assemble(line.stylize(DIM_STYLE), (f" · {duration_short(age)}", DIM_STYLE))
