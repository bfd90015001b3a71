"""``FleetOps``: the one door through which anything changes the fleet.

The console, ``gpufleet apply/canary/rollout/sim-fleet``, the demo and (later) the autotuner all
call this service; nothing else stops, launches or retunes a server. Every operation:

- takes the **operation lock** (``tui.ops.lock``): a second operation on the same fleet is
  refused, naming the one that runs;
- **fits** its profile to the fleet (``tui.ops.fit``): each GPU stays on the port the console and
  the pipeline watch; what runs, and what the dialogs name, is the fitted profile;
- changes servers only through the engine run (``tui.ops.runner``) or the one
  stop-and-release (``tui.control.stop_release``), which cordon, drain and verify identity;
- records what runs in the **fleet state** (``tui.state.fleet_state``) and writes one **journal**
  entry (``tui.ops.journal``), refused operations included;
- reports **typed events** (``tui.ops.events.OpEvent``) to the caller's sink.

Blocking work runs in threads: the coroutines never block the caller's event loop.
"""

from __future__ import annotations

from tui.ops.adopt_ops import AdoptOps
from tui.ops.door import BAD_ARGUMENTS, OperationError, OpsOptions
from tui.ops.form_ops import FormOps
from tui.ops.lifecycle_ops import LifecycleOps
from tui.ops.retune_ops import RetuneOps
from tui.ops.trial_ops import TrialOps

__all__ = ["BAD_ARGUMENTS", "FleetOps", "OperationError", "OpsOptions"]


class FleetOps(RetuneOps, LifecycleOps, TrialOps, FormOps, AdoptOps):
    """The operations core: every change of the fleet goes through one of these coroutines.

    Args:
        base: The profile that describes the fleet (the console's), when known; without it
            the fleet's layout comes from the fleet state.
        options: Deadlines, windows, options of each operation.
        by: Who is asking ('console', 'cli', 'autotune'): written in the journal.
        pipeline: The console's pipeline, when it has one (``p``; stopped with the fleet when
            ``stop_pipeline_with_fleet``).
        gpu_pids: Who holds memory on a GPU (default: from each profile's engine).
        stop_pipeline_with_fleet: ``stop_fleet`` also stops the pipeline (the demo's stop).
    """
