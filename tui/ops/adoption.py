"""Taking over a running fleet gpufleet did not launch: the plan, then the one write.

``plan_adoption`` reads, and signals and writes nothing: for each port its listening server
(``tui.control.takeover``: refused, named, when it is no SGLang server), its GPU (``--gpus``,
else its ``CUDA_VISIBLE_DEVICES``, set beside what the driver lists on that GPU; two ports on
one card are two slots, the second numbered as ``--gpus`` says or with the next free number,
each with its card as its ``device``), its log (the
``--log-dir`` pattern, else the file its stdout goes to), its release (its ``/server_info``,
else its interpreter), and the profile written from the servers' own argv
(``tui.profiles.from_servers``), with a line for each thing the profile cannot hold.

``write_adoption`` (under the operation lock, ``AdoptOps.adopt``) checks every server is still
the process that was read, writes the profile file, then records every server in the fleet
state in one locked write (with the profile as what it runs); a failed state write takes the
profile file back out. Bad input is one line naming the field, with nothing written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import tomli_w

from tui import paths
from tui.control.identity import IdentityMismatch, verify
from tui.control.neighbours import on_device
from tui.control.release import GpuPids, nvml_gpu_pids, sim_gpu_pids
from tui.control.takeover import NotAdoptable, RunningServer, adopted_record, running_server
from tui.profiles import Profile, profile_to_dict, save_profile
from tui.profiles.argv_read import split_launch
from tui.profiles.from_servers import DraftError, ServerCommand, draft_profile
from tui.profiles.sglang_release import ReleaseError, installed_release, served_release
from tui.profiles.store import NAME, SUFFIX, profile_dirs
from tui.profiles.templates import log_file_problem, template_for
from tui.state.fleet_state import FleetState, GpuState, read_fleet, update_fleet
from tui.words import gpus_words, spans

DEFAULT_LOG = ("{state}/logs", "sglang_gpu{gpu}.log")
"""Where relaunched servers log when the adopted ones' logs follow no one pattern."""


class AdoptError(ValueError):
    """Bad input or a port that cannot be adopted: one line naming the field; nothing written."""


@dataclass(frozen=True, slots=True)
class AdoptRequest:
    """What the operator asked to take over."""

    ports: tuple[int, ...]
    """The servers' ports."""
    name: str
    """The profile to write."""
    gpus: tuple[int, ...] | None = None
    """The GPU (slot) of each port (None: each server's ``CUDA_VISIBLE_DEVICES``, a port on a
    card an earlier port took numbered with the next free number)."""
    log_dir: str | None = None
    """The servers' log directory (None: each server's stdout file)."""
    log_pattern: str = "sglang_gpu{gpu}.log"
    """Their log file name in ``log_dir`` (``{gpu}``, ``{port}``)."""
    host: str = "127.0.0.1"
    """Where they listen."""


@dataclass(frozen=True, slots=True)
class Adoptee:
    """One server and what it becomes."""

    gpu: int
    """Its GPU (gpufleet's slot: its port, log, record and panel)."""
    server: RunningServer
    """The process, as read."""
    log_path: str
    """The log the console follows ("" when it logs to no file)."""
    device: int | None = None
    """The card it runs on when not ``gpu`` (its ``CUDA_VISIBLE_DEVICES``; None: ``gpu``)."""

    @property
    def card(self) -> int:
        """The physical GPU it runs on."""
        return self.gpu if self.device is None else self.device


@dataclass(frozen=True, slots=True)
class AdoptPlan:
    """What adopting would write; nothing is written yet."""

    request: AdoptRequest
    """The request."""
    adoptees: tuple[Adoptee, ...]
    """The servers, in the order of the ports."""
    profile: Profile
    """The profile written from their argv."""
    path: Path
    """Where the profile goes."""
    not_kept: tuple[str, ...]
    """What the profile cannot hold (it would not reproduce it), one line each."""
    found: tuple[str, ...]
    """What was read besides: the release and where from, what the driver lists."""

    def toml(self) -> str:
        """The profile file's text."""
        return tomli_w.dumps(profile_to_dict(self.profile))

    def summary(self) -> str:
        """One line: what is adopted as what."""
        ports = spans(a.server.port for a in self.adoptees)
        gpus = gpus_words(a.gpu for a in self.adoptees)
        return f"ports {ports} ({gpus}) as profile {self.profile.name}"

    def describe(self) -> list[str]:
        """Every server, where the profile goes, and each line of what it cannot hold."""
        lines = [
            f"{on_device(a.gpu, a.card)}: port {a.server.port}, {a.server.describe()}"
            for a in self.adoptees
        ]
        lines += self.found
        lines.append(f"profile {self.profile.name} -> {self.path}")
        lines += [f"not kept: {line}" for line in self.not_kept] or ["not kept: nothing"]
        return lines


