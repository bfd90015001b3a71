"""The real fleet behind the engine's protocols: profiles, process control, probes, the log parser.

``ProfileTarget`` launches a profile's servers with ``tui.control`` (own session, identity in the
fleet record), follows each log with ``tui.logs``, and probes readiness with ``tui.servers``
(``/ready``: SGLang sets Up once its warmup generation succeeded; never /model_info). Blocking
calls (signals, waits, NVML) run in threads so one GPU's stop never holds up another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

import httpx

from tui.control import launch_gpu
from tui.control.identity import IdentityMismatch
from tui.control.launch import LaunchError as ControlLaunchError
from tui.control.launch import ManagedProcess
from tui.control.preflight import PreflightError
from tui.control.records import read_records, remove_record
from tui.control.release import GpuPids, nvml_gpu_pids, sim_gpu_pids, wait_gpu_released
from tui.control.stop import stop
from tui.gpu.snapshot import GpuSource
from tui.gpu.source import open_gpu_source
from tui.logs.parser import parse_line
from tui.logs.tailer import LogTailer
from tui.profiles import Profile, argv_for, flags_for, log_path_for
from tui.retune.counters import MetricsCounterProbe
from tui.retune.events import EffectiveValues, RequestedValues
from tui.retune.ports import GpuLaunchSpec, LaunchError, ServerSignal
from tui.retune.signals import SignalAdapter
from tui.servers.probe import ProbeStatus, ServerProbe


class RealServer:
    """A server launched through ``tui.control``, followed through its log and HTTP."""

    def __init__(
        self, process: ManagedProcess, client: httpx.AsyncClient, term_timeout: float
    ) -> None:
        self.process = process
        self.pid = process.record.pid
        self.log_path = process.record.log_path
        self._tailer = LogTailer(self.log_path)
        self._adapter = SignalAdapter()
        self._probe = ServerProbe(client, process.record.port, process.record.host, timeout=2.0)
        self._term_timeout = term_timeout

    def exit_code(self) -> int | None:
        """Exit status once the main process exited (reaps it), else None."""
        return self.process.poll()

    def read_signals(self) -> Sequence[ServerSignal]:
        """New facts from the log since the last call."""
        events = [e for e in (parse_line(t) for t in self._tailer.read_new()) if e is not None]
        return self._adapter.translate(events)

    async def ready(self) -> bool:
        """True when /ready (or /health on servers without it) answers 200."""
        return (await self._probe.readiness()).status == ProbeStatus.READY

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

    async def stop(self) -> tuple[int, ...]:
        """Stop the process group; returns every pid it had (to wait for the GPU's release)."""
        try:
            result = await asyncio.to_thread(stop, self.process.record, self._term_timeout)
        except IdentityMismatch:
            return (self.pid,)
        finally:
            self._tailer.close()
        with contextlib.suppress(Exception):
            self.process.popen.wait(timeout=0)  # reap, so no zombie outlives the apply
        return result.pids or (self.pid,)


class ProfileTarget:
    """The fleet operations of one apply of ``profile``.

    Args:
        profile: The profile to launch (validated by loading).
        gpu_pids: Who holds memory on a GPU now (``sim_gpu_pids()`` or ``nvml_gpu_pids()``).
        gpu_source: For the free memory in the verify report (optional).
        term_timeout: Seconds between SIGTERM and SIGKILL when stopping.
    """

    def __init__(
        self,
        profile: Profile,
        gpu_pids: GpuPids,
        gpu_source: GpuSource | None = None,
        term_timeout: float = 30.0,
    ) -> None:
        self.profile = profile
        self._gpu_pids = gpu_pids
        self._gpu_source = gpu_source
        self._term_timeout = term_timeout
        self.client = httpx.AsyncClient()

    async def aclose(self) -> None:
        """Close the shared HTTP client."""
        await self.client.aclose()

    def validate(self, gpus: Sequence[int]) -> list[str]:
        """GPUs outside the profile, or argv that cannot be built, each named."""
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
        return errors

    def spec_for(self, gpu: int) -> GpuLaunchSpec:
        """The launch of one GPU, per-GPU override applied."""
        flags = flags_for(self.profile, gpu)
        return GpuLaunchSpec(
            gpu=gpu,
            profile=self.profile.name,
            requested=RequestedValues(
                flags.mem_fraction_static,
                flags.max_mamba_cache_size,
                flags.mamba_full_memory_ratio,
                flags.max_running_requests,
            ),
            argv=tuple(argv_for(self.profile, gpu)),
            env={"CUDA_VISIBLE_DEVICES": str(gpu), **dict(self.profile.env)},
            log_path=str(log_path_for(self.profile, gpu)),
            port=self.profile.port_for(gpu),
        )

    async def stop_current(self, gpu: int) -> tuple[int, ...]:
        """Stop the fleet's recorded server on this GPU (identity-checked); its pids."""
        record = read_records().get(gpu)
        if record is None:
            return ()
        try:
            result = await asyncio.to_thread(stop, record, self._term_timeout)
        except IdentityMismatch:
            # The pid belongs to someone else now: ours is gone; never signal a stranger.
            remove_record(gpu, record.pid)
            return ()
        return result.pids

    async def wait_released(self, gpu: int, pids: Sequence[int], timeout_s: float) -> bool:
        """Wait until none of ``pids`` holds memory on the GPU (per the GPU source)."""
        if not pids:
            return True
        deadline = time.monotonic() + timeout_s
        holding = await asyncio.to_thread(
            wait_gpu_released, gpu, tuple(pids), self._gpu_pids, deadline
        )
        return not holding

    async def launch(self, spec: GpuLaunchSpec) -> RealServer:
        """Preflight (stale server, port, GPU memory) and launch; errors become LaunchError."""
        try:
            process = await asyncio.to_thread(
                launch_gpu, self.profile, spec.gpu, settle_s=0.0, gpu_pids=self._gpu_pids
            )
        except (PreflightError, ControlLaunchError) as exc:
            raise LaunchError(str(exc)) from exc
        return RealServer(process, self.client, self._term_timeout)

    def free_memory(self, gpu: int) -> int | None:
        """Free bytes on the GPU now, from the GPU source."""
        if self._gpu_source is None:
            return None
        try:
            for snap in self._gpu_source.sample():
                if snap.index == gpu:
                    return snap.memory_free
        except Exception:  # a GPU reading is extra detail in the report, never a failure
            return None
        return None


def _no_gpu_pids(gpu: int) -> set[int]:
    return set()


def open_target(
    profile: Profile, gpus: Sequence[int], term_timeout: float = 30.0
) -> tuple[ProfileTarget, MetricsCounterProbe]:
    """The real target and throughput probe for ``profile`` (simulated or NVML GPUs).

    Args:
        profile: The profile to apply.
        gpus: GPUs targeted (their ports feed the throughput probe).
        term_timeout: SIGTERM -> SIGKILL seconds.

    Returns:
        (target, probe); call ``await target.aclose()`` when done.
    """
    gpu_pids: GpuPids
    # A simulator with --gpu-backing cuda holds real device memory: NVML is the truth for it.
    real_gpu = dict(profile.server.extra_flags).get("gpu_backing") == "cuda"
    if profile.engine.kind == "sim" and not real_gpu:
        gpu_pids, prefer = sim_gpu_pids(), "sim"
    else:
        prefer = "nvml"
        try:
            gpu_pids = nvml_gpu_pids()
        except Exception:  # no driver: nothing to wait for, the port check still guards
            gpu_pids = _no_gpu_pids
    source: GpuSource | None
    try:
        source = open_gpu_source(prefer)
    except Exception:
        source = None
    target = ProfileTarget(profile, gpu_pids, source, term_timeout)
    ports = {g: profile.port_for(g) for g in gpus if g in profile.gpus}
    return target, MetricsCounterProbe(ports, profile.host, target.client)
