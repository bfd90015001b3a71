"""An argparse parser rebuilt from the flag table, with SGLang's parser's exact semantics.

Same prog (``sglang serve``: ``prepare_server_args`` in ``srt/server_args.py`` names it so, for
``python -m sglang.launch_server`` too), same ``allow_abbrev`` (unique prefixes accepted,
ambiguous ones refused), same actions in the same order (so the same ``usage:`` text), same type
converters, same ``parse_args`` (``prepare_server_args`` never uses ``parse_known_args``: an
unknown flag is ``error: unrecognized arguments``, exit 2).

SGLang's own action classes (``srt/arg_groups/argparse_actions.py``) are reproduced here, under
their own names, with their nargs, const and default behaviour.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from typing import Any, NoReturn

from tui.sglang.flagtable.converters import converters
from tui.sglang.flagtable.table import FlagSpec, FlagTable

_DEFAULT_SUFFIX = " (default: %(default)s)"
_ACTION_LOG = logging.getLogger("sglang.srt.arg_groups.argparse_actions")


def _deprecated(parser: argparse.ArgumentParser, text: str) -> None:
    # SGLang's print_deprecated_warning: a yellow logger warning (logging is not configured yet
    # while parsing, so Python's last-resort handler writes it to stderr).
    if getattr(parser, "warn_deprecated", True):
        _ACTION_LOG.warning(f"\033[1;33m{text}\033[0m")


def _renamed(parser: argparse.ArgumentParser, option_string: str, new_flag: str | None) -> None:
    # SGLang's deprecated store actions, each its own copy of this warning.
    replacement = f" Use '{new_flag}' instead." if new_flag else ""
    _deprecated(
        parser,
        f"'{option_string}' is deprecated and will be removed in a future release.{replacement}",
    )


class DeprecatedAction(argparse.Action):
    """A retired flag: stops with ``error_message``, or warns when it has none."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        error_message: str | None = None,
        nargs: Any = 0,
        **kwargs: Any,
    ) -> None:
        self.error_message = error_message
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        if self.error_message is not None:
            parser.error(self.error_message)
        _deprecated(
            parser,
            f"The command line argument '{option_string}' is deprecated and "
            "will be removed in future versions.",
        )


