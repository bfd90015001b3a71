"""The SGLang flags gpufleet models, one row each: the one table of their ranges and couplings.

Each row says what a flag is (its dest and ``--flag``, int or float, its unit), the values a
profile may give it (``range``), the narrower values the simulator simulates (``sim_high``) or
autotune searches (``search_high``: a finite top where the range has none, so a range cannot ask
for an absurd grid), and how it couples with the others. Which releases have it and its default
are read from each release's own flag table (``tui.sglang.flagtable``), never copied here.

Every reader asks the row at the moment it judges a value, so a change to a row changes them
all: the profile parser's error (``Knob.rule``: ``must be in (0, 1)``), the tuning form's label
(``Knob.help``), the simulator's usage error (``tui.sglang.flags.out_of_range``) and autotune's
space (``tui.autotune.space``). ``TUNED`` are the four knobs the operator tunes in the form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tui.sglang.flagtable.table import PINNED_VERSION, Json, known_versions, load_table


@dataclass(frozen=True, slots=True)
class Range:
    """The values of one number: ``[low, high]``, either end open, None unbounded."""

    kind: type
    """int or float."""
    low: float | None
    """Smallest allowed value (None: unbounded)."""
    high: float | None
    """Largest allowed value (None: unbounded)."""
    low_open: bool = False
    """Exclude ``low`` itself."""
    high_open: bool = False
    """Exclude ``high`` itself."""

    def contains(self, value: float) -> bool:
        """Whether ``value`` is a finite number inside the range (NaN slips past < and >)."""
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is None:
            return True
        return value < self.high if self.high_open else value <= self.high

    def interval(self) -> str:
        """``(0, 1)``, ``(0, 10]``, ``[1, inf)``."""
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        return f"{left}{_num(self.low, '-inf')}, {_num(self.high, 'inf')}{right}"

    def span(self) -> str:
        """An integer range as ``1..4096``, a float one as its interval."""
        if self.kind is int and self.low is not None and self.high is not None:
            return f"{_num(self.low, '')}..{_num(self.high, '')}"
        return self.interval()

    def words(self) -> str:
        """The range in the form's words: ``integer >= 1``, ``integer in 1..16``, ``(0, 1)``."""
        if self.kind is not int:
            return self.interval()
        if self.high is None:
            return f"integer >= {_num(self.low, '-inf')}"
        return f"integer in {self.span()}"


def _num(value: float | None, none: str) -> str:
    if value is None:
        return none
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True, slots=True)
class Knob:
    """One SGLang flag gpufleet models (a row of ``KNOB_TABLE``)."""

    name: str
    """The flag's dest and the profile's field (``mem_fraction_static``)."""
    range: Range
    """The values a profile may give it (the parser, the form)."""
    unit: str
    """What its value means, in the form's words."""
    couples: tuple[str, ...] = ()
    """The knobs it moves with (names of other rows)."""
    how: str = ""
    """How it couples with them, in words."""
    sim_high: float | None = None
    """The largest value the simulator simulates, where that is below ``range``'s top."""
    search_high: float | None = None
    """The largest value autotune searches, where ``range`` has no (or a larger) top."""

    @property
    def flag(self) -> str:
        """The command-line spelling, ``--mem-fraction-static``."""
        return "--" + self.name.replace("_", "-")

    @property
    def kind(self) -> type:
        """int or float."""
        return self.range.kind

    def simulated(self) -> Range:
        """The values the simulator simulates: the range, up to ``sim_high``."""
        return self._up_to(self.sim_high)

    def searched(self) -> Range:
        """The values autotune may search: the range, up to ``search_high``."""
        return self._up_to(self.search_high)

    def _up_to(self, top: float | None) -> Range:
        high = self.range.high
        if top is None or (high is not None and high <= top):
            return self.range
        return replace(self.range, high=top, high_open=False)

    def rule(self) -> str:
        """The profile parser's problem for a value outside the range: ``must be in (0, 1)``,
        ``must be an integer >= 1``."""
        words = self.range.words()
        return f"must be an {words}" if self.kind is int else f"must be in {words}"

    def help(self) -> str:
        """The form's line beside its input: ``(0, 1): share of free memory for the pools``."""
        return f"{self.range.words()}: {self.unit}"

    def releases(self) -> tuple[str, ...]:
        """The SGLang releases whose parser has the flag (from their flag tables)."""
        return tuple(v for v in known_versions() if self.name in load_table(v).by_dest())

    def default(self, version: str = PINNED_VERSION) -> Json:
        """SGLang's value when the flag is not given (None: SGLang sizes it), in ``version``."""
        return load_table(version).resolved_default(self.name)


def _count(
    name: str,
    unit: str,
    high: int | None = None,
    *,
    couples: tuple[str, ...] = (),
    how: str = "",
    sim_high: int | None = None,
    search_high: int | None = None,
) -> Knob:
    """A count: an integer >= 1."""
    return Knob(name, Range(int, 1, high), unit, couples, how, sim_high, search_high)


KNOB_TABLE: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob(
            "mem_fraction_static",
            Range(float, 0, 1, low_open=True, high_open=True),
            "share of free memory for the pools",
            ("max_mamba_cache_size", "mamba_full_memory_ratio"),
            "the pools' budget: the Mamba pool is carved first, the KV tokens get the rest",
        ),
        _count(
            "max_mamba_cache_size",
            "Mamba state slots",
            couples=("max_running_requests", "mem_fraction_static"),
            how="caps max_running_requests at slots // slots per request (by release and "
            "radix-cache strategy: tui.sglang.caps); its memory leaves fewer KV tokens",
            search_high=100_000,
        ),
        Knob(
            "mamba_full_memory_ratio",
            Range(float, 0, 10, low_open=True),
            "Mamba pool relative to the KV pool",
            ("max_mamba_cache_size", "max_running_requests"),
            "sizes the Mamba pool (hence the cap on max_running_requests) when "
            "max_mamba_cache_size is automatic",
        ),
        _count(
            "max_running_requests",
            "SGLang may cap it",
            couples=("max_mamba_cache_size", "mem_fraction_static"),
            how="capped by the Mamba slots and by the KV tokens (tokens // 2)",
            search_high=4096,
        ),
        Knob("port", Range(int, 0, 65535), "TCP port"),
        _count("max_total_tokens", "KV tokens"),
        _count("chunked_prefill_size", "tokens per prefill chunk"),
        _count("context_length", "tokens"),
        _count("page_size", "tokens per KV page", 4096),
        _count("cuda_graph_max_bs_decode", "largest captured decode batch", 4096),
        _count(
            "speculative_num_steps",
            "draft steps",
            couples=("speculative_num_draft_tokens",),
            how="with speculative_eagle_topk 1, SGLang sets the draft tokens to steps + 1",
            sim_high=16,
            search_high=16,
        ),
        _count("speculative_eagle_topk", "draft branches per step", sim_high=16),
        _count("speculative_num_draft_tokens", "draft tokens", sim_high=64),
        _count("decode_log_interval", "decode iterations per batch line"),
        _count("tp_size", "GPUs per server", sim_high=1),  # one simulated GPU per server
    )
}
"""Every numeric flag gpufleet models, by dest."""

TUNED: tuple[str, ...] = (
    "mem_fraction_static",
    "max_mamba_cache_size",
    "mamba_full_memory_ratio",
    "max_running_requests",
)
"""The four knobs the operator tunes (the profile's first-class knobs, the form's inputs)."""
