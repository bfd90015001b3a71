"""Each GPU's server log as the console finds it, in one look: what the preflight calibrates on.

The console's monitor (``tui.fleet.monitor``) follows, per GPU, the log of the server it found:
the fleet state's record of a server gpufleet launched (its exact log path), else the process
serving the GPU's port, with the fleet definition's log path (the profile's ``log_dir`` and
``log_file``, or ``--log-dir``) or, without one, the file its stdout points to. A preflight that
read only the record said "no running server's log to calibrate on" while the console showed
the logs of servers started by a script. ``server_logs`` makes the same choice once, for a
command without a monitor (``gpufleet apply --preflight-only``), and for the GPUs whose log the
monitor has not found (``known``: the monitor's own, ``FleetMonitor.log_paths``).

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

    Per GPU, the first that is a file: the log ``known`` names (the monitor's); the recorded
    server's, while it runs; the running server's on the GPU's port, at the profile's log path
    or where its stdout points; and when nothing runs, the last recorded server's or the
    profile's log path (the last launch's sizes still hold).

    Args:
        profile: the profile, fitted to the fleet (its ports are the fleet's).
        gpus: GPUs of the profile.
        state: the fleet state (``tui.state.fleet_state.read_fleet``).
        known: logs already found (the console's monitor), by GPU.

    Returns:
        GPU -> its log, for the GPUs that have one.
    """
    found: dict[int, Path] = {}
    recorded: dict[int, Path] = {}
    unknown: dict[int, int] = {}  # port -> GPU, of the GPUs whose running server is not known
    for gpu in gpus:
        mine = known.get(gpu) if known is not None else None
        if mine is not None and _is_file(mine):
            found[gpu] = Path(mine)
            continue
        entry = state.get(gpu)
        record = entry.server if entry is not None else None
        port = profile.port_for(gpu)
        if record is not None and record.log_path and _is_file(record.log_path):
            recorded[gpu] = Path(record.log_path)
            if recorded_process(record, port) is not None:
                found[gpu] = recorded[gpu]
                continue
        unknown[port] = gpu
    running = find_servers(unknown) if unknown else {}
    for port, gpu in unknown.items():
        own = log_path_for(profile, gpu)
        process = running.get(port)
        candidates = (own, process.log_path) if process is not None else (recorded.get(gpu), own)
        for candidate in candidates:
            if candidate is not None and _is_file(candidate):
                found[gpu] = Path(candidate)
                break
    return found


def _is_file(path: str | Path) -> bool:
    try:
        return Path(path).is_file()
    except OSError:  # a path the system refuses to look at (too long, a bad name)
        return False
