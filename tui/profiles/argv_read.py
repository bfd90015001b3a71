"""One running server's command line read back into a profile's terms (``gpufleet adopt``).

The inverse of ``tui.profiles.launch_args``: which program it is (SGLang, by ``python -m
sglang.launch_server`` or ``sglang serve``, or gpufleet's simulator) and, flag by flag as SGLang's
own parser reads them (``tui.sglang.flagtable.tokens.scan`` over the release's flag table, or
the simulator's parser), what each becomes: a first-class field (the four knobs, the model,
the strategy, speculation: by the flag's destination, so ``--model`` is ``model_path``), the
fleet's host and port, the simulator's engine fields, or a pass-through flag under its full
name. Whatever a profile cannot hold is one line naming it, never dropped in silence: a stray
argument, a flag given twice (the last value is what SGLang used), a flag with several values,
an interpreter option.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from tui.profiles.model import SERVER_FIELDS, FlagValue
from tui.profiles.parse import RESERVED_EXTRA, server_rule
from tui.sglang.flagtable.table import PINNED_VERSION, known_versions
from tui.sglang.flagtable.tokens import Token, scan

EngineKind = Literal["sglang", "sim"]

SIM_ENGINE_FLAGS = {"--sim-gpu": "sim_gpu", "--sim-speed": "sim_speed", "--sim-model": "sim_model"}
"""The simulator's flags a profile keeps as ``[engine]`` fields (``launch_args`` writes them)."""
LEGACY_STRATEGY = "--mamba-scheduler-strategy"
"""The pre-rename spelling of ``--mamba-radix-cache-strategy`` (``engine.legacy_mamba_flag``)."""


@dataclass(frozen=True, slots=True)
class Launch:
    """The program part of a server's argv."""

    kind: EngineKind
    """SGLang or the simulator."""
    python: str
    """argv[0], the interpreter ("" when the argv starts with the program itself)."""
    flags: tuple[str, ...]
    """Everything after the program: the flags."""
    interpreter_options: tuple[str, ...] = ()
    """Options between the interpreter and ``-m`` (``-u``, ``-X ...``): a profile has no place
    for them."""


def split_launch(argv: Sequence[str]) -> Launch | None:
    """Which program ``argv`` runs and its flags (None: not an SGLang or simulated server).

    Args:
        argv: A process's command line.
    """
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[i + 1] == "sglang.launch_server":
            return Launch("sglang", argv[0], tuple(argv[i + 2 :]), tuple(argv[1:i]))
        if arg == "-m" and argv[i + 1] == "tui" and i + 2 < len(argv) and argv[i + 2] == "sim":
            return Launch("sim", argv[0], tuple(argv[i + 3 :]), tuple(argv[1:i]))
        base = os.path.basename(arg)
        if (base, argv[i + 1]) in (("sglang", "serve"), ("gpufleet", "sim")):
            kind: EngineKind = "sglang" if base == "sglang" else "sim"
            python = argv[0] if i > 0 else ""
            return Launch(kind, python, tuple(argv[i + 2 :]), tuple(argv[1:i]))
    return None


@functools.cache
def _sim_parser(build: str | None) -> argparse.ArgumentParser:
    from tui.sim.parser import build_parser

    return build_parser(raising=True, build=build)


def flag_parser(
    kind: EngineKind, release: str | None, flags: Sequence[str] = ()
) -> argparse.ArgumentParser:
    """The parser that read these flags: SGLang's of ``release`` (the newest table when it has
    none), or the simulator's for its ``--sim-build``."""
    if kind == "sim":
        from tui.sim.parser import requested_build

        return _sim_parser(requested_build(list(flags)))
    from tui.sglang.flagtable.check import sglang_checker

    version = release if release in known_versions() else PINNED_VERSION
    return sglang_checker(version).parser


