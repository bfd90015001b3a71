"""What every ``gpufleet`` command shares about bad command-line input: one line, exit 2.

argparse's own error prints the whole usage block and then the message; a user (and a script
reading stderr) gets one line naming the option and what is allowed instead, plus a pointer to
``--help``. Number options use :func:`number`, which refuses NaN and infinities (``float()``
accepts ``nan``, and ``nan <= 0`` is False, so a plain range check lets it through).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn


def _plain(value: float) -> str:
    """1000000 rather than 1e+06; 0.5 as 0.5."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def plain_text(doc: str | None) -> str | None:
    """A docstring as ``--help`` shows it: RST roles and literals as plain words.

    Double-backquoted literals lose their backquotes; ``:class:`~a.X``` becomes ``a.X``.
    """
    if doc is None:
        return None
    text = re.sub(r":[a-z]+:`~?([^`]*)`", r"\1", doc)
    return re.sub(r"``([^`]*)``", r"\1", text)


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit status 2, and whose
    description (often the command module's docstring) shows without RST markup."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("description"), str):
            kwargs["description"] = plain_text(kwargs["description"])
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: MESSAGE (see PROG --help)`` and exit 2."""
        flat = " ".join(message.split())
        sys.stderr.write(f"{self.prog}: {flat} (see {self.prog} --help)\n")
        raise SystemExit(2)


def number(
    kind: Callable[[str], float] | type[int],
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number in a range, with a message naming the range.

    Args:
        kind: ``int`` or ``float``.
        low: the smallest value (excluded when ``low_open``).
        high: the largest value (excluded when ``high_open``).
        low_open: whether ``low`` itself is refused.
        high_open: whether ``high`` itself is refused.

    Returns:
        The converter (argparse prefixes its message with the option's name).
    """
    if kind is int:
        allowed, noun = f"allowed range {int(low)}..{int(high)}", "not an integer"
    else:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        allowed = f"allowed range {left}{_plain(low)}, {_plain(high)}{right}"
        noun = "not a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text}: {noun}; {allowed}") from None
        below = value <= low if low_open else value < low
        above = value >= high if high_open else value > high
        if not math.isfinite(value) or below or above:
            raise argparse.ArgumentTypeError(f"{text}: {allowed}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


SECONDS = number(float, 0, 10.0**6, low_open=True)
"""A duration option: seconds in (0, 10^6]."""
SECONDS_OR_ZERO = number(float, 0, 10.0**6)
"""A duration option that may be 0: seconds in [0, 10^6]."""
GPU_INDEX = number(int, 0, 1023)
"""A GPU index option."""


def numbers_list(text: str, option: str, low: int, high: int) -> tuple[int, ...]:
    """'0,2,5', '30000-30006' or both ('0-2,5') -> the numbers, in the order given.

    Args:
        text: The option's value.
        option: Its name, for the message.
        low: The smallest number allowed.
        high: The largest.

    Raises:
        argparse.ArgumentTypeError: one line naming the option and what is allowed (a bound is
            checked before a range is expanded: ``1-999999999`` is refused, not listed).
    """
    values: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            a, b = int(first), int(last or first)
            if b < a:
                raise ValueError
            if not (low <= a and b <= high):
                raise argparse.ArgumentTypeError(f"{option}: {text!r}: allowed range {low}..{high}")
            values.extend(range(a, b + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{option}: {text!r} is not a list like 0,2,5 or a range like 0-6"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError(f"{option}: {text!r}: allowed range {low}..{high}")
    return tuple(values)
