"""An argv's tokens as argparse reads them: flags (resolved, exact or by prefix), values, strays.

argparse decides and reports; this only says which token a verdict is about (its position, the
flag it resolves to), so a refusal can point at the profile field that wrote the token.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True, slots=True)
class Token:
    """One argv token as argparse will read it."""

    index: int
    """Position in argv."""
    text: str
    """The token."""
    role: Literal["flag", "value", "stray"]
    """An option string, a value consumed by the option before it, or neither."""
    action: argparse.Action | None
    """The action a flag resolves to (None: unknown or ambiguous)."""
    exact: bool
    """A flag spelled exactly as the parser defines it (not a prefix)."""


def looks_like_flag(text: str) -> bool:
    """Whether argparse reads ``text`` as an option string (not a value, not a negative number)."""
    return text.startswith("-") and text != "-" and not _NEGATIVE.match(text)


def resolve(parser: argparse.ArgumentParser, text: str) -> tuple[list[argparse.Action], bool]:
    """The actions a flag token may mean, and whether it is spelled exactly.

    As argparse matches options: the whole token, then the part before ``=``, then (long options,
    ``allow_abbrev``) every option it is a prefix of. Several actions: an ambiguous prefix.
    """
    options = parser._option_string_actions
    if text in options:
        return [options[text]], True
    name = text.split("=", 1)[0] if "=" in text else text
    if name in options:
        return [options[name]], True
    if not (text.startswith("--") and parser.allow_abbrev):
        return [], False
    found: dict[int, argparse.Action] = {}
    for option, action in options.items():
        if option.startswith(name):
            found.setdefault(id(action), action)
    return list(found.values()), False


def _values_wanted(nargs: int | str | None) -> int:
    """How many values argparse gives a flag: one (None, '?'), any (-1: '*', '+'), or N."""
    if isinstance(nargs, int):
        return nargs
    return 1 if nargs in (None, "?") else -1


def scan(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[Token]:
    """The tokens of ``argv``: flags (resolved as argparse would), their values, strays."""
    tokens: list[Token] = []
    i = 0
    while i < len(argv):
        text = argv[i]
        if text == "--":
            tokens += [Token(j, argv[j], "stray", None, False) for j in range(i, len(argv))]
            break
        if not looks_like_flag(text):
            tokens.append(Token(i, text, "stray", None, False))
            i += 1
            continue
        actions, exact = resolve(parser, text)
        action = actions[0] if len(actions) == 1 else None
        tokens.append(Token(i, text, "flag", action, exact))
        i += 1
        if action is None or "=" in text:
            continue
        wanted = _values_wanted(action.nargs)
        while wanted != 0 and i < len(argv) and not looks_like_flag(argv[i]):
            tokens.append(Token(i, argv[i], "value", action, False))
            i += 1
            if wanted > 0:
                wanted -= 1
    return tokens
