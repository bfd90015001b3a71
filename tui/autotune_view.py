"""The autotune search's vocabulary, as its console screens show and edit it: its status
document's file and final phases, the search request the form builds (knobs, ranges, budget,
``gpufleet autotune start``'s options), the candidates' lines and the form's range preview. The
search is started, steered and read through the console's port (``StartAutotune``,
``SteerAutotune``, ``FleetReads.autotune_status``; on this host:
``tui.console_wiring.DetachedAutotune``), not from here.

The console (``tui.ui``) imports no ``tui.autotune`` (an import-linter contract in
pyproject.toml): the search sits above the operations core it drives, and the screens reach it
through this one module, the way they reach the layers below through ``tui.ops.types``. No
Textual here.
"""

from __future__ import annotations

from tui.autotune.budget import Budget
from tui.autotune.options import (
    OptionsError,
    SearchRequest,
    budget_of,
    default_range,
    knob_range,
    parse_canary_gpu,
    request_argv,
    space_of,
)
from tui.autotune.preview import RangePreview
from tui.autotune.record import candidate_line
from tui.autotune.space import KNOBS, KnobValue, SearchSpace
from tui.autotune.status import FINAL_PHASES, status_file

__all__ = [
    "FINAL_PHASES",
    "KNOBS",
    "Budget",
    "KnobValue",
    "OptionsError",
    "RangePreview",
    "SearchRequest",
    "SearchSpace",
    "budget_of",
    "candidate_line",
    "default_range",
    "knob_range",
    "parse_canary_gpu",
    "request_argv",
    "space_of",
    "status_file",
]
