"""What runs on each GPU: the one locked store the console, the CLI and every operation share.

``tui.paths.fleet_state_file()`` holds, per GPU: the identity of the server gpufleet launched
there (pid, process group, start ticks since boot, boot id, launch id; for a server it adopted,
``gpufleet adopt``, the digest of its command line instead of the launch id it never had: enough
never to signal a stranger; its wall-clock start time and command line for display), the launch
ids of its last few launches (a server of the fleet that lost its record is known by them), the
port the console and the pipeline use for that GPU (it outlives the server, so a relaunch keeps
the GPU on it), and the profile document it runs now and ran before (a rollback relaunches
exactly what ran, even if the profile file was edited since)::

    {"version": 2, "gpus": {"3": {"port": 30003, "host": "127.0.0.1",
                                  "server": {...} | null, "current": {...} | null,
                                  "previous": {...} | null, "launches": ["<launch id>", ...]}}}

Every write is a locked read-modify-write replaced atomically (``tui.state.files``); a damaged
file raises ``StateFileError`` naming it: so does a ``version`` other than ``VERSION`` and a
``current`` or ``previous`` document that is not a valid profile (read as "nothing runs there",
either would let an apply or a start launch beside servers gpufleet no longer manages). The two
files of earlier versions (``fleet.json`` and ``running_profiles.json``) are read once, when this
one does not exist yet.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tui import paths
from tui.profiles import Profile, ProfileError, profile_from_dict, profile_to_dict
from tui.state.files import expect, expect_version, read_document, write_document
from tui.state.locks import locked

VERSION = 2
READABLE_VERSIONS = (VERSION,)
"""The ``version`` values this gpufleet reads; any other is an error naming the file."""

ProfileDoc = dict[str, Any]
"""A whole profile as ``tui.profiles.profile_to_dict`` writes it."""


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """Identity of one server process gpufleet started or adopted (enough to never signal a
    stranger)."""

    gpu: int
    """GPU index (``CUDA_VISIBLE_DEVICES``)."""
    port: int
    """HTTP port."""
    pid: int
    """Main process id."""
    pgid: int
    """Process group (== pid: each server is a session and group leader); always > 1."""
    create_time: float
    """``psutil.Process(pid).create_time()`` at launch: wall-clock, for display only (a clock
    step moves it); identity is ``start_ticks`` and ``boot_id``."""
    cmdline: tuple[str, ...]
    """The command line as the kernel reported it at launch."""
    log_path: str
    """Where its stdout and stderr go."""
    profile: str = ""
    """Name of the profile it was launched from ("" when launched from a bare argv)."""
    host: str = "127.0.0.1"
    """Address it serves on."""
    launch_id: str = ""
    """``GPUFLEET_LAUNCH_ID`` given to the launch: its children carry it, strangers do not."""
    start_ticks: int = 0
    """Its start in clock ticks since boot (``/proc/PID/stat`` field 22; 0: recorded by an older
    gpufleet, upgraded once its launch id is checked)."""
    boot_id: str = ""
    """The boot it was started in (``/proc/sys/kernel/random/boot_id``)."""
    cmdline_digest: str = ""
    """For a server gpufleet adopted (``gpufleet adopt``: it never had a launch id), the digest
    of its command line (``tui.control.takeover.cmdline_digest``): with its start ticks and boot
    id, its identity. "" for a server gpufleet launched."""
    device: int | None = None
    """The physical GPU it runs on (its ``CUDA_VISIBLE_DEVICES``) when that is not ``gpu``:
    servers sharing one card (a profile's ``[gpu.N] device``). None: ``gpu``."""

    @property
    def device_index(self) -> int:
        """The physical GPU whose memory it holds: ``device``, else ``gpu``."""
        return self.gpu if self.device is None else self.device

    @property
    def adopted(self) -> bool:
        """Whether gpufleet adopted this server rather than launched it (no launch id: its
        identity is its main pid's start ticks, boot id and command line digest)."""
        return not self.launch_id and bool(self.cmdline_digest)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = asdict(self)
        data["cmdline"] = list(self.cmdline)
        if self.device is None:
            del data["device"]  # the slot's own card: the record reads as an older gpufleet's
        return data

    @classmethod
    def from_json(cls, data: Any, where: str = "server") -> ProcessRecord:
        """Inverse of ``to_json``; raises ValueError/TypeError/KeyError on a wrong shape.

        Args:
            data: The decoded entry.
            where: Its place in the document, for the messages ("gpus.3.server").
        """
        expect(isinstance(data, dict), f"{where} is not an object")
        cmdline = data["cmdline"]
        expect(isinstance(cmdline, list), f"{where}.cmdline is not a list")
        # pid 0 and 1, and process group 0 and 1, name the signaller's own group, init, or (as
        # kill(-1)) every process: never a server gpufleet launched.
        pid, pgid = _int(data["pid"], f"{where}.pid"), _int(data["pgid"], f"{where}.pgid")
        expect(pid > 1, f"{where}.pid = {pid}: must be > 1")
        expect(pgid > 1, f"{where}.pgid = {pgid}: must be > 1 (the server's own process group)")
        ticks = _int(data.get("start_ticks", 0), f"{where}.start_ticks")
        expect(ticks >= 0, f"{where}.start_ticks = {ticks}: must be >= 0")
        return cls(
            gpu=_int(data["gpu"], f"{where}.gpu"),
            port=_int(data["port"], f"{where}.port"),
            pid=pid,
            pgid=pgid,
            create_time=_num(data["create_time"], f"{where}.create_time"),
            cmdline=tuple(str(part) for part in cmdline),
            log_path=_str(data["log_path"], f"{where}.log_path"),
            profile=_str(data.get("profile", ""), f"{where}.profile"),
            host=_str(data.get("host", "127.0.0.1"), f"{where}.host"),
            launch_id=_str(data.get("launch_id", ""), f"{where}.launch_id"),
            start_ticks=ticks,
            boot_id=_str(data.get("boot_id", ""), f"{where}.boot_id"),
            cmdline_digest=_str(data.get("cmdline_digest", ""), f"{where}.cmdline_digest"),
            device=_device(data.get("device"), f"{where}.device"),
        )


@dataclass(frozen=True, slots=True)
class GpuState:
    """Everything gpufleet knows about one GPU."""

    gpu: int
    """GPU index."""
    port: int | None = None
    """The port the console and the pipeline use for this GPU (None: never launched)."""
    host: str = "127.0.0.1"
    """Address its server serves on."""
    server: ProcessRecord | None = None
    """The server gpufleet launched there and has not seen stop (None: none)."""
    current: ProfileDoc | None = None
    """The profile document running now (None after a failed apply: nothing runs)."""
    previous: ProfileDoc | None = None
    """The one it ran before the last change."""
    launches: tuple[str, ...] = ()
    """The launch ids of the last ``LAUNCHES_KEPT`` servers launched on this GPU, newest last:
    a server holding the GPU's port whose record was lost is known as the fleet's by them."""
    device: int | None = None
    """The physical GPU this slot's servers run on when it is not the slot's index (servers
    sharing one card); like the port, it outlives the server. None: the slot's index."""

    @property
    def device_index(self) -> int:
        """The physical GPU this slot runs on: ``device``, else the slot's index."""
        return self.gpu if self.device is None else self.device

    @property
    def current_name(self) -> str | None:
        """Name of the current profile."""
        return str(self.current.get("name")) if self.current else None

    @property
    def previous_name(self) -> str | None:
        """Name of the previous profile."""
        return str(self.previous.get("name")) if self.previous else None

    @property
    def drain_timeout_s(self) -> float | None:
        """The running profile's ``[stop] drain_timeout_s`` (None: it sets none, or nothing
        runs): the drain deadline its server was launched to be stopped with."""
        stop = self.current.get("stop") if self.current else None
        value = stop.get("drain_timeout_s") if isinstance(stop, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            return None
        return float(value)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the GPU index is the key, not a field)."""
        return {
            "port": self.port,
            "host": self.host,
            "server": self.server.to_json() if self.server else None,
            "current": self.current,
            "previous": self.previous,
            "launches": list(self.launches),
        } | ({} if self.device is None else {"device": self.device})


LAUNCHES_KEPT = 8
"""Launch ids kept per GPU (``GpuState.launches``)."""

FleetState = dict[int, GpuState]
"""GPU index -> its state."""


def _int(value: Any, field: str) -> int:
    expect(isinstance(value, int) and not isinstance(value, bool), f"{field} is not an integer")
    return int(value)


def _num(value: Any, field: str) -> float:
    expect(isinstance(value, int | float) and not isinstance(value, bool), f"{field} is no number")
    expect(math.isfinite(value), f"{field} is not a finite number")
    return float(value)


def _device(value: Any, field: str) -> int | None:
    if value is None:
        return None
    expect(isinstance(value, int) and not isinstance(value, bool), f"{field} is not an integer")
    expect(0 <= value <= 255, f"{field} = {value}: must be a GPU index in 0..255")
    return int(value)


def _str(value: Any, field: str) -> str:
    expect(isinstance(value, str), f"{field} is not a string")
    return str(value)


VALIDATED_KEEP = 64
"""Profile documents remembered as valid (``_valid_doc``): a fleet runs a handful of distinct
documents, and each read of the state (about once a second in the console and the agent) would
otherwise validate every GPU's two documents again (~0.3 ms each)."""
_validated: OrderedDict[str, None] = OrderedDict()
_validated_guard = threading.Lock()


def _valid_doc(doc: ProfileDoc, field: str) -> None:
    key = json.dumps(doc, sort_keys=True, default=str)
    with _validated_guard:
        if key in _validated:
            _validated.move_to_end(key)
            return
    try:
        profile_from_dict(doc, default_name=str(doc.get("name", "stored")), source=field)
    except ProfileError as exc:
        first = exc.problems[0] if exc.problems else None
        what = f"{first.field} = {first.value!r}: {first.message}" if first else str(exc)
        raise ValueError(f"{field} is not a valid profile ({what})") from None
    with _validated_guard:
        _validated[key] = None
        while len(_validated) > VALIDATED_KEEP:
            _validated.popitem(last=False)


def _doc(value: Any, field: str, validate: bool = True) -> ProfileDoc | None:
    expect(value is None or isinstance(value, dict), f"{field} is not a profile document")
    if not value:
        return None
    if validate:
        _valid_doc(value, field)
    return value


def _gpu_key(key: Any) -> int:
    expect(isinstance(key, str) and key.isascii() and key.isdigit(), f"GPU key {key!r}")
    return int(key)


def _parse(data: Any) -> FleetState:
    expect_version(data, READABLE_VERSIONS)
    gpus = data["gpus"]
    expect(isinstance(gpus, dict), "'gpus' is not an object")
    out: FleetState = {}
    for key, entry in gpus.items():
        gpu = _gpu_key(key)
        expect(isinstance(entry, dict), f"gpus.{key} is not an object")
        port = entry.get("port")
        server = entry.get("server")
        launches = entry.get("launches", [])
        expect(
            isinstance(launches, list) and all(isinstance(x, str) for x in launches),
            f"gpus.{key}.launches is not a list of launch ids",
        )
        out[gpu] = GpuState(
            gpu=gpu,
            port=None if port is None else _int(port, f"gpus.{key}.port"),
            host=_str(entry.get("host", "127.0.0.1"), f"gpus.{key}.host"),
            server=None
            if server is None
            else ProcessRecord.from_json(server, f"gpus.{key}.server"),
            current=_doc(entry.get("current"), f"gpus.{key}.current"),
            previous=_doc(entry.get("previous"), f"gpus.{key}.previous"),
            launches=tuple(launches[-LAUNCHES_KEPT:]),
            device=_device(entry.get("device"), f"gpus.{key}.device"),
        )
    return out


def _legacy() -> FleetState:
    """The state of earlier versions' two files (fleet record + running profiles)."""

    def servers(data: Any) -> dict[int, ProcessRecord]:
        expect(isinstance(data, dict) and isinstance(data.get("servers"), dict), "no 'servers'")
        return {_gpu_key(k): ProcessRecord.from_json(v) for k, v in data["servers"].items()}

    def running(data: Any) -> dict[int, tuple[ProfileDoc | None, ProfileDoc | None]]:
        expect(isinstance(data, dict) and isinstance(data.get("gpus"), dict), "no 'gpus'")
        return {
            # Written by an older gpufleet, read once on upgrade: its documents are kept as they
            # were (a rule added since must not make the old fleet unreadable).
            _gpu_key(k): (
                _doc(v.get("current"), "current", validate=False),
                _doc(v.get("previous"), "previous", validate=False),
            )
            for k, v in data["gpus"].items()
        }

    no_records: dict[int, ProcessRecord] = {}
    no_profiles: dict[int, tuple[ProfileDoc | None, ProfileDoc | None]] = {}
    records = read_document(paths.state_dir() / "fleet.json", servers, no_records)
    profiles = read_document(paths.state_dir() / "running_profiles.json", running, no_profiles)
    out: FleetState = {}
    for gpu in sorted(set(records) | set(profiles)):
        record = records.get(gpu)
        current, previous = profiles.get(gpu, (None, None))
        out[gpu] = GpuState(
            gpu,
            record.port if record else None,
            record.host if record else "127.0.0.1",
            record,
            current,
            previous,
        )
    return out


def read_fleet(path: Path | None = None) -> FleetState:
    """Every GPU's state (empty when gpufleet never launched anything).

    Raises:
        StateFileError: the state file is damaged (named in the message).
    """
    target = path or paths.fleet_state_file()
    state = read_document(target, _parse, None)
    if state is None:
        return _legacy() if path is None else {}
    return state


def _write(target: Path, state: FleetState) -> None:
    write_document(
        target,
        {"version": VERSION, "gpus": {str(g): s.to_json() for g, s in sorted(state.items())}},
    )


def update_fleet(change: Callable[[FleetState], FleetState], path: Path | None = None) -> None:
    """Apply ``change`` to the state under the writer lock and replace the file atomically.

    Raises:
        StateFileError: the state file is damaged (nothing is written over it).
    """
    target = path or paths.fleet_state_file()
    with locked(target):
        state = read_fleet(path)
        _write(target, change(dict(state)))


def read_records(path: Path | None = None) -> dict[int, ProcessRecord]:
    """The recorded servers, by GPU index.

    Raises:
        StateFileError: the state file is damaged.
    """
    return {g: s.server for g, s in read_fleet(path).items() if s.server is not None}


def read_running(path: Path | None = None) -> FleetState:
    """The GPUs that have a current or previous profile recorded.

    Raises:
        StateFileError: the state file is damaged.
    """
    return {g: s for g, s in read_fleet(path).items() if s.current or s.previous}


def fleet_ports(path: Path | None = None) -> dict[int, int]:
    """The port of every GPU gpufleet has launched on (the fleet's, not any profile's).

    Raises:
        StateFileError: the state file is damaged.
    """
    return {g: s.port for g, s in read_fleet(path).items() if s.port is not None}


def put_record(record: ProcessRecord, path: Path | None = None) -> None:
    """Record (or replace) the server on ``record.gpu``; its port becomes the GPU's port."""

    def change(state: FleetState) -> FleetState:
        old = state.get(record.gpu, GpuState(record.gpu))
        launches = old.launches
        if record.launch_id and record.launch_id not in launches:
            launches = (*launches, record.launch_id)[-LAUNCHES_KEPT:]
        state[record.gpu] = replace(
            old,
            port=record.port,
            host=record.host,
            server=record,
            launches=launches,
            device=record.device,
        )
        return state

    update_fleet(change, path)


def upgrade_record(old: ProcessRecord, new: ProcessRecord, path: Path | None = None) -> None:
    """Replace ``old`` by ``new`` (the same server, verified again) when the GPU still records
    ``old``: a later write (a relaunch) is never undone by an upgrade."""

    def change(state: FleetState) -> FleetState:
        entry = state.get(old.gpu)
        if entry is not None and entry.server == old:
            state[old.gpu] = replace(entry, server=new)
        return state

    update_fleet(change, path)


def remove_record(gpu: int, pid: int | None = None, path: Path | None = None) -> None:
    """Forget the server on ``gpu`` (only if its pid is ``pid``, when given); keep its port."""

    def change(state: FleetState) -> FleetState:
        old = state.get(gpu)
        if old is not None and old.server is not None and (pid is None or old.server.pid == pid):
            state[gpu] = replace(old, server=None)
        return state

    update_fleet(change, path)


def forget_gpus(gpus: Iterable[int], path: Path | None = None) -> None:
    """Remove ``gpus`` from the fleet state altogether: port, profiles, launches, record (a GPU
    taken out of the machine or out of the fleet; ``gpufleet fleet forget``)."""
    gone = set(gpus)

    def change(state: FleetState) -> FleetState:
        return {gpu: entry for gpu, entry in state.items() if gpu not in gone}

    update_fleet(change, path)


def record_outcome(
    profile: Profile, ready: Iterable[int], failed: Iterable[int], path: Path | None = None
) -> None:
    """Record a change of profile: ``ready`` GPUs now run ``profile``; ``failed`` run nothing.

    Re-applying the running profile keeps the older one as the rollback target.
    """
    doc = profile_to_dict(profile)

    def change(state: FleetState) -> FleetState:
        for gpu in ready:
            old = state.get(gpu, GpuState(gpu))
            same = old.current is not None and old.current == doc
            state[gpu] = replace(old, current=doc, previous=old.previous if same else old.current)
        for gpu in failed:
            old = state.get(gpu, GpuState(gpu))
            keep = old.current if old.current is not None else old.previous
            state[gpu] = replace(old, current=None, previous=keep)
        return state

    update_fleet(change, path)


def profile_of(doc: ProfileDoc) -> Profile:
    """The profile a stored document describes (validated again).

    Raises:
        ProfileError: the stored document is no longer a valid profile.
    """
    return profile_from_dict(doc, default_name=str(doc.get("name", "previous")))
