"""Counted nouns in the operator's words: '1 canary', '3 canaries', never '1 canaries'.

Core and console alike (no Textual): the same count reads the same in the CLI, the journal and
the screens.
"""

from __future__ import annotations

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
