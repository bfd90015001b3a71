"""Each GPU's server log as the console finds it, in one look: what the preflight calibrates on.

The console's monitor (``tui.fleet.monitor``) follows, per GPU, the log of the server it found:
the fleet state's record of a server gpufleet launched (its exact log path), else the process
serving the GPU's port, with the fleet definition's log path (the profile's ``log_dir`` and
``log_file``, or ``--log-dir``) or, without one, the file its stdout points to. A preflight that
read only the record said "no running server's log to calibrate on" while the console showed
the logs of servers started by a script. ``server_logs`` makes the same choice once, for a
command without a monitor (``gpufleet apply --preflight-only``); given the monitor's own
(``known``: ``FleetMonitor.log_paths``) it takes those, and the last launch's log where the
monitor follows none that exists.

Blocking (``/proc`` and the process table are read): call from a thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tui.fleet.tracker import recorded_process
from tui.profiles import Profile, log_path_for
from tui.servers.discovery import find_servers
from tui.state.fleet_state import FleetState


def server_logs(
    profile: Profile,
    gpus: Sequence[int],
    state: FleetState,
    known: Mapping[int, str] | None = None,
) -> dict[int, Path]:
    """The log file of each GPU's server, where one exists.

    With ``known`` (the console's monitor, which looks for the running servers itself, every
    few seconds), per GPU the first that is a file of: the log it follows, the last recorded
    server's, the profile's log path; nothing else is looked for (a process-table scan costs
    ~90 ms, and the form predicts at each keystroke). Without it: the recorded server's log
    while that server runs; else the log of the server running on the GPU's port, at the
    profile's log path or where its stdout points; and with nothing running, the last recorded
    server's or the profile's log (the last launch's sizes still hold).

    Args:
        profile: the profile, fitted to the fleet (its ports are the fleet's).
        gpus: GPUs of the profile.
        state: the fleet state (``tui.state.fleet_state.read_fleet``).
        known: the logs the console's monitor follows, by GPU.

    Returns:
        GPU -> its log, for the GPUs that have one.
    """
    found: dict[int, Path] = {}
    unknown: dict[int, int] = {}  # port -> GPU, of the GPUs whose running server is looked for
    last: dict[int, tuple[str | None, str]] = {}  # GPU -> (last recorded server's log, own)
    for gpu in gpus:
        entry = state.get(gpu)
        record = entry.server if entry is not None else None
        recorded = record.log_path if record is not None else None
        last[gpu] = (recorded, str(log_path_for(profile, gpu)))
        port = profile.port_for(gpu)
        if known is not None:
            pick = _first_file(known.get(gpu), *last[gpu])
        elif record is not None and recorded_process(record, port) is not None:
            pick = _first_file(recorded)
        else:
            unknown[port] = gpu
            continue
        if pick is not None:
            found[gpu] = pick
    running = find_servers(unknown) if unknown else {}
    for port, gpu in unknown.items():
        process = running.get(port)
        own = last[gpu][1]
        pick = _first_file(own, process.log_path) if process else _first_file(*last[gpu])
        if pick is not None:
            found[gpu] = pick
    return found


def _first_file(*paths: str | None) -> Path | None:
    """The first of ``paths`` that is a regular file (a log), or None."""
    for path in paths:
        if not path:
            continue
        try:
            if Path(path).is_file():
                return Path(path)
        except OSError:  # a path the system refuses to look at (too long, a bad name)
            continue
    return None
