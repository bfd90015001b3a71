"""Values and ``key: value`` parts of SGLang's log lines, shared by the parser's rules."""

from __future__ import annotations

import re
from functools import lru_cache

from tui.logs.events import FieldValue

Fields = dict[str, FieldValue]

_UNIT = re.compile(r"\s*\([^)]*\)")
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")

_KEY_ALIASES = {
    "token": "tokens",
    "full_token": "tokens",
    "full_token_usage": "token_usage",
    "npu_graph": "cuda_graph",
    "cpu_graph": "cuda_graph",
    "musa_graph": "cuda_graph",
    # v0.1 ``new fill batch`` spellings.
    "seq": "new_seq",
    "remaining_req": "queue_req",
    "tree_cache_hit_rate": "cache_hit_rate",
}


@lru_cache(maxsize=512)
def norm_key(raw: str) -> str:
    """``'#full token'`` -> ``'tokens'``, ``'gen throughput (token/s)'`` -> ``'gen_throughput'``."""
    key = _UNIT.sub("", raw).strip().lstrip("#")
    key = _NON_WORD.sub("_", key).strip("_").lower()
    return _KEY_ALIASES.get(key, key)


def value(raw: str) -> FieldValue:
    """A printed value as its type: ``True``/``False``, an int, a float (``80.82%`` -> 80.82),
    else the text."""
    text = raw.strip().rstrip(".").strip()
    if text in ("True", "False"):
        return text == "True"
    number = text[:-1] if text.endswith("%") else text
    # A dot never parses as an int: try float first then (half a batch line's values are
    # fractions, and each failed int() raised and caught costs more than the parse).
    if "." not in number:
        try:
            return int(number)
        except ValueError:
            pass
    try:
        return float(number)
    except ValueError:
        return text


def pairs(body: str, separator: str) -> Fields:
    """Parse ``key: value`` parts; parts without a colon (or an odd key) are ignored."""
    out: Fields = {}
    for part in body.split(separator):
        key, colon, raw = part.partition(":")
        if not colon:
            continue
        name = norm_key(key)
        if name and (name[0].isalpha() or name[0] == "_") and name not in out:
            out[name] = value(raw)
    return out


def gb(pattern: str) -> re.Pattern[str]:
    """A regex for ``<pattern> X GB`` capturing X."""
    return re.compile(pattern + r"\s*([-\d.]+)\s*GB")


def put(out: Fields, name: str, pattern: re.Pattern[str], text: str) -> None:
    """Set ``out[name]`` to the first group ``pattern`` finds in ``text`` (nothing if none)."""
    match = pattern.search(text)
    if match:
        out[name] = value(next(g for g in match.groups() if g is not None))
