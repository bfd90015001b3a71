"""What a GPU panel says: its lines for the full and the compact layout (no widget here).

The panel widget (``tui.ui.grid.gpu_panel``) lays them out and repaints what changed; the
detail screen reuses the state, limit, error and pressure lines.
"""

from __future__ import annotations

from textual.content import Content

from tui.fleet.running_profiles import AUTO
from tui.fleet.snapshot import GpuPanel, ServerSnapshot, ServerState
from tui.gpu.snapshot import GpuSnapshot
from tui.ui.format import NA, bar, gib, num, pct, short_num, sig3, sig3_text, spark
from tui.ui.grid.ages import aged, blanked, duration_short, gen_age, load_age
from tui.ui.grid.line_cache import line
from tui.ui.grid.panel_observed import energy_line, pools_line, spec_line

STATE_STYLE: dict[ServerState, str] = {
    ServerState.ABSENT: "$text-muted",
    ServerState.STARTING: "$warning",
    ServerState.READY: "$success",
    ServerState.FAILED: "bold $error",
    ServerState.STOPPED: "$text-muted",
    ServerState.CRASHED: "bold $error",
    ServerState.STALE: "$warning",
    ServerState.STUCK: "bold $error",
    ServerState.STOPPING: "$warning",
    ServerState.UNKNOWN: "bold $error",
}
"""Theme colour of each server state word."""

POWER_STEP_W = 5
"""Board power is shown to the nearest 5 W. Why: a loaded GPU's power moves a few watts every
reading, which redrew the line each second; an operator reads power against a limit of 700 W
or more, where 5 W is below notice (the detail screen keeps the watt)."""


def max_running(server: ServerSnapshot) -> Content:
    """Effective max running requests, with what the profile asked ("asked" means only that).

    ``40 (asked 64)`` in $warning when SGLang capped the profile's number; ``16 (auto, sglang
    48)`` when the profile left it auto and SGLang set its own value (48 with speculative
    decoding) that it then capped; ``(arg 64)`` when no profile is recorded for the GPU.
    """
    return line(max_running_part(server))


def max_running_part(server: ServerSnapshot) -> tuple[str, str]:
    """``max_running`` as (text, style) (style "" for none), a part of a longer ``line``."""
    effective = num(server.max_running_effective)
    argument = server.max_running_requested
    asked = server.profile.asked_value("max_running_requests") if server.profile else None
    if asked is not None and asked != AUTO:
        if server.capped:
            return (f"{effective} (asked {asked})", "$warning")
        return (effective, "")
    if asked == AUTO:
        shown = server.capped and argument is not None
        return (f"{effective} (auto, sglang {argument})" if shown else effective, "")
    if server.capped and argument is not None:
        return (f"{effective} (arg {argument})", "$warning")
    return (effective, "")


def state_line(panel: GpuPanel) -> Content:
    """State word (with startup phase), port and pid."""
    server = panel.server
    if server is None:
        return line(("no server", "$text-muted"))
    word = server.state.value
    if server.state is ServerState.STARTING and server.phase:
        word = f"{word}: {server.phase}"
    if server.state is ServerState.STUCK and server.stuck_for_s is not None:
        word = f"{word} {server.stuck_for_s:.0f}s"
    pid = NA if server.pid is None else str(server.pid)
    # port 0: not known (a replay: the history records no ports), never ':0'
    where = f"  :{server.port}" if server.port else ""
    return line((word, STATE_STYLE[server.state]), f"{where} pid {pid}" if where else "")


def gpu_lines(gpu: GpuSnapshot | None, note: str, width: int, full: bool) -> list[Content]:
    """Memory, utilisation, temperature and power; the note when there is no reading."""
    if gpu is None:
        return [line((note or "no GPU reading", "$text-muted"))]
    used, total = gib(gpu.memory_used), gib(gpu.memory_total)
    power = NA if gpu.power_w is None else str(round(gpu.power_w / POWER_STEP_W) * POWER_STEP_W)
    temp = NA if gpu.temperature_c is None else f"{gpu.temperature_c:.0f}°C"
    if not full:
        head = f"{gpu.memory_used / 2**30:.0f}/{gpu.memory_total / 2**30:.0f}G"
        return [line(f"{head} {pct(gpu.utilization_gpu)} {temp} {power}W")]
    label = f" {used}/{total} GiB"
    mem_bar = bar(gpu.memory_fraction, max(4, width - 4 - len(label)))
    limit = "" if gpu.power_limit_w is None else f"/{gpu.power_limit_w:.0f}"
    return [
        line("mem ", (mem_bar, "$accent"), label),
        line(f"util {pct(gpu.utilization_gpu)}  {temp}  {power}{limit} W"),
    ]