def _check_name(name: str) -> Path:
    if not NAME.match(name) or name.endswith(SUFFIX):
        raise AdoptError(f"--name: {name[:80]!r} must be letters, digits, '.', '_' or '-' (1-200)")
    for root in profile_dirs():
        existing = root / f"{name}{SUFFIX}"
        if os.path.lexists(existing):
            raise AdoptError(f"--name: a profile {name!r} exists ({existing}); choose another name")
    return paths.user_profiles_dir() / f"{name}{SUFFIX}"


def _card_of(server: RunningServer, asked: int | None) -> int:
    """The card ``server`` runs on: its ``CUDA_VISIBLE_DEVICES`` when that is one GPU index,
    else the GPU ``--gpus`` gives it (a slot named beside another card's index runs there).

    Raises:
        AdoptError: neither says (one line naming the port).
    """
    cvd = (server.cuda_visible_devices or "").strip()
    if cvd.isascii() and cvd.isdigit():
        return int(cvd)
    if asked is not None:
        return asked
    why = "may not be read" if server.environ is None else f"is {cvd or 'unset'!r}"
    raise AdoptError(
        f"--gpus: port {server.port}'s CUDA_VISIBLE_DEVICES {why}, not one GPU index: give "
        "--gpus (one GPU per port)"
    )


def _slots(
    ports: Sequence[int], cards: Sequence[int], taken: set[int]
) -> tuple[list[int], list[str]]:
    """Each port's slot when ``--gpus`` is absent: its card's index, else (a card an earlier
    port runs on) the lowest number no port's card, no other slot and no GPU the fleet state
    keeps (``taken``) has; and a line for each port so numbered."""
    slots: list[int] = []
    lines: list[str] = []
    for port, card in zip(ports, cards, strict=True):
        if card not in slots:
            slots.append(card)
            continue
        slot = next(n for n in range(256 + len(cards)) if n not in {*cards, *slots, *taken})
        slots.append(slot)
        lines.append(
            f"GPU {slot}: port {port} shares device {card} with GPU {card}: numbered "
            "automatically (the next free number; --gpus chooses)"
        )
    return slots, lines


def _recorded(state: FleetState, port: int, gpu: int) -> None:
    """Refuse a port or GPU the fleet already runs a live server on."""
    for entry in state.values():
        record = entry.server
        if record is None or (record.port != port and record.gpu != gpu):
            continue
        try:
            alive = verify(record).alive
        except IdentityMismatch:
            alive = False
        if alive:
            where = f"port {port}" if record.port == port else f"GPU {gpu}"
            raise AdoptError(
                f"--ports: {where} already runs the fleet's server (GPU {record.gpu}, port "
                f"{record.port}, pid {record.pid}): nothing to adopt there"
            )


def _log_path(request: AdoptRequest, server: RunningServer, gpu: int) -> str:
    if request.log_dir is None:
        return server.log_path or ""
    path = Path(request.log_dir) / request.log_pattern.format(gpu=gpu, port=server.port)
    if not path.is_file():
        raise AdoptError(f"--log-dir: port {server.port}'s log {path} is not a file")
    return str(path)


def _profile_log(
    request: AdoptRequest, adoptees: Sequence[Adoptee], notes: list[str]
) -> tuple[str, str]:
    """The profile's (log_dir, log_file): the servers' own, so a relaunch logs where they did."""
    if request.log_dir is not None:
        return str(Path(request.log_dir).resolve()), request.log_pattern
    files = [Path(a.log_path) for a in adoptees if a.log_path]
    dirs = {str(f.parent) for f in files}
    if len(files) == len(adoptees) and len(dirs) == 1:
        named = [(a.gpu, a.server.port, Path(a.log_path).name) for a in adoptees]
        template = template_for(named)
        if template is not None:
            return dirs.pop(), template
    shown = ", ".join(a.log_path or f"port {a.server.port}: no file" for a in adoptees)
    notes.append(
        f"logs: the servers' log files ({shown}) follow no one pattern: relaunched servers log "
        f"to {DEFAULT_LOG[0]}/{DEFAULT_LOG[1]}"
    )
    return DEFAULT_LOG


def _release(request: AdoptRequest, first: RunningServer) -> tuple[str | None, str]:
    """The SGLang release the servers run, and where it was read."""
    served = served_release(request.host, [first.port])
    if served is not None:
        return served[1], f"release: SGLang {served[1]} (port {first.port}'s /server_info)"
    python = first.interpreter
    try:
        found = installed_release(python, dict(first.environ or {}))
    except ReleaseError as exc:
        return None, f"release: unknown ({exc})"
    return found, f"release: SGLang {found} (what {python} imports)"


def _driver(adoptees: Sequence[Adoptee], sim: bool) -> list[str]:
    """What the GPU driver (NVML, or the simulated one) lists on each adopted GPU."""
    try:
        gpu_pids: GpuPids = sim_gpu_pids() if sim else nvml_gpu_pids()
    except Exception:  # no driver here: the GPUs are taken as said
        return [
            "driver: NVML does not answer here; the GPUs are taken from --gpus or "
            "CUDA_VISIBLE_DEVICES"
        ]
    out = []
    for a in adoptees:
        mine = {a.server.pid, *a.server.children}
        try:
            listed = sorted(mine & set(gpu_pids(a.card)))
        except Exception:  # a GPU the driver does not have
            listed = []
        where = on_device(a.gpu, a.card)
        out.append(
            f"{where}: the driver lists pid {', '.join(map(str, listed))} of it"
            if listed
            else f"{where}: the driver lists none of pid {a.server.pid}'s processes (yet)"
        )
    return out


