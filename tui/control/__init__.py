"""Process control for SGLang servers (core, no Textual): launch, identity, stop, GPU release.

    launch(argv, env, log_path, *, gpu, port, profile, host) -> ManagedProcess
        own session (pgid == pid), stdout+stderr to log_path (previous log rotated), a launch id
        in its environment, identity (start ticks, boot id, launch id) written to the fleet
        state at once.
    verify(record)                                   is the pid still the fleet's server? (start
                                                     ticks, boot id, launch id; no wall clock)
    check_started(process, settle_s)                 raises LaunchError (exit code + log tail)
    stop(record, term_timeout, kill_timeout, mode=)  drain through the main pid, then the group
                                                     (only the verified leader's own group)
    stop_and_release(gpu, record, gpu_pids, ...)     THE way a server is taken down: cordon,
                                                     stop, wait for the GPU's memory and port;
                                                     done / refused / failed
    adopt: port_holder_adopting, check_port_adopting who holds a GPU's port; the fleet's own
                                                     server without a record is adopted
    wait_gpu_released(gpu, pids, gpu_source, deadline)
    preflight: check_port, check_stale, check_gpu_free (each raises PreflightError naming who)

Who runs on which GPU lives in ``tui.state.fleet_state``; the operations (apply, relaunch, kill,
canary, rollout) live in ``tui.ops`` and are the only callers of ``stop_and_release``.
"""

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
from tui.control.stop import StopMode, StopResult, stop
from tui.control.stop_release import StopReleased, StopTimeouts, stop_and_release

__all__ = [
    "GpuPids",
    "IdentityMismatch",
    "LaunchError",
    "ManagedProcess",
    "PortHolder",
    "PreflightError",
    "StopMode",
    "StopReleased",
    "StopResult",
    "StopTimeouts",
    "check_gpu_free",
    "check_port",
    "check_stale",
    "check_started",
    "group_members",
    "launch",
    "nvml_gpu_pids",
    "port_holder",
    "rotate_log",
    "sim_gpu_pids",
    "stop",
    "stop_and_release",
    "tail_lines",
    "verify",
    "wait_gpu_released",
]
