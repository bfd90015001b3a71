"""The console's operations on the real fleet (core, no Textual).

Public API::

    FleetOperator(profile, *, pipeline=None, marker=None, apply_options=None, timeouts=None,
                  gpu_pids=None, stop_pipeline_with_fleet=False)      # tui.ui.sources.FleetActions
        supports(intent) -> bool
        async kill(gpus) / relaunch(gpus) / stop_fleet() / start_pipeline() / stop_pipeline()
        async apply_profile(name, gpus, on_event=None) -> ApplyResult
        async rollback(on_event=None) -> list[ApplyResult]
        async preflight(profile, gpus) -> list[Preflight]
        profile_names() -> list[str]; current_profile() -> str | None
        load_profile(name) -> Profile; save_profile(profile) -> Path
    PipelineConfig(prompts, out_dir, status_path, log_path, servers, extra_args=())
    start_pipeline(config) -> pid; stop_pipelines(status_path) -> pids; find_pipelines(status_path)
    run_apply(profile, gpus, options, on_event=None) -> ApplyResult
    FleetOperator.canary(profile_name, gpu, on_event=None, on_look=None) -> CanaryResult
    FleetOperator.rollout(profile_name, batch=1, on_event=None) -> RolloutResult
    CanaryLook (one look of a canary, as the console shows it); LookSink
"""

from tui.operator.apply import EventSink, run_apply
from tui.operator.fleet_operator import (
    FleetOperator,
    OperationError,
    OperatorTimeouts,
    StopMarker,
)
from tui.operator.pipeline_control import (
    PipelineConfig,
    find_pipelines,
    start_pipeline,
    stop_pipelines,
)
from tui.operator.rollout_ops import CanaryLook, LookSink, run_canary, run_rollout

__all__ = [
    "CanaryLook",
    "EventSink",
    "FleetOperator",
    "LookSink",
    "OperationError",
    "OperatorTimeouts",
    "PipelineConfig",
    "StopMarker",
    "find_pipelines",
    "run_apply",
    "run_canary",
    "run_rollout",
    "start_pipeline",
    "stop_pipelines",
]
