"""The SGLang 0.5.23 flags the simulator models: their ranges, and which flags it does not model.

Which flags exist and how each parses (type, choices, nargs, prefixes) is SGLang's own table
(``tui.sglang.flagtable``): the simulator parses its argv with the parser rebuilt from it. This
module holds only what the simulator adds on top: the values it can simulate (a range per
modelled flag, checked after parsing) and the flags it accepts without modelling them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tui.sglang.flagtable.table import load_table
from tui.sglang.flagtable.tokens import scan


@dataclass(frozen=True, slots=True)
class Range:
    """The values of one modelled flag the simulator can simulate."""

    kind: type
    """int or float."""
    low: float | None
    """Smallest allowed value (None: unbounded)."""
    high: float | None
    """Largest allowed value (None: unbounded)."""
    low_open: bool = False
    """Exclude ``low`` itself."""

    def contains(self, value: float) -> bool:
        """Whether ``value`` is inside the range."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    def text(self) -> str:
        """The range as ``[low, high]`` / ``(low, high]``."""
        left = "(" if self.low_open else "["
        lo = "-inf" if self.low is None else self.low
        hi = "inf" if self.high is None else self.high
        return f"{left}{lo}, {hi}]"


RANGES: dict[str, Range] = {
    "port": Range(int, 0, 65535),
    "mem_fraction_static": Range(float, 0.0, 1.0, low_open=True),
    "max_mamba_cache_size": Range(int, 1, None),
    "mamba_full_memory_ratio": Range(float, 0.0, None, low_open=True),
    "max_running_requests": Range(int, 1, None),
    "max_total_tokens": Range(int, 1, None),
    "chunked_prefill_size": Range(int, 1, None),
    "context_length": Range(int, 1, None),
    "page_size": Range(int, 1, 4096),
    "cuda_graph_max_bs_decode": Range(int, 1, 4096),
    "speculative_num_steps": Range(int, 1, 16),
    "speculative_eagle_topk": Range(int, 1, 16),
    "speculative_num_draft_tokens": Range(int, 1, 64),
    "decode_log_interval": Range(int, 1, None),
    "tp_size": Range(int, 1, 1),  # one simulated GPU per server
}
"""Numeric flags the simulator models (by dest), and the values it can simulate."""

MODELLED: frozenset[str] = frozenset(RANGES) | {
    "model_path",
    "served_model_name",
    "host",
    "speculative_algorithm",
    "mamba_radix_cache_strategy",
    "mamba_ssm_dtype",
    "disable_radix_cache",
    "disable_overlap_schedule",
    "disable_cuda_graph",
    "load_format",
    "enable_metrics",
    "log_level",
    "skip_server_warmup",
    "trust_remote_code",
}
"""Every SGLang flag (by dest) the simulator models; SGLang accepts the others, it ignores them."""


def out_of_range(args: argparse.Namespace) -> str | None:
    """The first modelled value the simulator cannot simulate, as a usage error, or None.

    Args:
        args: the namespace SGLang's parser produced.

    Returns:
        e.g. ``argument --mem-fraction-static: 1.5 is out of range (0.0, 1.0]``.
    """
    for dest, allowed in RANGES.items():
        value = getattr(args, dest, None)
        if isinstance(value, int | float) and not allowed.contains(value):
            flag = "--" + dest.replace("_", "-")
            return f"argument {flag}: {value} is out of range {allowed.text()}"
    return None


def ranged(
    kind: type, low: float | None, high: float | None, low_open: bool = False
) -> Callable[[str], object]:
    """An argparse ``type=`` converter that rejects values outside [low, high] with a clear error.

    For the simulator's own ``--sim-*`` flags (SGLang's flags keep SGLang's converters).

    Args:
        kind: int or float.
        low: smallest allowed value (None: unbounded).
        high: largest allowed value (None: unbounded).
        low_open: exclude ``low`` itself.

    Returns:
        The converter.
    """
    allowed = Range(kind, low, high, low_open)

    def convert(text: str) -> object:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        if not math.isfinite(value) or not allowed.contains(value):  # NaN slips past < and >
            raise argparse.ArgumentTypeError(f"{text} is out of range {allowed.text()}")
        return value

    convert.__name__ = kind.__name__
    return convert


@dataclass(frozen=True, slots=True)
class UnmodelledFlags:
    """SGLang flags the simulator accepted without modelling them."""

    tokens: tuple[str, ...]
    """The raw tokens (flags and their values), in order."""

    def message(self) -> str | None:
        """The one warning line to print, or None when there were none."""
        if not self.tokens:
            return None
        return "Simulator: accepted but not modelled: " + " ".join(self.tokens)


def unmodelled(parser: argparse.ArgumentParser, argv: Sequence[str]) -> UnmodelledFlags:
    """The flags of ``argv`` (with their values) that SGLang defines but the simulator ignores.

    Args:
        parser: the simulator's parser.
        argv: its arguments, already accepted by it.

    Returns:
        The unmodelled tokens, in order (the simulator's own ``--sim-*`` flags are modelled).
    """
    sglang = load_table().by_dest()  # the simulator's own flags are not SGLang's: modelled
    kept = []
    for token in scan(parser, argv):
        action = token.action
        if action is None or action.dest in MODELLED or action.dest not in sglang:
            continue
        if action.dest != "help":
            kept.append(token.text)
    return UnmodelledFlags(tuple(kept))


def names_option(parser: argparse.ArgumentParser, argv: Sequence[str], dest: str) -> bool:
    """Whether ``argv`` gives the flag storing into ``dest`` (under any spelling or prefix)."""
    return any(t.role == "flag" and t.action and t.action.dest == dest for t in scan(parser, argv))
