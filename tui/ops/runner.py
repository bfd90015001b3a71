"""One engine run on the real fleet: the single sequence behind apply, relaunch, rollback,
canary and rollout.

``EngineRunner.run(profile, gpus)``: the profile (already fitted to the fleet) goes through the
retune engine (per GPU: cordon, drain, release, launch, startup phases, ready, verify report;
optionally the before/after throughput windows), its events are forwarded typed, and the outcome
is recorded in the fleet state (ready GPUs run the profile, failed ones run nothing). Nothing
here takes the operation lock or writes the journal: the operations service does, once per
operation, around however many runs the operation needs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace

import httpx

from tui.control.adopt import ConfirmedServer
from tui.control.release import GpuPids, nvml_gpu_pids, sim_gpu_pids
from tui.control.stop import StopMode
from tui.control.stop_release import DrainProgress, StopTimeouts
from tui.control.takeover import stranger_on_port
from tui.fleet.log_paths import server_logs
from tui.gpu.snapshot import GpuSource
from tui.gpu.source import NoGpuSource, open_gpu_source
from tui.ops.events import EventSink
from tui.ops.target import FleetTarget
from tui.profiles import Profile, diff
from tui.retune.counters import MetricsCounterProbe
from tui.retune.engine import RetuneEngine
from tui.retune.events import ApplyResult
from tui.retune.options import ApplyOptions
from tui.retune.preflight import calibration_from_log, crowded
from tui.rollout.cost import ApplyCostWatch, RetuneCost
from tui.rollout.joules import JoulesReader, metered_devices
from tui.rollout.sampling import MetricsProbe, Sampler
from tui.servers.keepalive import lean_transport
from tui.state.fleet_state import FleetState, profile_of, read_fleet, record_outcome
from tui.words import spans


def _no_gpu_pids(gpu: int) -> set[int]:
    return set()


def gpu_pids_for(profile: Profile) -> GpuPids:
    """Who holds memory on a GPU for this profile's engine: the simulated driver, else NVML
    (a simulator with ``--gpu-backing cuda`` holds real device memory: NVML is its truth)."""
    real_gpu = dict(profile.server.extra_flags).get("gpu_backing") == "cuda"
    if profile.engine.kind == "sim" and not real_gpu:
        return sim_gpu_pids()
    try:
        return nvml_gpu_pids()
    except Exception:  # no driver: nothing to wait for; the port and identity checks still guard
        return _no_gpu_pids


def _gpu_source(profile: Profile) -> GpuSource | None:
    real_gpu = dict(profile.server.extra_flags).get("gpu_backing") == "cuda"
    try:
        return open_gpu_source("sim" if profile.engine.kind == "sim" and not real_gpu else "nvml")
    except Exception:  # the free memory in a report is extra detail, never a failure
        return None


def previous_names(state: FleetState, gpus: Sequence[int]) -> dict[int, str | None]:
    """The profile each GPU runs now (its recorded profile, else its server's), by name."""
    out: dict[int, str | None] = {}
    for gpu in gpus:
        entry = state.get(gpu)
        if entry is not None and entry.current_name:
            out[gpu] = entry.current_name
        elif entry is not None and entry.server is not None:
            out[gpu] = entry.server.profile or None
        else:
            out[gpu] = None
    return out


def diff_lines(state: FleetState, profile: Profile, gpus: Sequence[int]) -> tuple[str, ...]:
    """The profile's diff from what the GPUs run now, when they all run the same document."""
    docs = [state[g].current for g in gpus if g in state and state[g].current]
    if not docs or any(doc != docs[0] for doc in docs):
        return ()
    old = docs[0]
    assert old is not None
    with contextlib.suppress(Exception):  # a stored profile that no longer validates: no diff
        return tuple(str(change) for change in diff(profile_of(old), profile))
    return ()


def strangers(
    plan: Sequence[tuple[int, Profile]],
    state: FleetState,
    confirmed: Mapping[int, ConfirmedServer],
) -> list[str]:
    """Why a run (or a walk) must not begin: ports of the plan's GPUs held by processes
    gpufleet neither launched nor adopted (``tui.control.takeover.stranger_on_port``), each
    named, and how to take the SGLang servers among them over; empty when there are none.
    Blocking (reads the process table).

    Why before anything: an apply on a fleet started by the operator's script used to stop
    nothing (each stop refused), fail every launch on its held port, print '0 of 4 GPUs ready'
    and offer a rollback, while all four servers were untouched and serving.

    Args:
        plan: Each GPU with the (fitted) profile it is to run.
        state: The fleet state.
        confirmed: Holders the operator confirmed stopping, by GPU.
    """
    lines, held = [], []
    for gpu, profile in plan:
        if gpu not in profile.gpus:
            continue  # the engine's validation names it
        entry = state.get(gpu)
        record = entry.server if entry is not None else None
        port = profile.port_for(gpu)
        found = stranger_on_port(gpu, port, profile.host, record, confirmed.get(gpu))
        if found is not None:
            lines.append(found[0])
            if found[1]:  # an SGLang server: gpufleet adopt takes it over
                held.append((gpu, port))
    if held:
        held.sort(key=lambda pair: pair[1])
        ports, on = adopt_lists(held)
        lines.append(
            f"take them over first, signalling nothing: gpufleet adopt --ports {ports} --gpus "
            f"{on} --name NAME (see docs/operating-a-running-fleet.md); or stop them yourself"
        )
    return lines


def _crowded(profile: Profile, gpus: Sequence[int], state: FleetState) -> list[str]:
    """``tui.retune.preflight.crowded``, each GPU calibrated on its running server's log."""
    shared = [g for g in gpus if g in profile.gpus and profile.neighbours_of(g)]
    if not shared:
        return []
    logs = server_logs(profile, shared, state)
    return crowded(
        profile, shared, lambda gpu: calibration_from_log(logs[gpu]) if gpu in logs else None
    )


def adopt_lists(pairs: Sequence[tuple[int, int]]) -> tuple[str, str]:
    """(GPU, port) pairs, in port order, as ``gpufleet adopt``'s ``--ports`` and ``--gpus``:
    ranges (``30000-30006``, ``0-6``) when both ascend together, else the lists in that order
    (each port must keep its own GPU)."""
    gpus = [gpu for gpu, _ in pairs]
    ports = [port for _, port in pairs]
    if gpus == sorted(gpus):
        return spans(ports), spans(gpus)
    return ",".join(map(str, ports)), ",".join(map(str, gpus))


class EngineRunner:
    """Runs the retune engine on the real fleet.

    Args:
        options: The engine's timeouts and measurement windows.
        stop: The stop's deadlines.
        gpu_pids: Who holds memory on a GPU (default: from each profile's engine).
    """

    def __init__(
        self,
        options: ApplyOptions,
        stop: StopTimeouts,
        gpu_pids: GpuPids | None = None,
    ) -> None:
        self.options = options
        self.stop = stop
        self._gpu_pids = gpu_pids

    async def run(
        self,
        profile: Profile,
        gpus: Sequence[int],
        *,
        measure: bool = False,
        mode: StopMode = "drain",
        on_event: EventSink | None = None,
        fleet_gpus: Sequence[int] = (),
        confirmed: Mapping[int, ConfirmedServer] | None = None,
    ) -> tuple[ApplyResult, RetuneCost | None]:
        """Run the engine for ``profile`` on ``gpus`` and record the outcome.

        Args:
            profile: The fitted profile.
            gpus: GPUs to (re)launch.
            measure: Take the before/after throughput windows (only when something runs) and
                measure the throughput the run cost the fleet.
            mode: How the old servers are stopped.
            on_event: Receives every event.
            fleet_gpus: Every GPU of the fleet (the cost is the fleet's); default ``gpus``.
            confirmed: Per GPU, a process holding its port that the operator confirmed
                stopping although it is not verified as the fleet's.

        Returns:
            The engine's result, and the cost when measured.
        """
        state = read_fleet()
        targets = tuple(sorted(set(gpus)))
        plan = [(gpu, profile) for gpu in targets]
        held = await asyncio.to_thread(strangers, plan, state, confirmed or {})
        held += await asyncio.to_thread(_crowded, profile, targets, state)
        measuring = measure and any(state.get(g) and state[g].server for g in targets)
        options = replace(self.options, measure=measuring)
        gpu_pids = self._gpu_pids or gpu_pids_for(profile)

        def progress(p: DrainProgress) -> None:
            if on_event is not None:
                on_event(p)

        # The servers speak plain HTTP: the keep-alive transport costs a fraction of httpx's own per
        # probe (a starting GPU is probed many times) and, unlike httpx's default transport,
        # loads no CA bundle at start (None with GPUFLEET_PLAIN=keepalive: httpx's own).
        direct = lean_transport()
        async with httpx.AsyncClient(transport=direct) as client:
            target = FleetTarget(
                profile,
                gpu_pids,
                client,
                _gpu_source(profile),
                self.stop,
                mode,
                progress,
                direct=direct,
                confirmed=dict(confirmed or {}),
                refusals=held,
            )
            ports = {g: profile.port_for(g) for g in targets if g in profile.gpus}
            probe = MetricsCounterProbe(ports, profile.host, client) if measuring else None
            engine = RetuneEngine(
                target,
                targets,
                options,
                probe=probe,
                previous_profiles=previous_names(state, targets),
                diff=diff_lines(state, profile, targets),
            )
            if on_event is not None:
                engine.subscribe(on_event)
            cost: RetuneCost | None = None
            if measuring:
                fleet = sorted(set(fleet_gpus or targets) | set(targets))
                sampler = self.sampler(profile, fleet, options.interval_s, client)
                watch = ApplyCostWatch(sampler, targets, options.warmup_s + options.window_s)
                engine.subscribe(watch.on_event)
                sampler.start()
                try:
                    result = await engine.run()
                finally:
                    await sampler.stop()
                cost = watch.cost()
            else:
                result = await engine.run()
        if not result.refused:
            record_outcome(
                profile,
                [r.gpu for r in result.reports if r.ok],
                [r.gpu for r in result.reports if not r.ok],
            )
        return result, cost

    @staticmethod
    def sampler(
        profile: Profile,
        gpus: Sequence[int],
        interval_s: float,
        client: httpx.AsyncClient,
        observe_every_s: float | None = None,
    ) -> Sampler:
        """A counters sampler over ``gpus``, each on its recorded port (else the profile's);
        with ``observe_every_s``, the latency histograms and each GPU's joules too, that often
        (a verdict's figures beside throughput)."""
        state = read_fleet()
        ports = {}
        for gpu in gpus:
            known = state.get(gpu)
            if known is not None and known.port is not None:
                ports[gpu] = known.port
            elif gpu in profile.gpus:
                ports[gpu] = profile.port_for(gpu)
        probe = MetricsProbe(ports, profile.host, client)
        if observe_every_s is None:
            return Sampler(probe, sorted(ports), interval_s)
        source = lambda: _gpu_source(profile) or NoGpuSource("no GPU source")  # noqa: E731
        energy = JoulesReader(source, metered_devices(profile, sorted(ports)))
        return Sampler(probe, sorted(ports), interval_s, latency=probe, energy=energy,
                       observe_every_s=observe_every_s)  # fmt: skip
