"""The scope of a fleet operation (``b`` rollback, ``o`` rollout): what the selection decides.

Marked GPUs (space marks one, ``m`` on a many-node console marks every GPU of the selected
panel's node) are the scope; with none marked the operation is fleet-wide. The confirm names the
scope before anything runs, by node on a many-node console. Pure: no Textual.
"""

from __future__ import annotations

from collections.abc import Sequence

from tui.fleet.snapshot import FleetSnapshot
from tui.ui.rollout.describe import compact_range


def _gpus_word(gpus: Sequence[int]) -> str:
    return f"GPU{'s' if len(gpus) != 1 else ''} {compact_range(gpus)}"


def scope_words(fleet: FleetSnapshot, gpus: Sequence[int] | None) -> str:
    """The scope in words, naming nodes on a many-node console.

    Args:
        fleet: The current snapshot (its panels say which node each GPU is on).
        gpus: The GPUs in scope (console numbers), or None for the whole fleet.

    Returns:
        e.g. ``the whole fleet (7 GPUs)``, ``GPUs 1,3``, ``the whole fleet (4 GPUs on nodes a,
        b)``, ``node b (all 2 GPUs: 100-101)`` or ``node a GPU 1; node b GPUs 100-101 (all)``.
    """
    nodes: dict[str, list[int]] = {}
    for panel in fleet.panels:
        nodes.setdefault(panel.node, []).append(panel.gpu_index)
    many = any(name for name in nodes)
    if gpus is None:
        count = len(fleet.panels)
        where = f" on nodes {', '.join(n for n in nodes)}" if many else ""
        return f"the whole fleet ({count} GPU{'s' if count != 1 else ''}{where})"
    if not many:
        return _gpus_word(gpus)
    chosen = set(gpus)
    parts = []
    for name, members in nodes.items():
        mine = sorted(chosen & set(members))
        if not mine:
            continue
        whole = " (all of it)" if len(mine) == len(members) else ""
        parts.append(f"node {name} {_gpus_word(mine)}{whole}")
    unknown = sorted(chosen - {p.gpu_index for p in fleet.panels})
    if unknown:
        parts.append(f"{_gpus_word(unknown)} (not shown)")
    return "; ".join(parts)
