"""Profile problems: every one is collected and reported, each naming field, value and range."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a profile."""

    field: str
    """Dotted field name, e.g. ``gpu.5.mem_fraction_static``."""
    value: object
    """The offending value as written (None when the field is missing)."""
    message: str
    """What is allowed, e.g. ``must be in (0, 1)``."""

    def __str__(self) -> str:
        shown = repr(self.value)
        if len(shown) > 120:  # a pasted blob is named, not echoed whole
            shown = shown[:100] + f"... ({len(shown)} characters)"
        return f"{self.field} = {shown}: {self.message}"


class ProfileError(ValueError):
    """A profile that cannot be used; ``problems`` lists every reason, not just the first."""

    def __init__(self, problems: list[Problem], source: str = "profile") -> None:
        self.problems = list(problems)
        self.source = source
        if len(self.problems) == 1:
            only = self.problems[0]
            # One problem, one line; the file itself unusable (unreadable, not TOML) is named once.
            super().__init__(f"{source}: {only.message if only.field == 'file' else only}")
            return
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s)\n{lines}")
