"""The SGLang 0.5.23 flags the simulator models, with their ranges, as an argparse fragment.

Flags outside this set are accepted (SGLang has hundreds) and reported once as not modelled.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "MTP", "STANDALONE", "NGRAM", "DFLASH", "NONE")
"""``--speculative-algorithm`` values (NEXTN is an alias of EAGLE)."""

RADIX_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
"""``--mamba-radix-cache-strategy`` values (the old ``--mamba-scheduler-strategy`` lacks lazy)."""

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""``--log-level`` values."""


def ranged(
    kind: type, low: float | None, high: float | None, low_open: bool = False
) -> Callable[[str], object]:
    """An argparse ``type=`` converter that rejects values outside [low, high] with a clear error.

    Args:
        kind: int or float.
        low: smallest allowed value (None: unbounded).
        high: largest allowed value (None: unbounded).
        low_open: exclude ``low`` itself.

    Returns:
        The converter.
    """

    def convert(text: str) -> object:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        too_low = low is not None and (value <= low if low_open else value < low)
        too_high = high is not None and value > high
        if too_low or too_high or not math.isfinite(value):
            left = "(" if low_open else "["
            lo = "-inf" if low is None else low
            hi = "inf" if high is None else high
            raise argparse.ArgumentTypeError(f"{text} is out of range {left}{lo}, {hi}]")
        return value

    convert.__name__ = kind.__name__
    return convert


def add_sglang_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the modelled SGLang flags (SGLang's names and defaults) to ``parser``.

    Args:
        parser: the parser to extend.
    """
    g = parser.add_argument_group("SGLang flags (modelled)")
    g.add_argument("--model-path", "--model", default=None)
    g.add_argument("--served-model-name", default=None)
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=ranged(int, 0, 65535), default=30000)
    g.add_argument("--mem-fraction-static", type=ranged(float, 0.0, 1.0, low_open=True))
    g.add_argument("--max-mamba-cache-size", type=ranged(int, 1, None))
    g.add_argument(
        "--mamba-full-memory-ratio", type=ranged(float, 0.0, None, low_open=True), default=0.9
    )
    g.add_argument("--max-running-requests", type=ranged(int, 1, None))
    g.add_argument("--max-total-tokens", type=ranged(int, 1, None))
    g.add_argument("--chunked-prefill-size", type=ranged(int, 1, None))
    g.add_argument("--context-length", type=ranged(int, 1, None))
    g.add_argument("--page-size", type=ranged(int, 1, 4096))
    g.add_argument("--cuda-graph-max-bs", type=ranged(int, 1, 4096))
    g.add_argument("--speculative-algorithm", type=str.upper, choices=SPEC_ALGORITHMS)
    g.add_argument("--speculative-num-steps", type=ranged(int, 1, 16))
    g.add_argument("--speculative-eagle-topk", type=ranged(int, 1, 16))
    g.add_argument("--speculative-num-draft-tokens", type=ranged(int, 1, 64))
    g.add_argument("--mamba-radix-cache-strategy", choices=RADIX_STRATEGIES, default=None)
    g.add_argument(
        "--mamba-scheduler-strategy", choices=("auto", "no_buffer", "extra_buffer"), default=None
    )
    g.add_argument("--mamba-ssm-dtype", choices=("float32", "bfloat16", "float16"))
    g.add_argument("--disable-radix-cache", action="store_true")
    g.add_argument("--disable-overlap-schedule", action="store_true")
    g.add_argument("--enable-metrics", action="store_true")
    g.add_argument("--decode-log-interval", type=ranged(int, 1, None), default=40)
    g.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default="info")
    g.add_argument("--skip-server-warmup", action="store_true")
    g.add_argument("--trust-remote-code", action="store_true")
    g.add_argument("--tp-size", "--tp", type=ranged(int, 1, 1), default=1)


@dataclass(frozen=True, slots=True)
class UnmodelledFlags:
    """SGLang flags the simulator accepted without modelling them."""

    tokens: tuple[str, ...]
    """The raw tokens, in order."""

    def message(self) -> str | None:
        """The one warning line to print, or None when there were none."""
        if not self.tokens:
            return None
        return "Simulator: accepted but not modelled: " + " ".join(self.tokens)


def split_unknown(extras: list[str]) -> tuple[UnmodelledFlags, list[str]]:
    """Separate unknown ``--flags`` (kept, reported) from stray positional arguments (errors).

    Args:
        extras: what ``parse_known_args`` did not recognise.

    Returns:
        The unmodelled flags and the tokens that are not flags or flag values.
    """
    kept: list[str] = []
    stray: list[str] = []
    for i, token in enumerate(extras):
        if token.startswith("-"):
            kept.append(token)
        elif i > 0 and extras[i - 1].startswith("--") and "=" not in extras[i - 1]:
            kept.append(token)  # the value of an unknown flag
        else:
            stray.append(token)
    return UnmodelledFlags(tuple(kept)), stray