@dataclass
class ReadFlags:
    """One server's flags in a profile's terms, in argv order."""

    server: dict[str, FlagValue] = field(default_factory=dict)
    """First-class ``[server]`` fields, typed as the profile types them."""
    extra: dict[str, FlagValue] = field(default_factory=dict)
    """Pass-through flags by their full name in snake_case (a switch is True)."""
    engine: dict[str, FlagValue] = field(default_factory=dict)
    """The simulator's ``[engine]`` fields (sim_gpu, sim_speed, sim_model)."""
    host: str | None = None
    """``--host``, when given."""
    port: str | None = None
    """``--port``, when given."""
    legacy_mamba_flag: bool = False
    """The strategy was given as ``--mamba-scheduler-strategy``."""
    lines: list[str] = field(default_factory=list)
    """What a profile cannot hold, one line each."""
    explained: set[str] = field(default_factory=set)
    """The parser destinations a line already speaks of."""


def _full_option(token: Token) -> str:
    name = token.text.split("=", 1)[0]
    assert token.action is not None
    if token.exact:
        return name
    return next(o for o in token.action.option_strings if o.startswith(name))


def _typed(name: str, text: str) -> FlagValue:
    """A first-class field's value as the profile types it (ValueError when it is not)."""
    kind = server_rule(name)[0]
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    return text


def _plain(text: str) -> FlagValue:
    """A pass-through value: an integer or a float when it reads back exactly, else the text."""
    try:
        if str(int(text)) == text:
            return int(text)
    except ValueError:
        pass
    try:
        if repr(float(text)) == text:
            return float(text)
    except ValueError:
        pass
    return text


def _groups(tokens: list[Token]) -> list[tuple[Token, list[str]]]:
    """Each flag with the values argparse gives it; a stray argument is a group of its own."""
    groups: list[tuple[Token, list[str]]] = []
    for token in tokens:
        if token.role == "value" and groups:
            groups[-1][1].append(token.text)
        elif token.role == "flag" and "=" in token.text:
            groups.append((token, [token.text.split("=", 1)[1]]))
        else:
            groups.append((token, []))
    return groups


def read_flags(parser: argparse.ArgumentParser, flags: Sequence[str], who: str) -> ReadFlags:
    """Read one server's flags.

    Args:
        parser: The parser that read them (``flag_parser``).
        flags: The flags (``Launch.flags``).
        who: How the lines name the server ("port 30003").

    Returns:
        The profile's view of them, with a line for each thing it cannot hold.
    """
    out = ReadFlags()
    seen: set[str] = set()
    for token, values in _groups(scan(parser, list(flags))):
        if token.role != "flag":
            out.lines.append(f"{who}: argument {token.text!r} belongs to no flag: not kept")
            out.explained.add("*")  # a stray argument: whatever it did is said
            continue
        if token.action is None:  # a flag this release's table does not know: kept as written
            option, dest = token.text.split("=", 1)[0], ""
        else:
            option, dest = _full_option(token), token.action.dest
        if option in seen:
            out.explained.add(dest)
            out.lines.append(
                f"{who}: {option} is given more than once: the last value, the one SGLang "
                "used, is kept"
            )
        seen.add(option)
        if len(values) > 1:
            out.explained.add(dest)
            out.lines.append(
                f"{who}: {option} has {len(values)} values ({' '.join(values)}); a profile "
                "holds one value per flag: not kept"
            )
            continue
        value: FlagValue = values[0] if values else True
        _place(out, option, dest, value, who)
    return out


def _place(out: ReadFlags, option: str, dest: str, value: FlagValue, who: str) -> None:
    key = option.lstrip("-").replace("-", "_")
    if dest in ("host", "port") and isinstance(value, str):
        setattr(out, dest, value)
        return
    if option in SIM_ENGINE_FLAGS and isinstance(value, str):
        name = SIM_ENGINE_FLAGS[option]
        out.engine[name] = float(value) if name == "sim_speed" else value
        return
    if dest in SERVER_FIELDS and isinstance(value, str):
        try:
            out.server[dest] = _typed(dest, value)
        except ValueError:
            out.explained.add(dest)
            out.lines.append(f"{who}: {option} {value}: not a value a profile takes: not kept")
            return
        out.legacy_mamba_flag |= option == LEGACY_STRATEGY
        return
    if key in RESERVED_EXTRA:
        out.explained.add(dest)
        out.lines.append(f"{who}: {option}: not kept ({RESERVED_EXTRA[key]})")
        return
    out.extra[key] = _plain(value) if isinstance(value, str) else value
