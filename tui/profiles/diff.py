"""Field-level differences between two profiles, per-GPU overrides included."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tui.profiles.model import Profile
from tui.profiles.store import profile_to_dict


@dataclass(frozen=True, slots=True)
class Change:
    """One field that differs; ``old``/``new`` are None where the field is absent (auto)."""

    field: str
    """Dotted field name, e.g. ``server.max_running_requests`` or ``gpu.5.mem_fraction_static``."""
    old: object
    """Value in the first profile."""
    new: object
    """Value in the second profile."""

    def __str__(self) -> str:
        old = "(unset)" if self.old is None else repr(self.old)
        new = "(unset)" if self.new is None else repr(self.new)
        return f"{self.field}: {old} -> {new}"


def _flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= _flatten(value, f"{name}.")
        else:
            out[name] = value
    return out


def _doc(profile: Profile) -> dict[str, Any]:
    doc = profile_to_dict(profile)
    # Compare ports as a list however each file spelled them (base_port or ports).
    doc["fleet"].pop("base_port", None)
    doc["fleet"]["ports"] = list(profile.ports)
    return doc


def diff(a: Profile, b: Profile, include_name: bool = False) -> list[Change]:
    """Every field whose value differs between ``a`` and ``b``, sorted by field name.

    Args:
        a: the profile before.
        b: the profile after.
        include_name: also report ``name`` and ``note`` (off: they differ by design).

    Returns:
        The changes; empty when the two launch the same fleet.
    """
    fa, fb = _flatten(_doc(a)), _flatten(_doc(b))
    skip = set() if include_name else {"name", "note"}
    keys = sorted((fa.keys() | fb.keys()) - skip)
    return [Change(k, fa.get(k), fb.get(k)) for k in keys if fa.get(k) != fb.get(k)]
