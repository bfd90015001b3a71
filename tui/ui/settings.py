"""The operator's console settings: ``settings.toml`` in the configuration directory.

Only read, never written. Today it holds two keys::

    [console]
    readonly = true    # every console opens read-only unless --no-readonly is given
    bell = false       # no terminal bell when an alert fires (default: it rings)

A missing file means the defaults; a file that cannot be used is an error naming the file, the
key and what is allowed, so that a mistyped safety setting is never silently ignored. Tables other
than ``[console]`` are left to whoever reads them. No Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tui import paths
from tui.inputs import CONFIG_LIMIT, InputError, parse_toml, read_text


class SettingsError(ValueError):
    """The settings file cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """The ``[console]`` table of the settings file."""

    readonly: bool = False
    """Open every console read-only (``--readonly`` / ``--no-readonly`` override it)."""
    bell: bool = True
    """Ring the terminal bell when an alert newly fires (``tui.ui.alerts``)."""


CONSOLE_KEYS = ("readonly", "bell")
"""The keys ``[console]`` may have."""


def load_console_settings(path: Path | None = None) -> ConsoleSettings:
    """Read the ``[console]`` table.

    Args:
        path: The settings file; default ``paths.settings_file()``.

    Returns:
        The settings; the defaults when the file does not exist.

    Raises:
        SettingsError: the file cannot be read or parsed, ``[console]`` is not a table, has a key
            other than ``CONSOLE_KEYS`` or a value of the wrong type.
    """
    path = path or paths.settings_file()
    try:
        text = read_text(path, CONFIG_LIMIT, "a settings file")  # a FIFO or /dev/zero: refused
    except FileNotFoundError:
        return ConsoleSettings()
    except InputError as error:
        raise SettingsError(str(error)) from None
    try:
        document = parse_toml(text)
    except ValueError as error:
        raise SettingsError(f"{path}: not valid TOML ({error})") from None
    console = document.get("console", {})
    if not isinstance(console, dict):
        raise SettingsError(f"{path}: console must be a table ([console])")
    unknown = sorted(set(console) - set(CONSOLE_KEYS))
    if unknown:
        allowed = ", ".join(CONSOLE_KEYS)
        raise SettingsError(f"{path}: console.{unknown[0]} is not a setting (allowed: {allowed})")
    defaults = ConsoleSettings()
    flags = {key: console.get(key, getattr(defaults, key)) for key in CONSOLE_KEYS}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise SettingsError(f"{path}: console.{key} = {value!r}: must be true or false")
    return ConsoleSettings(**flags)


def resolve_readonly(flag: bool | None, path: Path | None = None) -> bool:
    """Whether the console opens read-only: the command line's flag, else the settings file.

    Args:
        flag: ``--readonly`` (True), ``--no-readonly`` (False) or neither (None).
        path: The settings file; default ``paths.settings_file()``.

    Returns:
        True for a read-only console.

    Raises:
        SettingsError: the flag was not given and the settings file cannot be used.
    """
    if flag is not None:
        return flag
    return load_console_settings(path).readonly
