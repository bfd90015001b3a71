"""A ``ModelSpec`` for any model, from its own config.json: the one door to a model's shapes.

``resolve_model`` answers for a name of ``tui.sglang.models.MODELS`` (the two hand-written,
calibrated specs), for the ``--model-path`` one of them serves, and otherwise for a local model
folder or a hub id in the Hugging Face cache, whose config.json it derives (``shapes``) and whose
weights it reads from the safetensors headers (``safetensors``) or, with ``--load-format dummy``
or no weights present, estimates from the shapes (``params``). A derived spec keeps the constants
a config cannot give at the named defaults below (``UNCALIBRATED_*``); the preflight replaces
sizes with a running server's log when it has one.

Derived specs are cached by (folder, the config's mtime and size, the folder's file names, load
format): the console's preflight asks at every keystroke.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from tui.sglang.modelcfg.errors import ModelConfigError
from tui.sglang.modelcfg.locate import ModelDir, find_model_dir, load_json
from tui.sglang.modelcfg.params import estimate_weights
from tui.sglang.modelcfg.safetensors import checkpoint_bytes
from tui.sglang.modelcfg.shapes import ModelShapes, derive_shapes, text_view
from tui.sglang.models import GIB, MODELS, ModelSpec

UNCALIBRATED_ACTIVATION_BYTES_PER_HIDDEN = 64
"""Chunked-prefill activation workspace per token per hidden unit (the qwen3.6-27b calibration:
320 KiB a token at hidden 5120); a derived spec's ``activation_bytes_per_token`` is this times its
hidden size."""

UNCALIBRATED_GRAPH_BASE_BYTES = int(0.5 * GIB)
"""CUDA-graph memory at batch size 1 for a derived spec (between the two calibrated specs)."""

UNCALIBRATED_GRAPH_BYTES_PER_BS = 4 * 1024**2
"""Extra CUDA-graph memory per captured batch size for a derived spec."""


def resolve_model(model: str, *, load_format: str | None = None) -> ModelSpec:
    """The spec of a model name, a served ``--model-path``, a model folder or a cached hub id.

    Args:
        model: a key of ``MODELS``, the ``model_path`` of one of them, a local folder holding a
            config.json, or a hub id ``ORG/NAME`` in the Hugging Face cache.
        load_format: ``--load-format`` (``dummy``: weights estimated from the config's shapes).

    Returns:
        The spec.

    Raises:
        ModelConfigError: one line naming what is missing and where it looked.
    """
    if model in MODELS:
        return MODELS[model]
    for spec in MODELS.values():
        if spec.model_path == model:
            return spec
    folder = find_model_dir(model)
    config = folder.config_path.stat()
    # A rewritten config, or a shard added or removed (the names, not the folder's mtime, whose
    # granularity can hide a change made within the same second).
    stamp = (config.st_mtime_ns, config.st_size, tuple(sorted(os.listdir(folder.path))))
    return _derived(model, str(folder.path), folder.origin, stamp, load_format == "dummy")


@functools.lru_cache(maxsize=32)
def _derived(
    model: str, folder: str, origin: str, stamp: tuple[object, ...], dummy: bool
) -> ModelSpec:
    del stamp  # a cache key only: a rewritten config.json or a changed folder is derived again
    return spec_from_folder(model, ModelDir(Path(folder), origin), dummy=dummy)


def spec_from_folder(model: str, folder: ModelDir, *, dummy: bool = False) -> ModelSpec:
    """Derive a spec from one model folder.

    Args:
        model: the name the spec answers to (the ``--model-path`` as given).
        folder: where its config.json (and weights) are.
        dummy: ``--load-format dummy``: weights from the shapes even when files are present.

    Returns:
        The spec.

    Raises:
        ModelConfigError: the config cannot be planned (one line, the field and the file).
    """
    source = str(folder.config_path)
    config = load_json(folder.config_path)
    shapes = derive_shapes(config, source)
    target, draft, weights_source = _weights(config, shapes, folder.path, source, dummy)
    hidden = text_view(config, source).integer("hidden_size", why="the activation workspace")
    state = shapes.state if shapes.is_hybrid else None
    return ModelSpec(
        name=model,
        model_path=model,
        architecture=shapes.architecture,
        quant=shapes.quantization,
        weight_bytes=target,
        draft_weight_bytes=draft,
        kv_bytes_per_token=shapes.kv_bytes_per_token,
        draft_kv_bytes_per_token=shapes.draft_kv_bytes_per_token,
        is_hybrid_mamba=state is not None,
        conv_state_bytes=state.conv_state_bytes if state else 0,
        ssm_state_bytes=state.ssm_state_bytes if state else 0,
        conv_window=state.conv_window if state else 3,
        ssm_dtype_bytes=state.ssm_dtype_bytes if state else 4,
        is_multimodal=shapes.multimodal,
        context_length=shapes.context_length,
        default_page_size=1,
        activation_bytes_per_token=UNCALIBRATED_ACTIVATION_BYTES_PER_HIDDEN * hidden,
        graph_base_bytes=UNCALIBRATED_GRAPH_BASE_BYTES,
        graph_bytes_per_bs=UNCALIBRATED_GRAPH_BYTES_PER_BS,
        draft_kv_budgeted_builds=shapes.draft_budgeted_builds,
        kv_layout="mla" if shapes.mla_kv_dim else "mha",
        weights_source=weights_source,
        config_path=source,
    )


def _weights(
    config: dict[str, object], shapes: ModelShapes, folder: Path, source: str, dummy: bool
) -> tuple[int, int, str]:
    """(target bytes, draft bytes, where they came from)."""
    if not dummy:
        try:
            found = checkpoint_bytes(folder, shapes.num_layers, load_vision=shapes.multimodal)
        except ModelConfigError as exc:
            estimate = estimate_weights(config, shapes, source)
            return estimate.target_bytes, estimate.draft_bytes, f"estimated ({exc})"
        if found is not None:
            return found.target_bytes, found.draft_bytes, "safetensors"
    estimate = estimate_weights(config, shapes, source)
    why = "load format dummy" if dummy else "no weights in the folder"
    return estimate.target_bytes, estimate.draft_bytes, f"estimated ({why})"