def error_line(server: ServerSnapshot | None) -> Content | None:
    """The last error, prefixed with its reason: $error when fatal, $warning when one request
    failed (an input too long); None when there is none."""
    if server is None or not server.last_error:
        return None
    reason = f"{server.error_reason.upper()}: " if server.error_reason else ""
    style = "$error" if server.error_fatal else "$warning"
    return line((f"{reason}{server.last_error}", style))


def crash_line(server: ServerSnapshot | None) -> Content | None:
    """How a crashed server ended (``crashed: killed by SIGKILL``), in $error; None otherwise."""
    if server is None or server.state is not ServerState.CRASHED:
        return None
    return line((f"crashed: {server.exit_status or 'exit status unknown'}", "bold $error"))


def pressure_line(server: ServerSnapshot | None) -> Content | None:
    """The last memory-pressure event, e.g. ``retracted 3 (12s ago)``, in $warning."""
    if server is None or not server.pressure:
        return None
    age = "" if server.pressure_age_s is None else f" ({duration_short(server.pressure_age_s)} ago)"
    return line((f"{server.pressure}{age}", "$warning"))


RATE_CELLS = {True: 17, False: 9}
"""Cells the rate takes before the sparkline (full, compact): ``gen 14,000 tok/s `` and
``1400 t/s ``, padded, so the sparkline keeps its cells (and its span) as the digits change."""
SCALE_CELLS = {True: 15, False: 9}
"""Cells kept after the sparkline for its scale (``max 2k · 15m``, ``2k·15m``)."""


def spark_cells(width: int, full: bool) -> int:
    """Cells of the sparkline on a gen line ``width`` cells wide (0: no room for one)."""
    cells = width - RATE_CELLS[full] - SCALE_CELLS[full]
    return cells if cells >= 4 else 0


Spark = tuple[str, str]
"""A drawn sparkline and its scale (``tui.ui.grid.panel_graphs``)."""


def gen_line(
    server: ServerSnapshot,
    width: int,
    full: bool,
    drawn: Spark | None = None,
) -> Content:
    """Generation tok/s, then a sparkline of its history with the sparkline's scale and span.

    Args:
        server: The server as shown (its rate may be blanked).
        width: Cells of the line.
        full: The full layout's words (else the compact ones).
        drawn: The sparkline from the fleet's history and its scale (``max 2k · 5m``), when
            the history has this GPU's series; else the readings are drawn on their own
            maximum (``max 1.4k``: no span, they have no times).
    """
    label = (
        f"gen {sig3_text(server.gen_throughput)} tok/s "
        if full
        else (f"{short_num(sig3(server.gen_throughput))} t/s ")
    )
    label = label.ljust(RATE_CELLS[full])
    if drawn is not None:
        blocks, scale = drawn
        room = width - len(label)
        if len(blocks) + 1 + len(scale) > room:  # an age beside a decaying rate: no scale
            return line(label, (blocks[max(0, len(blocks) - room) :], "$success"))
        return line(label, (blocks, "$success"), (f" {scale}", "dim"))
    readings = server.throughput_history
    cells = spark_cells(width, full)
    if not readings or cells == 0:
        return line(label.rstrip())
    top = short_num(max(readings))
    blocks = spark(readings, cells)
    return line(label, (blocks, "$success"), (f" max {top}" if full else f" ≤{top}", "dim"))


