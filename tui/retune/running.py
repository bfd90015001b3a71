"""Which profile each GPU runs now, and which it ran before: the state a rollback needs.

Stored in ``tui.paths.running_profile_file()`` as a whole profile document per GPU (not just a
name), so a rollback relaunches exactly what ran even if the profile file was edited since.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui import paths
from tui.profiles import Profile, profile_from_dict, profile_to_dict


@dataclass(frozen=True, slots=True)
class GpuProfiles:
    """One GPU's current and previous profile documents (None = nothing / unknown)."""

    current: dict[str, Any] | None
    """The profile document running now (None after a failed apply: nothing runs)."""
    previous: dict[str, Any] | None
    """The one it ran before the last apply."""

    @property
    def current_name(self) -> str | None:
        """Name of the current profile."""
        return str(self.current.get("name")) if self.current else None

    @property
    def previous_name(self) -> str | None:
        """Name of the previous profile."""
        return str(self.previous.get("name")) if self.previous else None


def read_running(path: Path | None = None) -> dict[int, GpuProfiles]:
    """Every GPU's profiles; an unreadable file reads as empty (nothing known)."""
    target = path or paths.running_profile_file()
    try:
        data = json.loads(target.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    gpus = data.get("gpus") if isinstance(data, dict) else None
    out: dict[int, GpuProfiles] = {}
    for key, entry in (gpus if isinstance(gpus, dict) else {}).items():
        if str(key).isascii() and str(key).isdigit() and isinstance(entry, dict):
            out[int(key)] = GpuProfiles(entry.get("current"), entry.get("previous"))
    return out


def _write(state: dict[int, GpuProfiles], path: Path) -> None:
    doc = {
        "gpus": {str(g): {"current": p.current, "previous": p.previous} for g, p in state.items()}
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(doc, handle, indent=1, default=str)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record_outcome(
    profile: Profile, ready: list[int], failed: list[int], path: Path | None = None
) -> None:
    """Record an apply: ready GPUs now run ``profile``; failed GPUs run nothing.

    Args:
        profile: The profile applied.
        ready: GPUs that reached ready.
        failed: GPUs whose relaunch failed (stopped).
        path: State file; defaults to ``tui.paths.running_profile_file()``.
    """
    target = path or paths.running_profile_file()
    state = read_running(target)
    doc = profile_to_dict(profile)
    for gpu in ready:
        old = state.get(gpu, GpuProfiles(None, None))
        # Re-applying the running profile keeps the older one as the rollback target.
        same = old.current is not None and old.current == doc
        state[gpu] = GpuProfiles(doc, old.previous if same else old.current)
    for gpu in failed:
        old = state.get(gpu, GpuProfiles(None, None))
        state[gpu] = GpuProfiles(None, old.current if old.current is not None else old.previous)
    _write(state, target)


def profile_of(doc: dict[str, Any]) -> Profile:
    """The profile a stored document describes (validated again)."""
    return profile_from_dict(doc, default_name=str(doc.get("name", "previous")))
