"""Counted nouns in the operator's words: '1 canary', '3 canaries', never '1 canaries'.

Core and console alike (no Textual): the same count reads the same in the CLI, the journal and
the screens.
"""

from __future__ import annotations

from collections.abc import Iterable

IRREGULAR: dict[str, str] = {"canary": "canaries", "entry": "entries"}
"""Plurals that are not the noun plus 's'."""


def plural(noun: str, count: float) -> str:
    """``noun`` as ``count`` needs it: singular for exactly 1, else its plural.

    Args:
        noun: The singular ('canary', 'look', 'GPU').
        count: How many.

    Returns:
        'canary' for 1, 'canaries' for 0, 2 or 1.5.
    """
    if count == 1:
        return noun
    return IRREGULAR.get(noun, f"{noun}s")


def counted(count: object, noun: str) -> str:
    """``count`` and ``noun`` agreeing: '1 canary', '3 canaries', '0 looks'.

    Args:
        count: How many: a number, or text that names one ('3'); anything else (a dash for
            'unknown') is shown as it is, with the plural.
        noun: The singular.

    Returns:
        '<count> <noun or its plural>'.
    """
    try:
        number = float(count)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"{count} {plural(noun, 2)}"
    return f"{count} {plural(noun, number)}"


def spans(values: Iterable[int]) -> str:
    """``30000-30006``, ``25000,25002``: runs of three or more as a range, in order."""
    ordered = sorted(set(values))
    parts: list[str] = []
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            run = ordered[start:i]
            parts.append(f"{run[0]}-{run[-1]}" if len(run) >= 3 else ",".join(map(str, run)))
            start = i
    return ",".join(parts)


def gpus_words(gpus: Iterable[int]) -> str:
    """``GPU 3``, ``GPUs 0-6``, ``GPUs 0,2,5`` (``spans``); empty for no GPU."""
    distinct = set(gpus)
    return f"{plural('GPU', len(distinct))} {spans(distinct)}" if distinct else ""
