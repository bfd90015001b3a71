"""The candidate space: the knobs autotune may turn, their values, and the profile of each point.

A candidate is the incumbent profile with some knobs set to other values. The knobs are the
tuning form's four (``mem_fraction_static``, ``max_mamba_cache_size``,
``mamba_full_memory_ratio``, ``max_running_requests``), the CUDA graph batch ceiling
(``cuda_graph_max_bs_decode``: SGLang 0.5.23's ``--cuda-graph-max-bs-decode``, a pass-through
flag) and the speculative steps (``speculative_num_steps``; with ``speculative_eagle_topk`` 1 the
draft tokens follow as steps + 1, as SGLang 0.5.23 pins them:
``srt/arg_groups/speculative_hook.py`` "speculative_num_draft_tokens is adjusted to
speculative_num_steps + 1 when speculative_eagle_topk == 1"). Every candidate profile is built
through the profile parser, so a value outside a knob's range is refused with the parser's
own message naming the field.

The Mamba slots and the running cap reach past the seed's aggressive 200 slots / 64 requests
(to 400 and 80): on the seed's B200 every 40 more slots lift SGLang's cap by 8 requests and
take ~160,000 tokens from the KV pool, so somewhere past 320 slots the pool can no longer hold
the running requests' ~2,500-token outputs and SGLang retracts (``tui.sim.kvpool``). The best
configuration is inside the space, not at its largest concurrency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.profiles import Profile, profile_from_dict, profile_to_dict
from tui.sglang.knobs import KNOB_TABLE

KnobValue = int | float
"""A knob's value (every knob autotune turns is a number)."""


@dataclass(frozen=True, slots=True)
class Knob:
    """One tunable setting of the server; its type and range are its row of the knob table
    (``tui.sglang.knobs.KNOB_TABLE``), read when asked."""

    name: str
    """The profile's name for it (a ``[server]`` field or a pass-through flag)."""
    extra_flag: bool
    """True when it is a pass-through flag (``[server.extra_flags]``), not a named field."""
    default_values: tuple[KnobValue, ...]
    """The values searched when the operator names none."""

    @property
    def kind(self) -> type:
        """int or float."""
        return KNOB_TABLE[self.name].kind

    def allowed(self) -> str:
        """The range searched, in words ('(0, 1)', '1..4096')."""
        return KNOB_TABLE[self.name].searched().span()

    def admits(self, value: float) -> bool:
        """Whether ``value`` lies in the range searched (a finite number)."""
        return KNOB_TABLE[self.name].searched().contains(value)


KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob("mem_fraction_static", False, (0.84, 0.88, 0.91, 0.93)),
        Knob("max_mamba_cache_size", False, (80, 120, 160, 200, 240, 280, 320, 360, 400)),
        Knob("mamba_full_memory_ratio", False, (0.4, 0.5, 0.6, 0.8)),
        Knob("max_running_requests", False, (16, 24, 32, 40, 48, 56, 64, 72, 80)),
        Knob("cuda_graph_max_bs_decode", True, (16, 32, 48, 64)),
        Knob("speculative_num_steps", False, (2, 3, 4)),
    )
}
"""Every knob autotune can turn, with its default values (the issue's defaults); its range is
the knob table's (the profile parser's, with a finite top for the counts so a range cannot ask
for an absurd grid)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One point of the space: the knobs it sets (the others stay as the incumbent has them)."""

    knobs: tuple[tuple[str, KnobValue], ...]
    """(knob, value) pairs in knob order."""

    @classmethod
    def of(cls, values: Mapping[str, KnobValue]) -> Candidate:
        """A candidate from a mapping, in the space's knob order."""
        order = list(KNOBS)
        return cls(tuple(sorted(values.items(), key=lambda kv: order.index(kv[0]))))

    def as_dict(self) -> dict[str, KnobValue]:
        """The knobs as a dict."""
        return dict(self.knobs)

    def key(self) -> str:
        """A short stable text naming the point ('mem_fraction_static=0.9,...')."""
        return ",".join(f"{k}={v:g}" for k, v in self.knobs)


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """The values each knob may take."""

    values: tuple[tuple[str, tuple[KnobValue, ...]], ...]
    """(knob, sorted values) per knob, in knob order."""

    @classmethod
    def default(cls) -> SearchSpace:
        """Every knob with its default values."""
        return cls(tuple((k.name, k.default_values) for k in KNOBS.values()))

    def knobs(self) -> list[str]:
        """The knob names searched."""
        return [k for k, _ in self.values]

    def values_of(self, knob: str) -> tuple[KnobValue, ...]:
        """The values ``knob`` may take."""
        return dict(self.values)[knob]

    def size(self) -> int:
        """Points in the full grid."""
        n = 1
        for _, vals in self.values:
            n *= len(vals)
        return n

    def to_json(self) -> dict[str, list[KnobValue]]:
        """JSON-ready {knob: values}."""
        return {k: list(v) for k, v in self.values}


def space_from(specs: Sequence[tuple[str, tuple[KnobValue, ...]]]) -> SearchSpace:
    """A space from parsed knob specs (the default space when there are none; the specs are
    parsed and checked by ``tui.autotune.options``)."""
    if not specs:
        return SearchSpace.default()
    chosen = dict(specs)
    return SearchSpace(tuple((k, chosen[k]) for k in KNOBS if k in chosen))


def knobs_of(profile: Profile, space: SearchSpace) -> dict[str, KnobValue | None]:
    """The incumbent's value of every knob of ``space`` (None: SGLang's automatic value)."""
    extra = dict(profile.server.extra_flags)
    out: dict[str, KnobValue | None] = {}
    for name in space.knobs():
        raw: Any = extra.get(name) if KNOBS[name].extra_flag else getattr(profile.server, name)
        out[name] = None if raw is None or isinstance(raw, bool) else KNOBS[name].kind(raw)
    return out


def candidate_profile(incumbent: Profile, candidate: Candidate, name: str) -> Profile:
    """The incumbent with ``candidate``'s knobs set, named ``name``, validated by the parser.

    Args:
        incumbent: The profile the fleet runs (fitted).
        candidate: The knobs to set.
        name: The candidate profile's name.

    Returns:
        The candidate profile.

    Raises:
        ProfileError: a value the profile's own validation refuses (naming the field).
    """
    doc = profile_to_dict(incumbent)
    doc["name"] = name
    doc["note"] = f"autotune candidate {candidate.key()} from {incumbent.name}"
    server = doc.setdefault("server", {})
    for knob, value in candidate.knobs:
        if KNOBS[knob].extra_flag:
            server.setdefault("extra_flags", {})[knob] = value
        else:
            server[knob] = value
        if knob == "speculative_num_steps" and server.get("speculative_eagle_topk", 1) == 1:
            server["speculative_num_draft_tokens"] = int(value) + 1
    return profile_from_dict(doc, name, source=f"candidate {candidate.key()}")
