"""Which profile each GPU's server runs, what it asks for, and how it differs from the fleet's.

Read from the fleet state (``tui.state.fleet_state.read_fleet``) in the monitor's thread; the
panels and ``gpufleet status`` show it. The fleet's profile is the one most GPUs run now; a GPU
running another one names the knob values that differ, e.g. ``sim-aggressive (mamba 200,
mfs 0.93)``. A knob the profile leaves unset is ``auto`` (SGLang chooses; what it chose is the
server's business, shown apart as the effective value).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

from tui.profiles import Profile, ProfileError
from tui.profiles.launch_args import flags_for
from tui.profiles.model import ServerFlags
from tui.state.files import StateFileError
from tui.state.fleet_state import FleetState, profile_of, read_fleet

KNOB_LABELS: dict[str, str] = {
    "max_running_requests": "mrr",
    "max_mamba_cache_size": "mamba",
    "mem_fraction_static": "mfs",
    "mamba_full_memory_ratio": "mfr",
    "mamba_radix_cache_strategy": "radix",
    "speculative_algorithm": "spec",
    "speculative_num_steps": "steps",
    "speculative_eagle_topk": "topk",
    "speculative_num_draft_tokens": "draft",
}
"""The knobs a panel may name, in the order it names them, with their short labels."""

AUTO = "auto"
"""What a knob the profile leaves unset reads as."""


@dataclass(frozen=True, slots=True)
class RunningProfile:
    """The profile one GPU's server was launched with, as the fleet state records it."""

    name: str
    """The profile's name."""
    asked: tuple[tuple[str, str], ...]
    """Every knob of ``KNOB_LABELS`` as this GPU's flags ask it (``auto`` when unset), in order."""
    differs: tuple[tuple[str, str], ...] = ()
    """The knobs whose asked value differs from the fleet's profile on this GPU (empty when
    this GPU runs the fleet's profile, or no other profile is known)."""
    values: tuple[tuple[str, object], ...] = ()
    """``asked`` with each value as the profile types it (int, float, bool, str; None when
    unset: SGLang chooses): what ``gpufleet status --json`` gives (it gave ``"80"``)."""

    def value(self, knob: str) -> object:
        """The typed asked value of ``knob`` (None when unset or unknown)."""
        return dict(self.values).get(knob)

    def asked_value(self, knob: str) -> str:
        """The asked value of ``knob`` (``auto`` when unset or unknown)."""
        return dict(self.asked).get(knob, AUTO)

    def label(self) -> str:
        """``name`` or ``name (mamba 200, mfs 0.93)`` with the differing knobs."""
        if not self.differs:
            return self.name
        knobs = ", ".join(f"{KNOB_LABELS[k]} {v}" for k, v in self.differs)
        return f"{self.name} ({knobs})"


def _value(value: object) -> str:
    if value is None:
        return AUTO
    return repr(value) if isinstance(value, float) else str(value)


def asked_knobs(flags: ServerFlags) -> tuple[tuple[str, str], ...]:
    """The ``KNOB_LABELS`` knobs of these flags as strings (``auto`` when unset).

    Args:
        flags: One GPU's resolved server flags.

    Returns:
        (knob, value) pairs in ``KNOB_LABELS`` order.
    """
    return tuple((k, _value(v)) for k, v in typed_knobs(flags))


def typed_knobs(flags: ServerFlags) -> tuple[tuple[str, object], ...]:
    """The ``KNOB_LABELS`` knobs of these flags as typed values (None when unset).

    Args:
        flags: One GPU's resolved server flags.

    Returns:
        (knob, value) pairs in ``KNOB_LABELS`` order.
    """
    have = {f.name for f in fields(flags)}
    return tuple((k, getattr(flags, k)) for k in KNOB_LABELS if k in have)


def _resolved(state: FleetState) -> dict[int, tuple[Profile, ServerFlags]]:
    out = {}
    for gpu, entry in state.items():
        if entry.current is None:
            continue
        try:
            profile = profile_of(entry.current)
            out[gpu] = (profile, flags_for(profile, gpu))
        except (ProfileError, KeyError):
            continue  # a stored document that no longer parses names no profile
    return out


def running_profiles(state: FleetState) -> dict[int, RunningProfile]:
    """What every GPU runs, with the knobs that differ from the fleet's profile.

    Args:
        state: The fleet state.

    Returns:
        GPU index -> its running profile (GPUs running nothing recorded are left out).
    """
    resolved = _resolved(state)
    names = Counter(profile.name for profile, _ in resolved.values())
    fleet = max(names, key=lambda n: (names[n], n)) if names else None
    fleet_profile = next((p for p, _ in resolved.values() if p.name == fleet), None)
    out = {}
    for gpu, (profile, flags) in resolved.items():
        asked = asked_knobs(flags)
        differs: tuple[tuple[str, str], ...] = ()
        if fleet_profile is not None and profile.name != fleet:
            try:
                base = dict(asked_knobs(flags_for(fleet_profile, gpu)))
            except KeyError:  # the fleet's profile does not cover this GPU: compare shared flags
                base = dict(asked_knobs(fleet_profile.server))
            differs = tuple((k, v) for k, v in asked if base.get(k, AUTO) != v)
        out[gpu] = RunningProfile(profile.name, asked, differs, typed_knobs(flags))
    return out


def read_running_profiles() -> dict[int, RunningProfile]:
    """``running_profiles`` of the state file; empty when it cannot be read (blocking).

    A damaged or unreadable state file must cost the panels their profile names, not the
    monitor: the operations that need the state report it themselves.
    """
    return read_state_and_profiles()[1]


def read_state_and_profiles() -> tuple[FleetState, dict[int, RunningProfile]]:
    """The fleet state and its ``running_profiles``, from one read; both empty when the file
    cannot be read (as ``read_running_profiles``). Blocking."""
    try:
        state = read_fleet()
    except (StateFileError, OSError):
        return {}, {}
    return state, running_profiles(state)
