"""What every ``gpufleet`` command shares about bad command-line input: one line, exit 2.

argparse's own error prints the whole usage block and then the message; a user (and a script
reading stderr) gets one line naming the option and what is allowed instead, plus a pointer to
``--help``. Number options use :func:`number`, which refuses NaN and infinities (``float()``
accepts ``nan``, and ``nan <= 0`` is False, so a plain range check lets it through).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit status 2."""

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
) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number in a range, with a message naming the range.

    Args:
        kind: ``int`` or ``float``.
        low: the smallest value (excluded when ``low_open``).
        high: the largest value.
        low_open: whether ``low`` itself is refused.

    Returns:
        The converter (argparse prefixes its message with the option's name).
    """
    if kind is int:
        allowed, noun = f"allowed range {int(low)}..{int(high)}", "not an integer"
    else:
        left = "(" if low_open else "["
        allowed, noun = f"allowed range {left}{low:g}, {high:g}]", "not a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text}: {noun}; {allowed}") from None
        below = value <= low if low_open else value < low
        if not math.isfinite(value) or below or value > high:
            raise argparse.ArgumentTypeError(f"{text}: {allowed}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse
