"""Node-local GPU numbers to the many-node console's numbers (``node position * 100 + GPU``) in
the operations core's events and results, so the console's screens (apply, canary, rollout) track
each GPU of each node apart.

Which fields hold GPU numbers is listed per class: a new event type with a GPU field must be added
here (``tests/core/test_agent_api.py`` checks every ``gpu``-named field of the codec's classes is).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

GPU_FIELDS: dict[str, frozenset[str]] = {
    "OperationStarted": frozenset({"gpus"}),
    "GpuPhase": frozenset({"gpu"}),
    "GpuReady": frozenset({"gpu"}),
    "GpuFailed": frozenset({"gpu"}),
    "VerifyReport": frozenset({"gpu"}),
    "DrainProgress": frozenset({"gpu"}),
    "CanaryLook": frozenset({"gpu"}),
    "CanaryResult": frozenset({"gpu", "controls", "dropped_controls", "per_gpu_tokens"}),
    "RolloutStep": frozenset({"gpus", "profiles"}),
    "RolloutResult": frozenset({"planned", "done", "failed", "stayed", "restored", "skipped"}),
    "ApplyResult": frozenset({"gpus", "previous_profiles"}),
    "StopReleased": frozenset({"gpu"}),
    "Preflight": frozenset({"gpu"}),
    "StopResult": frozenset({"gpu"}),
    "Outlier": frozenset({"gpu"}),
    "Side": frozenset({"gpus"}),  # a verdict's canary, control, before or after GPUs
}
"""Class name -> its fields that hold GPU numbers (an int, a tuple of them, or dict keys)."""


def _map_gpus(value: Any, gpu: Callable[[int], int]) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return gpu(value)
    if isinstance(value, tuple):
        return tuple(_map_gpus(v, gpu) for v in value)
    if isinstance(value, list):
        return [_map_gpus(v, gpu) for v in value]
    if isinstance(value, dict):
        return {gpu(k) if isinstance(k, int) else k: v for k, v in value.items()}
    return value


def remap_gpus(value: Any, gpu: Callable[[int], int]) -> Any:
    """``value`` with every GPU number ``n`` replaced by ``gpu(n)`` (dataclasses rebuilt).

    Args:
        value: An event, a result, or a list/tuple of them.
        gpu: Node-local GPU -> console GPU.

    Returns:
        The same structure with the numbers replaced.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = GPU_FIELDS.get(type(value).__name__, frozenset())
        changes: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            current = getattr(value, field.name)
            if field.name in fields:
                changes[field.name] = _map_gpus(current, gpu)
            elif _nested(current):
                changes[field.name] = remap_gpus(current, gpu)
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, tuple):
        return tuple(remap_gpus(v, gpu) for v in value)
    if isinstance(value, list):
        return [remap_gpus(v, gpu) for v in value]
    return value


def _nested(value: Any) -> bool:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True
    if isinstance(value, tuple | list):
        return any(_nested(v) for v in value)
    return False
