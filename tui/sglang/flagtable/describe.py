"""One action of SGLang's argparse parser as a flag-table row (``describe``).

Used by the generator on SGLang's own parser, and by the tests on the parser rebuilt from a table
(the two must describe alike). Only what the table can record faithfully passes: an unknown
action class or converter, or a value that came from a stand-in, is a ``GeneratorError``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tui.sglang.flagtable import stubs
from tui.sglang.flagtable.table import FlagSpec

ACTION_NAMES: dict[type, str] = {
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreConstAction: "store_const",
    argparse._AppendAction: "append",
    argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count",
    argparse._ExtendAction: "extend",
    argparse._HelpAction: "help",
    argparse._VersionAction: "version",
    argparse.BooleanOptionalAction: "boolean_optional",
}
"""argparse's action classes and the names the table records."""

SGLANG_ACTIONS: dict[str, tuple[str, ...]] = {
    "DeprecatedAction": ("error_message",),
    "DeprecatedStoreTrueAction": ("new_flag",),
    "DeprecatedStoreConstAction": ("new_flag", "const_value"),
    "DeprecatedAliasStoreAction": ("new_flag",),
    "LoRAPathAction": (),
}
"""SGLang's own action classes (``srt/arg_groups/argparse_actions.py``) and what each keeps."""

SGLANG_TYPES = (
    "human_readable_int",
    "json_list_type",
    "nullable_str",
    "parse_cuda_graph_backend_arg",
    "parse_cuda_graph_config_arg",
)
"""SGLang's own type converters that ``tui.sglang.flagtable.converters`` reproduces."""


_OWNERS = ("sglang.", "tui.sglang.flagtable.")
"""Modules whose converters and actions the table may name: SGLang's, and their reproductions
here (``describe`` reads a rebuilt parser too, to prove it matches the table)."""


class GeneratorError(RuntimeError):
    """SGLang's parser holds something the table cannot record faithfully."""


def _type_name(action: argparse.Action) -> str | None:
    kind = action.type
    if kind is None:
        return None
    if kind in (str, int, float):
        return kind.__name__  # type: ignore[union-attr]
    if kind is json.loads:
        return "json.loads"
    name = getattr(kind, "__name__", "")
    if getattr(kind, "__module__", "").startswith(_OWNERS) and name in SGLANG_TYPES:
        return str(name)
    raise GeneratorError(
        f"{'/'.join(action.option_strings)}: type {kind!r} has no converter in "
        "tui/sglang/flagtable/converters.py; add one, then SGLANG_TYPES here"
    )


def _action_name(action: argparse.Action) -> str:
    cls = type(action)
    if cls in ACTION_NAMES:
        return ACTION_NAMES[cls]
    if cls.__name__ in SGLANG_ACTIONS and cls.__module__.startswith(_OWNERS):
        return cls.__name__
    raise GeneratorError(f"{'/'.join(action.option_strings)}: unknown action class {cls!r}")


def _json_or_none(value: object) -> tuple[Any, str | None]:
    """(value, None) when JSON holds it unchanged; (None, repr) otherwise."""
    if isinstance(value, tuple):
        value = list(value)
    try:
        if json.loads(json.dumps(value)) == value:
            return value, None
    except (TypeError, ValueError):
        pass
    return None, repr(value)


def describe(action: argparse.Action) -> FlagSpec:
    """One action of SGLang's parser as a table row.

    Raises:
        GeneratorError: a type or action class without a reproduction, or a stand-in value.
    """
    name = _action_name(action)
    for what in ("choices", "default", "const"):
        if stubs.is_stub(getattr(action, what)):
            raise GeneratorError(f"{'/'.join(action.option_strings)}: {what} is a stand-in")
    choices: tuple[Any, ...] | None = None
    ordered = True
    if action.choices is not None:
        raw = action.choices
        ordered = not isinstance(raw, set | frozenset)
        items = list(raw) if ordered else sorted(raw, key=str)
        choices = tuple(items)
    default, default_repr = _json_or_none(action.default)
    const, const_repr = _json_or_none(action.const)
    if const_repr is not None:
        raise GeneratorError(f"{'/'.join(action.option_strings)}: const {const_repr} is not JSON")
    # 0.5.17's DeprecatedAction has no error_message: it always warns (as None does now).
    kwargs = {k: getattr(action, k, None) for k in SGLANG_ACTIONS.get(name, ())}
    for key, value in kwargs.items():
        if _json_or_none(value)[1] is not None:
            raise GeneratorError(f"{'/'.join(action.option_strings)}: {key} is not JSON")
    metavar = action.metavar
    return FlagSpec(
        option_strings=tuple(action.option_strings),
        dest=action.dest,
        action=name,
        type=_type_name(action),
        choices=choices,
        choices_ordered=ordered,
        nargs=action.nargs,
        const=const,
        default=default,
        default_repr=default_repr,
        required=bool(action.required),
        metavar=tuple(metavar) if isinstance(metavar, list | tuple) else metavar,
        help=action.help,
        action_kwargs=tuple(sorted(kwargs.items())),
    )