def full_lines(
    panel: GpuPanel,
    width: int,
    late_s: float = 0.0,
    drawn: Spark | None = None,
) -> list[Content]:
    """Every number, one topic per line (nine lines: what went wrong comes before the draft and
    the energy, which a panel of the least height then cuts); stale ones dimmed with their
    age, a server that is not running without its numbers (``ages.blanked``).

    Args:
        panel: The GPU and its server.
        width: Cells per line.
        late_s: Seconds since the snapshot arrived (the grid counts them).
        drawn: The sparkline from the fleet's history, with its scale (``gen_line``).
    """
    late = late_s or None
    lines = [
        aged(each, late)
        for each in (state_line(panel), *gpu_lines(panel.gpu, panel.gpu_note, width, full=True))
    ]
    server = panel.server
    if server is not None:
        age = load_age(server, late_s)
        shown, decay = blanked(server, age), gen_age(server, late_s)
        lines += [
            line(capacity_words(shown)),
            aged(running_line(shown), age),
            aged(pools_line(shown), age),
            aged(
                gen_line(shown, width - (6 if decay else 0), True, drawn),
                decay,
                always=True,
            ),
        ]
    for extra in (crash_line(server), pressure_line(server), error_line(server)):
        if extra is not None:
            lines.append(extra)
    # Last, after what went wrong: a panel of the least height cuts these first.
    if server is not None and draft_known(shown):
        lines.append(aged(spec_line(shown), age))
    energy = energy_line(panel.energy)
    if energy is not None:
        lines.append(energy)
    return lines


def running_line(server: ServerSnapshot) -> Content:
    """``running 40/64  queued 12``: running against its effective maximum (with what was
    asked, ``max_running_part``); ``run`` when those words are long, so the queue stays in a
    panel of the least width."""
    limit = max_running_part(server)
    label = "running" if len(limit[0]) <= 13 else "run"
    return line(f"{label} {num(server.running)}/", limit, f"  queued {num(server.queued)}")


def draft_known(server: ServerSnapshot) -> bool:
    """Whether its draft can be told: it runs one, or its load was read (then ``spec none``
    is known, not guessed for a server that is starting, stopped or unread)."""
    return server.spec is not None or server.running is not None


def capacity_words(server: ServerSnapshot) -> str:
    """The pools' sizes: ``KV 798,080 tok  mamba 200 slots`` (no Mamba word without a pool)."""
    kv = f"KV {num(server.kv_tokens)} tok"
    if server.mamba_slots is None and not server.mamba_usage:
        return kv
    return f"{kv}  mamba {num(server.mamba_slots)} slots"


def compact_lines(
    panel: GpuPanel,
    width: int,
    height: int,
    late_s: float = 0.0,
    drawn: Spark | None = None,
) -> list[Content]:
    """The essential numbers, most important first, cut to ``height`` lines (stale ones
    dimmed with their age, a stopped server's blanked, and the sparkline drawn, as in
    ``full_lines``)."""
    late = late_s or None
    lines = [
        aged(each, late)
        for each in (state_line(panel), *gpu_lines(panel.gpu, panel.gpu_note, width, full=False))
    ]
    server = panel.server
    age = load_age(server, late_s) if server is not None else None
    shown = blanked(server, age) if server is not None else None
    for extra in (crash_line(server), pressure_line(server)):
        if extra is not None:
            lines.append(extra)
    error = error_line(server)
    if error is not None:
        lines.append(error)
        # a failed server has no load lines: let its error use the room they would have taken
        spare = height - len(lines) - (0 if server is None or server.running is None else 3)
        text = error.plain[width:]
        while spare > 0 and text:
            lines.append(Content.styled(text[:width], "$error"))
            text, spare = text[width:], spare - 1
    if (
        server is not None
        and shown is not None
        and (server.running is not None or server.gen_throughput is not None)
    ):
        run = line(f"run {num(shown.running)}/", max_running_part(shown), f" q{num(shown.queued)}")
        lines.append(aged(run, age))
        decay = gen_age(server, late_s)
        gen = gen_line(shown, width - (6 if decay else 0), False, drawn)
        lines.append(aged(gen, decay, always=True))
    if server is not None and shown is not None and shown.kv_tokens is not None:
        lines.append(aged(pools_line(shown, short=True), age))
    if shown is not None and draft_known(shown):  # a taller compact panel's
        lines.append(aged(spec_line(shown), age))
    energy = energy_line(panel.energy)
    if energy is not None:
        lines.append(energy)
    return lines[:height]