def plan_adoption(request: AdoptRequest) -> AdoptPlan:
    """What adopting ``request`` would write. Blocking; reads only.

    Raises:
        AdoptError: bad input, or a port that cannot be adopted (one line naming it).
        StateFileError: the fleet state is damaged.
    """
    ports = request.ports
    if not ports or len(set(ports)) != len(ports):
        raise AdoptError(f"--ports: {list(ports)}: give each port once")
    if request.gpus is not None:
        if len(request.gpus) != len(ports):
            raise AdoptError(
                f"--gpus: {len(request.gpus)} GPUs for {len(ports)} ports; give one GPU per port"
            )
        if len(set(request.gpus)) != len(request.gpus):
            raise AdoptError(f"--gpus: {list(request.gpus)}: give each GPU once")
    problem = log_file_problem(request.log_pattern, [0, 1], [1, 2])
    if request.log_dir is not None and problem is not None:
        raise AdoptError(f"--log-pattern={request.log_pattern!r}: {problem}")
    path = _check_name(request.name)
    state = read_fleet()
    servers: list[RunningServer] = []
    for port in ports:
        try:
            servers.append(running_server(port, request.host))
        except NotAdoptable as exc:
            raise AdoptError(str(exc)) from None
    asked = request.gpus or (None,) * len(servers)
    cards = [_card_of(server, gpu) for server, gpu in zip(servers, asked, strict=True)]
    numbered: list[str] = []
    if request.gpus is not None:
        slots = list(request.gpus)
    else:
        keeps = {g for g, entry in state.items() if entry.port not in (None, *ports)}
        slots, numbered = _slots(ports, cards, keeps)
    adoptees: list[Adoptee] = []
    for server, slot, card in zip(servers, slots, cards, strict=True):
        _recorded(state, server.port, slot)
        device = None if card == slot else card
        adoptees.append(Adoptee(slot, server, _log_path(request, server, slot), device))
    found: list[str] = list(numbered)
    release, said = _release(request, adoptees[0].server)
    found.append(said)
    launch = split_launch(adoptees[0].server.cmdline)
    found += _driver(adoptees, launch is not None and launch.kind == "sim")
    log = _profile_log(request, adoptees, found)
    commands = [
        ServerCommand(
            a.gpu,
            a.server.port,
            a.server.cmdline,
            a.server.environ or {},
            a.server.interpreter,
            a.card,
        )
        for a in adoptees
    ]
    when = time.strftime("%Y-%m-%d %H:%M")
    note = f"adopted {when} from the servers running on ports {spans(ports)}"
    try:
        drafted = draft_profile(
            request.name, commands, release=release, log=log, own_env=os.environ, note=note
        )
    except DraftError as exc:
        raise AdoptError(str(exc)) from None
    return AdoptPlan(request, tuple(adoptees), drafted.profile, path, drafted.lines, tuple(found))


def write_adoption(plan: AdoptPlan) -> None:
    """Write the profile and record every server as the fleet's. Blocking; call it under the
    operation lock. Nothing is signalled.

    Raises:
        AdoptError: a server is no longer the process that was read, or the name was taken
            meanwhile (nothing written).
        StateFileError: the fleet state could not be written (the profile file is taken back
            out).
    """
    from tui.control.takeover import still_running

    if _check_name(plan.request.name) != plan.path:
        raise AdoptError(f"--name: {plan.request.name!r} would be written elsewhere now")
    for adoptee in plan.adoptees:
        if not still_running(adoptee.server):
            raise AdoptError(
                f"--ports: port {adoptee.server.port}: pid {adoptee.server.pid} is no longer the "
                "process that was read (it exited or was replaced): nothing written"
            )
    _recorded_all(plan)
    doc = profile_to_dict(plan.profile)
    records = {
        a.gpu: adopted_record(
            a.server, a.gpu, plan.profile.host, a.log_path, plan.profile.name, a.card
        )
        for a in plan.adoptees
    }

    def change(state: FleetState) -> FleetState:
        for gpu, record in records.items():
            old = state.get(gpu, GpuState(gpu))
            previous = old.previous if old.current == doc else old.current
            state[gpu] = replace(
                old,
                port=record.port,
                host=record.host,
                server=record,
                current=doc,
                previous=previous,
                device=record.device,
            )
        return state

    save_profile(plan.profile, plan.path)
    try:
        update_fleet(change)
    except BaseException:
        plan.path.unlink(missing_ok=True)
        raise


def _recorded_all(plan: AdoptPlan) -> None:
    """Under the lock: no port or GPU of the plan became the fleet's meanwhile."""
    state = read_fleet()
    for adoptee in plan.adoptees:
        _recorded(state, adoptee.server.port, adoptee.gpu)