class DeprecatedStoreTrueAction(argparse.Action):
    """A deprecated switch that still stores True, with a warning naming its replacement."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        new_flag: str | None = None,
        nargs: Any = 0,
        const: Any = True,
        default: Any = False,
        **kwargs: Any,
    ) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        _renamed(parser, option_string, self.new_flag)
        setattr(namespace, self.dest, True)


class DeprecatedStoreConstAction(argparse.Action):
    """A deprecated flag that stores one fixed value (``const_value``) in its replacement."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        new_flag: str | None = None,
        const_value: Any = None,
        nargs: Any = 0,
        default: Any = None,
        **kwargs: Any,
    ) -> None:
        self.new_flag = new_flag
        self.const_value = const_value
        super().__init__(option_strings, dest, nargs=nargs, default=default, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        _renamed(parser, option_string, self.new_flag)
        setattr(namespace, self.dest, self.const_value)


class DeprecatedAliasStoreAction(argparse.Action):
    """A renamed valued flag: keeps the value, warns, stores it under the new dest."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, new_flag: str | None = None, **kwargs: Any
    ) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        _renamed(parser, option_string, self.new_flag)
        setattr(namespace, self.dest, values)


class LoRAPathAction(argparse.Action):
    """``--lora-paths``: plain paths, or JSON objects with ``lora_name`` and ``lora_path``.

    As in SGLang, a malformed JSON object fails with an exception argparse does not catch (a
    traceback, exit 1), not with a usage error.
    """

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        lora_paths: list[Any] = []
        if values:
            assert isinstance(values, list), "Expected a list of LoRA paths."
            for lora_path in values:
                lora_path = lora_path.strip()
                if lora_path.startswith("{") and lora_path.endswith("}"):
                    obj = json.loads(lora_path)
                    assert "lora_path" in obj and "lora_name" in obj, (
                        f"{lora_path!r} looks like a JSON str, "
                        "but it does not contain 'lora_name' and 'lora_path' keys."
                    )
                    lora_paths.append(obj)
                else:
                    lora_paths.append(lora_path)
        setattr(namespace, self.dest, lora_paths)


SGLANG_ACTION_CLASSES: dict[str, type[argparse.Action]] = {
    cls.__name__: cls
    for cls in (
        DeprecatedAction,
        DeprecatedStoreTrueAction,
        DeprecatedStoreConstAction,
        DeprecatedAliasStoreAction,
        LoRAPathAction,
    )
}
"""SGLang's action classes by name, as the table records them."""


class SGLangArgumentParser(argparse.ArgumentParser):
    """argparse, printing SGLang's own usage even when a drop-in (the simulator) adds flags."""

    warn_deprecated: bool = True
    """Print SGLang's deprecation warnings while parsing, as SGLang does."""
    usage_actions: list[argparse.Action] | None = None
    """The actions the ``usage:`` text lists (SGLang's); None = every action."""

    def format_usage(self) -> str:
        """argparse's usage text over ``usage_actions``: byte for byte what SGLang prints."""
        formatter = self._get_formatter()
        actions = self._actions if self.usage_actions is None else self.usage_actions
        formatter.add_usage(self.usage, actions, self._mutually_exclusive_groups)
        return formatter.format_help()


def _kwargs(flag: FlagSpec, types: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The ``add_argument`` call that rebuilds one recorded action."""
    options = list(flag.option_strings)
    # argparse tests ``is SUPPRESS``: the string read back from JSON must become that object.
    help_text = argparse.SUPPRESS if flag.help == argparse.SUPPRESS else flag.help
    kw: dict[str, Any] = {"dest": flag.dest, "help": help_text}
    default = flag.default if flag.default_repr is None else None
    if default == argparse.SUPPRESS:
        default = argparse.SUPPRESS
    if flag.action in ("store_true", "store_false", "count"):
        kw |= {"action": flag.action, "default": default, "required": flag.required}
        return options, kw
    if flag.action in ("store_const", "append_const"):
        kw |= {"action": flag.action, "const": flag.const, "default": default}
        return options, kw | {"required": flag.required}
    if flag.action == "boolean_optional":
        options = [o for o in options if not o.startswith("--no-")]
        if isinstance(help_text, str) and help_text.endswith(_DEFAULT_SUFFIX):
            help_text = help_text[: -len(_DEFAULT_SUFFIX)]  # the action appends it again
        kw |= {"action": argparse.BooleanOptionalAction, "default": default, "help": help_text}
        kw |= {"required": flag.required, "metavar": flag.metavar}
        if flag.choices is not None:
            kw["choices"] = list(flag.choices)
        return options, kw
    action: Any = SGLANG_ACTION_CLASSES.get(flag.action, flag.action)
    if flag.action not in ("store", "append", "extend") and action is flag.action:
        raise ValueError(f"{options[0]}: action {flag.action!r} cannot be rebuilt")
    kw |= {"action": action, "nargs": flag.nargs, "default": default}
    kw |= {"required": flag.required, "metavar": flag.metavar}
    if flag.type is not None:
        kw["type"] = types[flag.type]
    if flag.choices is not None:
        kw["choices"] = list(flag.choices)
    if flag.const is not None:
        kw["const"] = flag.const
    kw |= dict(flag.action_kwargs)
    return options, kw


def add_table_arguments(parser: argparse.ArgumentParser, table: FlagTable) -> None:
    """Add every recorded action except ``-h`` (argparse adds it when ``add_help`` is on).

    Args:
        parser: a parser made with ``add_help=True``.
        table: the flag table.
    """
    types = converters(dict(table.type_data))
    for flag in table.flags:
        if flag.action == "help":
            continue
        options, kw = _kwargs(flag, types)
        parser.add_argument(*options, **kw)


def build_parser(
    table: FlagTable,
    *,
    raising: bool = False,
    warn_deprecated: bool = True,
    description: str | None = None,
) -> SGLangArgumentParser:
    """SGLang's launch parser, rebuilt from ``table``.

    A drop-in (the simulator) may add its own flags afterwards: the ``usage:`` line SGLang
    prints on an error keeps listing SGLang's flags only.

    Args:
        table: the flag table of one SGLang version.
        raising: build a ``RaisingParser`` (argparse's ``exit_on_error`` off): every error
            raises ``ParseFailure`` or ``argparse.ArgumentError`` instead of exiting.
        warn_deprecated: print SGLang's deprecation warnings while parsing.
        description: text for ``--help`` (SGLang's parser has none).

    Returns:
        The parser (``parse_args`` as SGLang calls it).
    """
    cls = RaisingParser if raising else SGLangArgumentParser
    parser = cls(
        prog=table.prog,
        allow_abbrev=table.allow_abbrev,
        exit_on_error=not raising,
        description=description,
    )
    parser.warn_deprecated = warn_deprecated
    add_table_arguments(parser, table)
    parser.usage_actions = list(parser._actions)
    return parser


class ParseFailure(Exception):
    """What a parser raises instead of exiting (see ``RaisingParser``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RaisingParser(SGLangArgumentParser):
    """A parser whose ``error()`` raises ``ParseFailure`` instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of exiting (the message is argparse's, without prog and usage)."""
        raise ParseFailure(message)
