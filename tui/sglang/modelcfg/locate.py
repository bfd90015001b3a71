"""Where a model's ``config.json`` (and its weights) are: a local folder, or the Hugging Face cache.

A ``--model-path`` that names a folder is read there. One that names a hub id (``ORG/NAME``) is
looked up in the cache SGLang's loader itself would fill, never on the network:
``$HF_HUB_CACHE`` (or the older ``$HUGGINGFACE_HUB_CACHE``), else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``; inside it
``models--ORG--NAME/snapshots/<commit>/``, the commit read from ``refs/<revision>`` (``main`` by
default) as ``huggingface_hub`` writes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.inputs import HOLDER_LIMIT, MODEL_META_LIMIT, InputError, read_bytes, read_text
from tui.sglang.modelcfg.errors import ModelConfigError

CONFIG_NAME = "config.json"


@dataclass(frozen=True, slots=True)
class ModelDir:
    """A model folder holding a config.json."""

    path: Path
    """The folder (a cache snapshot for a hub id)."""
    origin: str
    """``local`` or ``hf-cache``."""

    @property
    def config_path(self) -> Path:
        """Its config.json."""
        return self.path / CONFIG_NAME


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, from the same environment variables ``huggingface_hub`` reads."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if value := os.environ.get(name):
            return Path(value).expanduser()
    if home := os.environ.get("HF_HOME"):
        return Path(home).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def _looks_like_hub_id(model: str) -> bool:
    if model.startswith(("/", ".", "~")) or model.count("/") != 1:
        return False
    org, name = model.split("/")
    return bool(org) and bool(name)


def find_model_dir(model: str, revision: str = "main") -> ModelDir:
    """The folder holding ``model``'s config.json.

    Args:
        model: a local folder, or a hub id ``ORG/NAME`` already in the Hugging Face cache.
        revision: the cache ref (or commit) to read for a hub id.

    Returns:
        The folder.

    Raises:
        ModelConfigError: naming the model and every place looked.
    """
    local = Path(model).expanduser()
    if local.is_dir():
        if not (local / CONFIG_NAME).is_file():
            raise ModelConfigError(f"model {model}: no {CONFIG_NAME} in folder {local}")
        return ModelDir(local, "local")
    if not _looks_like_hub_id(model):
        raise ModelConfigError(f"model {model}: no such folder, and not a hub id ORG/NAME")
    org, name = model.split("/")
    repo = hub_cache_dir() / f"models--{org}--{name}"
    if not repo.is_dir():
        raise ModelConfigError(
            f"model {model}: not a local folder and not in the Hugging Face cache "
            f"(looked for {repo}; set HF_HUB_CACHE or HF_HOME, or pass the folder)"
        )
    snapshot = _snapshot(model, repo, revision)
    if not (snapshot / CONFIG_NAME).is_file():
        raise ModelConfigError(f"model {model}: no {CONFIG_NAME} in the cached snapshot {snapshot}")
    return ModelDir(snapshot, "hf-cache")


def _snapshot(model: str, repo: Path, revision: str) -> Path:
    snapshots = repo / "snapshots"
    ref = repo / "refs" / revision
    if ref.is_file():
        try:
            commit = read_text(ref, HOLDER_LIMIT, "a cache ref").strip()
        except (OSError, ValueError) as exc:
            raise ModelConfigError(f"{ref}: cannot read: {exc}") from None
        return snapshots / commit
    if (snapshots / revision).is_dir():
        return snapshots / revision  # a commit given as the revision
    found = sorted(p for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    if len(found) == 1:
        return found[0]
    raise ModelConfigError(
        f"model {model}: {ref} missing and {len(found)} snapshots in {snapshots}: "
        "cannot tell which revision to read"
    )


def load_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file (NaN/Infinity accepted: Nemotron-H configs write ``Infinity``).

    Raises:
        ModelConfigError: the file is unreadable or not a JSON object.
    """
    try:
        # The one door: a FIFO or /dev/zero in a model's place is refused, not waited on.
        raw = read_bytes(path, MODEL_META_LIMIT, "a model's JSON file")
        data = json.loads(raw)
    except OSError as exc:
        raise ModelConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except InputError as exc:
        raise ModelConfigError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except (UnicodeDecodeError, RecursionError):
        raise ModelConfigError(
            f"{path}: not valid JSON (not UTF-8 text, or nested too deeply)"
        ) from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: not a JSON object")
    return data
