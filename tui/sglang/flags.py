"""The SGLang 0.5.23 flags the simulator models: their ranges, and which flags it does not model.

Which flags exist and how each parses (type, choices, nargs, prefixes) is SGLang's own table
(``tui.sglang.flagtable``): the simulator parses its argv with the parser rebuilt from it. This
module holds only what the simulator adds on top: the values it can simulate (each numeric
modelled flag's row of ``tui.sglang.knobs``, checked after parsing) and the flags it accepts
without modelling them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tui.sglang.flagtable.table import load_table
from tui.sglang.flagtable.tokens import scan
from tui.sglang.knobs import KNOB_TABLE, Range

MODELLED: frozenset[str] = frozenset(KNOB_TABLE) | {
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
        e.g. ``argument --mem-fraction-static: 1.5 is out of range (0, 1)``.
    """
    for knob in KNOB_TABLE.values():
        value = getattr(args, knob.name, None)
        allowed = knob.simulated()
        if isinstance(value, int | float) and not allowed.contains(value):
            return f"argument {knob.flag}: {value} is out of range {allowed.interval()}"
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
        if not allowed.contains(value):
            raise argparse.ArgumentTypeError(f"{text} is out of range {allowed.interval()}")
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
