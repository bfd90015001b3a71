"""Typed reads of a config.json, each failure one line naming the field and the file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tui.sglang.modelcfg.errors import ModelConfigError

_REQUIRED: Any = object()


@dataclass(frozen=True, slots=True)
class ConfigView:
    """One level of a config (the root, or its ``text_config``), with where it came from."""

    data: dict[str, Any]
    """The JSON object."""
    source: str
    """The file, for error messages."""
    prefix: str = ""
    """``text_config.`` for a nested text config."""

    def has(self, name: str) -> bool:
        """True when ``name`` is present and not null."""
        return self.data.get(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        """The raw value, ``default`` when absent or null."""
        value = self.data.get(name)
        return default if value is None else value

    def integer(self, name: str, default: Any = _REQUIRED, why: str = "") -> int:
        """An integer field.

        Args:
            name: the key.
            default: used when absent or null; omitted: the field is required.
            why: what the planner needs it for (goes into the error).

        Raises:
            ModelConfigError: absent without a default, not an integer, negative, or zero when
                required (every field read is a count or a size, and a required one is a
                divisor or a loop bound: 0 would end in a ZeroDivisionError far from the file).
        """
        value = self.data.get(name)
        if value is None:
            if default is _REQUIRED:
                need = f" (needed for {why})" if why else ""
                raise ModelConfigError(f"{self.source}: {self.prefix}{name} missing{need}")
            return int(default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise ModelConfigError(
                f"{self.source}: {self.prefix}{name} = {value!r} is not an integer"
            )
        low = 1 if default is _REQUIRED else 0
        if value < low:
            raise ModelConfigError(
                f"{self.source}: {self.prefix}{name} = {value!r} must be at least {low}"
            )
        return int(value)

    def items(self, name: str) -> list[Any] | None:
        """A list field, None when absent.

        Raises:
            ModelConfigError: present but not a list.
        """
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, list):
            raise ModelConfigError(f"{self.source}: {self.prefix}{name} is not a list")
        return value

    def section(self, name: str) -> dict[str, Any]:
        """A nested object, {} when absent."""
        value = self.data.get(name)
        return value if isinstance(value, dict) else {}

    def need(self, name: str, why: str) -> ModelConfigError:
        """The error for a field that is missing or unusable."""
        return ModelConfigError(f"{self.source}: {self.prefix}{name} missing (needed for {why})")
