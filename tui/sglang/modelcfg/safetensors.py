"""Weight bytes from a checkpoint's safetensors headers, reading nothing but the headers.

A ``.safetensors`` file starts with an 8-byte little-endian header length N and N bytes of JSON:
``{tensor name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``. The
bytes a tensor takes are ``end - begin``. The shards are the files ``model.safetensors.index.json``
maps tensors to, else every ``*.safetensors`` in the folder. Tensors named ``mtp.*`` (Qwen3.5/3.6,
Qwen3-Next, Nemotron-H) or on a layer past ``num_hidden_layers`` (DeepSeek's NextN layer) are the
MTP draft's; a text-only architecture does not load ``visual.*`` tensors.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from tui.inputs import MODEL_META_LIMIT, InputError, open_stream, read_bytes
from tui.sglang.modelcfg.errors import ModelConfigError

INDEX_NAME = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100 * 1024 * 1024
"""The safetensors format's own cap on the header (``MAX_HEADER_SIZE``); a longer one is refused
rather than read."""

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


@dataclass(frozen=True, slots=True)
class CheckpointBytes:
    """Tensor bytes of a checkpoint, split as SGLang loads them."""

    target_bytes: int
    """Tensors the served model loads."""
    draft_bytes: int
    """MTP draft tensors (loaded only with speculative decoding)."""
    files: int
    """Shards read."""


def header_tensor_bytes(path: Path) -> dict[str, int]:
    """Bytes per tensor of one safetensors file, from its header only.

    Args:
        path: a ``.safetensors`` file.

    Returns:
        Tensor name -> bytes.

    Raises:
        ModelConfigError: unreadable, truncated, or not a safetensors header.
    """
    try:
        with open_stream(path, "a safetensors file") as handle:  # a FIFO: refused, not waited on
            prefix = handle.read(8)
            if len(prefix) != 8:
                raise ModelConfigError(f"{path}: not a safetensors file (shorter than 8 bytes)")
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES:
                raise ModelConfigError(
                    f"{path}: safetensors header of {length} bytes is over the "
                    f"{MAX_HEADER_BYTES}-byte limit"
                )
            raw = handle.read(length)
    except OSError as exc:
        raise ModelConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except InputError as exc:
        raise ModelConfigError(str(exc)) from None
    if len(raw) != length:
        raise ModelConfigError(f"{path}: safetensors header truncated")
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ModelConfigError(f"{path}: safetensors header is not JSON") from None
    if not isinstance(header, dict):
        raise ModelConfigError(f"{path}: safetensors header is not a JSON object")
    sizes: dict[str, int] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2):
            raise ModelConfigError(f"{path}: tensor {name} has no data_offsets")
        begin, end = offsets
        if not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets) or end < begin:
            raise ModelConfigError(
                f"{path}: tensor {name} data_offsets {offsets!r} are not two ascending integers"
            )
        sizes[name] = end - begin
    return sizes


def shard_files(folder: Path) -> list[Path]:
    """The checkpoint's shards: those the index names, else every ``*.safetensors`` file.

    Raises:
        ModelConfigError: the index is not one, or names a shard that is not there.
    """
    index = folder / INDEX_NAME
    if index.is_file():
        try:
            raw_index = read_bytes(index, MODEL_META_LIMIT, "a safetensors index")
            weight_map = json.loads(raw_index).get("weight_map", {})
        except (OSError, ValueError, AttributeError, RecursionError):
            raise ModelConfigError(f"{index}: not a safetensors index") from None
        if not isinstance(weight_map, dict) or not all(
            isinstance(shard, str) for shard in weight_map.values()
        ):
            raise ModelConfigError(f"{index}: weight_map is not tensor name -> shard file name")
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise ModelConfigError(
                f"{index}: shard {missing[0]} missing ({len(missing)} of {len(names)} absent)"
            )
        return [folder / n for n in names]
    return sorted(folder.glob("*.safetensors"))


def checkpoint_bytes(folder: Path, num_layers: int, load_vision: bool) -> CheckpointBytes | None:
    """Sum the tensor bytes of a folder's checkpoint.

    Args:
        folder: the model folder.
        num_layers: the target's decoder layers (a layer index at or past it is a NextN draft).
        load_vision: whether the served architecture loads ``visual.*`` tensors.

    Returns:
        The bytes, or None when the folder holds no safetensors at all.

    Raises:
        ModelConfigError: a shard is missing or its header unreadable.
    """
    files = shard_files(folder)
    if not files:
        return None
    target = draft = 0
    for path in files:
        for name, size in header_tensor_bytes(path).items():
            if ".visual." in f".{name}" and not load_vision:
                continue
            if _is_draft(name, num_layers):
                draft += size
            else:
                target += size
    return CheckpointBytes(target, draft, len(files))


def _is_draft(name: str, num_layers: int) -> bool:
    if name.startswith("mtp.") or ".mtp." in name:
        return True
    match = _LAYER.search(name)
    return match is not None and int(match.group(1)) >= num_layers
