"""Process control for SGLang servers (core, no Textual): launch, stop, wait for the GPU, check.

The whole API the retune loop, ``gpufleet sim-fleet`` and the demo build on::

    # one server
    launch(argv, env, log_path, cwd=None, *, gpu, port, profile="", host=...) -> ManagedProcess
        own session (pgid == pid), stdout+stderr to log_path (previous log rotated to .1 .. .5),
        identity (pid, pgid, create_time, cmdline, gpu, port) written to the fleet record at once.
    check_started(process, settle_s) -> None        raises LaunchError(exit code + log tail)
    stop(record, term_timeout=30, kill_timeout=10) -> StopResult
        verify identity (alive + create_time + cmdline) or raise IdentityMismatch (nothing sent);
        SIGTERM to the group, wait on every member with a deadline, SIGKILL the group, report.
        StopResult.pids: every member seen -> pass to wait_gpu_released.
    wait_gpu_released(gpu, pids, gpu_source, deadline) -> set[int]   (empty = released)
        gpu_source: sim_gpu_pids() (simulated driver records) or nvml_gpu_pids().
    preflight: check_port(port, host, gpu), check_stale(gpu, port), check_gpu_free(gpu, gpu_pids)
        each raises PreflightError naming who holds what; port_holder(port) -> PortHolder | None.

    # a profile's fleet (every GPU in parallel, each independent)
    launch_profile(profile, gpus=None, settle_s=1.0, preflight=True, gpu_pids=None)
        -> list[GpuOutcome]
    launch_gpu(profile, gpu, ...) -> ManagedProcess   (raises PreflightError / LaunchError)
    stop_fleet(gpus=None, term_timeout=30, kill_timeout=10, gpu_pids=None, release_timeout=60)
        -> list[GpuOutcome]
    fleet_status(gpus=None) -> list[ServerStatus]

    # the record (tui.paths.fleet_file(), JSON, fcntl-locked writers, atomic replace)
    read_records() -> dict[int, ProcessRecord]; put_record(record); remove_record(gpu, pid=None)

A retune step on one GPU is therefore: ``stop`` -> ``wait_gpu_released`` -> ``launch_gpu`` ->
poll readiness (``/health_generate``) while watching ``process.poll()`` and the log.
"""

from tui.control.fleet import (
    GpuOutcome,
    ServerStatus,
    fleet_status,
    launch_gpu,
    launch_profile,
    stop_fleet,
)
from tui.control.identity import IdentityMismatch, group_members, verify
from tui.control.launch import (
    LaunchError,
    ManagedProcess,
    check_started,
    launch,
    rotate_log,
    tail_lines,
)
from tui.control.preflight import (
    PortHolder,
    PreflightError,
    check_gpu_free,
    check_port,
    check_stale,
    port_holder,
)
from tui.control.release import GpuPids, nvml_gpu_pids, sim_gpu_pids, wait_gpu_released
from tui.control.stop import StopResult, stop
from tui.state.fleet_state import ProcessRecord, put_record, read_records, remove_record

__all__ = [
    "GpuOutcome",
    "GpuPids",
    "IdentityMismatch",
    "LaunchError",
    "ManagedProcess",
    "PortHolder",
    "PreflightError",
    "ProcessRecord",
    "ServerStatus",
    "StopResult",
    "check_gpu_free",
    "check_port",
    "check_stale",
    "check_started",
    "fleet_status",
    "group_members",
    "launch",
    "launch_gpu",
    "launch_profile",
    "nvml_gpu_pids",
    "port_holder",
    "put_record",
    "read_records",
    "remove_record",
    "rotate_log",
    "sim_gpu_pids",
    "stop",
    "stop_fleet",
    "tail_lines",
    "verify",
    "wait_gpu_released",
]
