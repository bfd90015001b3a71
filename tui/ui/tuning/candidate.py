"""The form's values -> a candidate profile, validated by the profile layer (pure, no Textual).

The profile validation (``tui.profiles.parse``) is the single source of truth: the form builds the
TOML document a profile file would hold, lets ``profile_from_dict`` judge it, and maps each
``Problem.field`` back to the input that holds the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tui.profiles import KNOBS, Problem, Profile, ProfileError, profile_from_dict, profile_to_dict
from tui.profiles.launch_args import flags_for
from tui.profiles.model import AUTO, FlagValue

EXTRA = "extra_flags"
"""Key of the extra-flags text area in problem maps."""
NAME = "name"
"""Key of the profile-name input in problem maps."""
GENERAL = "general"
"""Key of problems that belong to no single input."""

_LINE = re.compile(r"^--?(?P<name>[^\s=]+)(?:(?:\s+|=)(?P<value>.*))?$")
_PAIR = re.compile(r"^(?P<name>[^\s=]+)\s*=\s*(?P<value>.*)$")


@dataclass(frozen=True, slots=True)
class FormValues:
    """What the form's inputs hold, as typed."""

    knobs: tuple[tuple[str, str], ...]
    """(knob, text) for each of the four knobs; empty text = SGLang's automatic value."""
    extra_flags: str
    """Extra flags, one per line: ``--flag value``, ``--flag`` or ``key=value``."""
    name: str
    """Name for the new profile."""
    gpu: int | None
    """The GPU the change is for (a ``[gpu.N]`` override), or None for the whole fleet."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """The outcome of one validation: a profile, or the problems keyed by input."""

    profile: Profile | None
    """The candidate, when it is valid."""
    problems: dict[str, tuple[str, ...]]
    """Input key (a knob, ``extra_flags``, ``name`` or ``general``) -> messages."""


def parse_value(text: str) -> FlagValue:
    """Typed value of a field as written: int, then float, then true/false, else the string."""
    for kind in (int, float):
        try:
            return kind(text)  # type: ignore[no-any-return]
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def parse_extra_flags(text: str) -> tuple[list[tuple[str, FlagValue]], list[str]]:
    """Read the extra-flags lines.

    Args:
        text: One flag per line: ``--flag value``, ``--flag`` (a bare flag) or ``key=value``.

    Returns:
        The (name, value) pairs in order, and a message per line that fits no form.
    """
    flags: list[tuple[str, FlagValue]] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        match = _LINE.match(line) or _PAIR.match(line)
        if match is None:
            problems.append(
                f"extra_flags line {number} = {line!r}: expected '--flag value', '--flag' "
                "or 'key=value'"
            )
            continue
        value = match.group("value")
        flags.append((match.group("name"), True if value is None else parse_value(value.strip())))
    return flags, problems


def format_extra_flags(flags: tuple[tuple[str, FlagValue], ...]) -> str:
    """The inverse of ``parse_extra_flags``: ``--flag value`` lines (bare flags alone)."""
    lines = []
    for name, value in flags:
        flag = "--" + name.replace("_", "-")
        if value is True:
            lines.append(flag)
        elif value is not False:
            lines.append(f"{flag} {value}")
    return "\n".join(lines)


def initial_values(profile: Profile, gpu: int | None, name: str) -> FormValues:
    """The form pre-filled from the running profile (that GPU's resolved values for one GPU)."""
    if gpu is None:
        flags = profile.server
        extra = profile.server.extra_flags
    else:
        flags = flags_for(profile, gpu)
        override = profile.override_for(gpu)
        extra = override.extra_flags if override is not None else ()
    knobs = tuple((k, _text(getattr(flags, k))) for k in KNOBS)
    return FormValues(knobs, format_extra_flags(extra), name, gpu)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _field_key(field: str) -> str:
    parts = field.split(".")
    if field == "name":
        return NAME
    if EXTRA in parts or field.startswith(EXTRA):
        return EXTRA
    if parts[-1] in KNOBS:
        return parts[-1]
    return GENERAL


def build_candidate(running: Profile, values: FormValues) -> Candidate:
    """Apply the form's values to the running profile and validate the result.

    Args:
        running: The profile the fleet runs now (the form's starting point).
        values: The inputs as typed.

    Returns:
        The candidate profile, or every problem keyed by the input that holds the value.
    """
    problems: dict[str, list[str]] = {}
    extras, line_problems = parse_extra_flags(values.extra_flags)
    if line_problems:
        problems[EXTRA] = line_problems
    doc = profile_to_dict(running)
    doc["name"] = values.name.strip()
    doc["note"] = f"tuned in the console from {running.name}"
    typed = {
        k: (None if t.strip().lower() in ("", AUTO) else parse_value(t.strip()))
        for k, t in values.knobs
    }
    if values.gpu is None:
        _set_shared(doc, typed, extras)
    else:
        _set_override(doc, running, values.gpu, typed, extras)
    profile: Profile | None = None
    try:
        profile = profile_from_dict(doc, default_name=values.name, source="form")
    except ProfileError as error:
        for problem in error.problems:
            problems.setdefault(_field_key(problem.field), []).append(str(problem))
    if values.gpu is not None and values.gpu not in running.gpus:
        message = str(Problem("gpu", values.gpu, f"not in the profile's GPUs {list(running.gpus)}"))
        problems.setdefault(GENERAL, []).append(message)
    if problems:
        return Candidate(None, {k: tuple(v) for k, v in problems.items()})
    return Candidate(profile, {})


def _set_shared(
    doc: dict[str, Any], typed: Mapping[str, object], extras: list[tuple[str, FlagValue]]
) -> None:
    server: dict[str, Any] = doc.setdefault("server", {})
    for knob, value in typed.items():
        if value is None:
            server.pop(knob, None)
        else:
            server[knob] = value
    server.pop(EXTRA, None)
    if extras:
        server[EXTRA] = dict(extras)


def _set_override(
    doc: dict[str, Any],
    running: Profile,
    gpu: int,
    typed: Mapping[str, object],
    extras: list[tuple[str, FlagValue]],
) -> None:
    # Only what differs from the shared flags goes into [gpu.N], so the override says exactly
    # what this GPU does differently; the override's other fields are kept.
    table: dict[str, Any] = dict(doc.get("gpu", {}).get(str(gpu), {}))
    for knob, value in typed.items():
        shared = getattr(running.server, knob)
        if value == shared and not isinstance(value, bool):
            table.pop(knob, None)
        else:
            table[knob] = AUTO if value is None else value
    table.pop(EXTRA, None)
    if extras:
        table[EXTRA] = dict(extras)
    gpus = dict(doc.get("gpu", {}))
    if table:
        gpus[str(gpu)] = table
    else:
        gpus.pop(str(gpu), None)
    doc["gpu"] = gpus
    if not gpus:
        doc.pop("gpu")


def unique_name(base: str, taken: list[str] | tuple[str, ...]) -> str:
    """``base``, or ``base-2``, ``base-3``... whichever is not ``taken``."""
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def gpu_range(gpus: tuple[int, ...] | list[int]) -> str:
    """GPU indices in words: '0-6', '0, 2, 5', '3'."""
    ordered = sorted(set(gpus))
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(str(g) for g in ordered)
