"""The real fleet behind the retune engine's protocols (``tui.retune.ports``).

``FleetTarget`` stops a GPU's recorded server through the one stop-and-release
(``tui.control.stop_release``: cordon, drain through the main pid, escalate, wait for the GPU's
memory), launches the fitted profile's server with ``tui.control.launch`` (own session, identity
in the fleet state at once), follows its log with ``tui.logs`` and probes readiness with
``tui.servers``. Blocking calls (signals and their deadlines, NVML) run in threads so one GPU's
stop never holds up another's. A relaunched GPU's cordon is lifted when its new server is ready
or when the run gives up on it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from tui.control.adopt import ConfirmedServer, adopted_text, check_port_adopting
from tui.control.launch import LaunchError as ControlLaunchError
from tui.control.launch import ManagedProcess, launch
from tui.control.preflight import (
    PreflightError,
    check_flags,
    check_gpu_free,
    check_stale,
)
from tui.control.release import GpuPids
from tui.control.stop import StopMode
from tui.control.stop_release import (
    DrainProgress,
    StopTimeouts,
    in_stop_thread,
    stop_and_release,
)
from tui.gpu.snapshot import GpuSource
from tui.logs.parser import parse_line
from tui.logs.tailer import LogTailer
from tui.profiles import Profile, argv_for, env_for, flags_for, log_path_for
from tui.profiles.flag_check import launch_problems
from tui.retune.events import EffectiveValues, RequestedValues
from tui.retune.ports import GpuLaunchSpec, LaunchError, ServerSignal, Stopped
from tui.retune.signals import SignalAdapter
from tui.servers.keepalive import KeepAliveTransport
from tui.servers.probe import ProbeStatus, ServerProbe
from tui.state.cordons import address_of, uncordon
from tui.state.fleet_state import ProcessRecord, read_fleet

ProgressSink = Callable[[DrainProgress], None]
"""Receives stop progress on the event loop."""


def launch_spec(profile: Profile, gpu: int) -> GpuLaunchSpec:
    """The one place a (fitted) profile becomes the launch of one GPU.

    Raises:
        KeyError: the GPU is not in the profile.
        ValueError: a flag cannot be turned into argv.
    """
    flags = flags_for(profile, gpu)
    return GpuLaunchSpec(
        gpu=gpu,
        profile=profile.name,
        requested=RequestedValues(
            flags.mem_fraction_static,
            flags.max_mamba_cache_size,
            flags.mamba_full_memory_ratio,
            flags.max_running_requests,
        ),
        argv=tuple(argv_for(profile, gpu)),
        env=env_for(profile, gpu),
        log_path=str(log_path_for(profile, gpu)),
        port=profile.port_for(gpu),
        host=profile.host,
        device=profile.device_for(gpu),
    )


class RealServer:
    """A server launched through ``tui.control``, followed through its log and HTTP."""

    def __init__(self, process: ManagedProcess, client: httpx.AsyncClient, target: FleetTarget):
        self.process = process
        self.pid = process.record.pid
        self.log_path = process.record.log_path
        self._tailer = LogTailer(self.log_path)
        self._adapter = SignalAdapter()
        record = process.record
        self._probe = ServerProbe(
            client, record.port, record.host, timeout=2.0, direct=target.direct
        )
        self._target = target

    def exit_code(self) -> int | None:
        """Exit status once the main process exited (reaps it), else None."""
        return self.process.poll()

    def read_signals(self) -> Sequence[ServerSignal]:
        """New facts from the log since the last call."""
        events = [e for e in (parse_line(t) for t in self._tailer.read_new()) if e is not None]
        return self._adapter.translate(events)

    async def ready(self) -> bool:
        """True when the server says it can serve (``ServerProbe.readiness``)."""
        ready = (await self._probe.readiness()).status == ProbeStatus.READY
        if ready:
            self._target.release_cordon(self.process.record.gpu)
        return ready

    async def effective(self) -> EffectiveValues:
        """Effective values from /server_info."""
        info = await self._probe.server_info()
        if info is None:
            return EffectiveValues()
        return EffectiveValues(
            max_running_requests=info.max_running_effective,
            mamba_slots=info.max_mamba_cache_size,
            kv_tokens=info.max_total_num_tokens,
        )

    async def stop(self) -> Stopped:
        """Stop what this run launched and wait for its GPU memory (it failed to come up)."""
        self._tailer.close()
        stopped = await self._target.stop_record(
            self.process.record.gpu, self.process.record, mode="terminate"
        )
        self.process.popen.poll()  # reap, so no zombie outlives the apply
        self._target.release_cordon(self.process.record.gpu)
        return stopped


class FleetTarget:
    """The fleet operations of one engine run of ``profile`` (already fitted to the fleet).

    Args:
        profile: The profile to launch.
        gpu_pids: Who holds memory on a GPU now (NVML or the simulated driver).
        client: Shared HTTP client (readiness and /server_info).
        gpu_source: For the free memory in the verify report (optional).
        timeouts: Stop deadlines.
        mode: How the old servers are stopped (default: drain).
        on_progress: Receives each stop's progress, on the event loop.
        direct: ``client``'s keep-alive transport, which the readiness probes use straight
            (``ServerProbe``'s ``direct``), or None.
        confirmed: Per GPU, a process holding its port that the operator confirmed stopping
            although it is not verified as the fleet's (the console's ``unknown`` server).
        refusals: Why the run must not begin although the profile is valid (ports held by
            servers gpufleet neither launched nor adopted: ``tui.ops.runner.strangers``);
            ``validate`` returns them, so nothing is stopped.
    """

    def __init__(
        self,
        profile: Profile,
        gpu_pids: GpuPids,
        client: httpx.AsyncClient,
        gpu_source: GpuSource | None = None,
        timeouts: StopTimeouts | None = None,
        mode: StopMode = "drain",
        on_progress: ProgressSink | None = None,
        direct: KeepAliveTransport | None = None,
        confirmed: dict[int, ConfirmedServer] | None = None,
        refusals: Sequence[str] = (),
    ) -> None:
        self.profile = profile
        self._refusals = tuple(refusals)
        self._confirmed = confirmed or {}
        self.direct = direct
        self._gpu_pids = gpu_pids
        self._gpu_source = gpu_source
        self._timeouts = timeouts or StopTimeouts()
        self._mode = mode
        self._on_progress = on_progress
        self.client = client
        self._cordoned: dict[int, str] = {}

    def validate(self, gpus: Sequence[int]) -> list[str]:
        """GPUs outside the profile, argv that cannot be built, or that SGLang would refuse;
        then the run's ``refusals`` (ports held by servers that are not the fleet's)."""
        errors = []
        for gpu in gpus:
            if gpu not in self.profile.gpus:
                errors.append(
                    f"gpus: GPU {gpu} is not in profile {self.profile.name!r} "
                    f"(allowed: {list(self.profile.gpus)})"
                )
                continue
            try:
                argv_for(self.profile, gpu)
            except (KeyError, ValueError, TypeError) as exc:
                errors.append(f"gpu.{gpu}: cannot build argv: {exc}")
                continue
            # Before anything is stopped: an argv SGLang refuses would leave the GPU empty.
            errors += [str(p) for p in launch_problems(self.profile, [gpu])]
        return list(dict.fromkeys([*errors, *self._refusals]))

    def spec_for(self, gpu: int) -> GpuLaunchSpec:
        """The launch of one GPU, per-GPU override applied."""
        return launch_spec(self.profile, gpu)

    def release_cordon(self, gpu: int) -> None:
        """Open the GPU's address to new work again (its server is ready, or given up on)."""
        address = self._cordoned.pop(gpu, None)
        if address is not None:
            uncordon([address])

    async def stop_record(
        self,
        gpu: int,
        record: ProcessRecord | None,
        mode: StopMode | None = None,
        on_stage: Callable[[str], None] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        drain_s: float | None = None,
    ) -> Stopped:
        """The one stop-and-release, in a thread; progress forwarded on the event loop.

        ``port`` and ``host``: the GPU's, when nothing is recorded (its port is still checked).
        ``drain_s``: the ``[stop] drain_timeout_s`` of the profile its server runs (the
        operator's ``--drain-timeout`` wins), else this run's profile's.
        """
        loop = asyncio.get_running_loop()

        def progress(p: DrainProgress) -> None:
            if on_stage is not None:
                loop.call_soon_threadsafe(on_stage, p.stage)
            if self._on_progress is not None:
                loop.call_soon_threadsafe(self._on_progress, p)

        if record is not None:
            port, host = record.port, record.host
        if port is not None:
            self._cordoned[gpu] = address_of(host, port)
        result = await in_stop_thread(
            functools.partial(
                stop_and_release,
                gpu,
                record,
                self._gpu_pids,
                mode=mode or self._mode,
                timeouts=self._timeouts.for_profile(
                    drain_s if drain_s is not None else self.profile.stop.drain_timeout_s
                ),
                keep_cordon=True,
                on_progress=progress,
                port=port,
                host=host,
                confirmed=self._confirmed.get(gpu),
                device=self.device_of(gpu, record),
            )
        )
        return Stopped(
            result.ok,
            result.message,
            refused=result.status == "refused",
            drain_timed_out=result.drain_timed_out,
            lost_in_flight=result.lost_in_flight,
            drain_note=result.drain_note,
            client_still_sending=result.client_still_sending,
            arrived_during_drain=result.arrived_during_drain,
        )

    def device_of(self, gpu: int, record: ProcessRecord | None) -> int:
        """The physical GPU slot ``gpu``'s server holds memory on: its record's, else the
        profile's for the slot, else the slot's index."""
        if record is not None:
            return record.device_index
        return self.profile.device_for(gpu) if gpu in self.profile.gpus else gpu

    async def stop_current(self, gpu: int, on_stage: Callable[[str], None]) -> Stopped:
        """Stop the fleet's recorded server on this GPU (identity-checked) and wait for its
        GPU memory; the GPU stays cordoned until its new server is ready."""
        entry = (await asyncio.to_thread(read_fleet)).get(gpu)
        record = entry.server if entry is not None else None
        port, host = (entry.port, entry.host) if entry is not None else (None, "127.0.0.1")
        if port is None and gpu in self.profile.gpus:
            # Nothing recorded: the port this launch takes is checked (a server the operator
            # confirmed is stopped there; any other holder refuses the stop, named).
            port, host = self.profile.port_for(gpu), self.profile.host
        drain_s = entry.drain_timeout_s if entry is not None else None
        stopped = await self.stop_record(
            gpu, record, on_stage=on_stage, port=port, host=host, drain_s=drain_s
        )
        if not stopped.ok:
            self.release_cordon(gpu)
        return stopped

    async def launch(self, spec: GpuLaunchSpec) -> RealServer:
        """Preflight (stale server, port, GPU memory) and launch; errors become LaunchError."""
        try:
            process = await asyncio.to_thread(self._launch, spec)
        except (PreflightError, ControlLaunchError) as exc:
            self.release_cordon(spec.gpu)
            raise LaunchError(str(exc)) from exc
        return RealServer(process, self.client, self)

    def _launch(self, spec: GpuLaunchSpec) -> ManagedProcess:
        check_flags(self.profile, spec.gpu)
        check_stale(spec.gpu, spec.port)
        adopted = check_port_adopting(spec.gpu, spec.port, spec.host)
        if adopted is not None:  # tracked again; this step did not launch what it was asked
            raise PreflightError(adopted_text(adopted))
        check_gpu_free(spec.gpu, self._gpu_pids, device=spec.device_index)
        return launch(
            spec.argv,
            spec.env,
            Path(spec.log_path),
            gpu=spec.gpu,
            port=spec.port,
            profile=spec.profile,
            host=spec.host,
            device=spec.device_index,
        )

    def free_memory(self, gpu: int) -> int | None:
        """Free bytes on the GPU now, from the GPU source."""
        if self._gpu_source is None:
            return None
        try:
            device = self.profile.device_for(gpu) if gpu in self.profile.gpus else gpu
            for snap in self._gpu_source.sample():
                if snap.index == device:
                    return snap.memory_free
        except Exception:  # a GPU reading is extra detail in the report, never a failure
            return None
        return None
