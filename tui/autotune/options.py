"""What a search is asked to do (knobs, ranges, budget) and how it ended: one parser and
validator for both doors.

``gpufleet autotune start`` (``--knob``, ``--wall``, ``--explore-gpu-seconds``,
``--max-regression``, ``--config FILE.toml``) and the console's form
(``tui.ui.autotune.form_screen``) parse through the functions here; the form then starts the
search by handing ``request_argv`` to the CLI, which parses it again here, so the two doors
cannot accept different things. Every error is one line naming the field and the allowed range
(``OptionsError``); nothing starts on one.

A knob's values are a list (``NAME=V1,V2``) or a range (``NAME=LOW:HIGH:STEP``: LOW, LOW+STEP,
... up to HIGH; ``NAME=LOW:HIGH`` without a step: the knob's default values within the range
plus its two ends, so the form's untouched range is exactly the default list).

The config file::

    [knobs.max_running_requests]   # only the knobs named here are searched
    low = 16
    high = 48
    step = 8
    [knobs.mem_fraction_static]
    values = [0.86, 0.88, 0.9]
    [knobs.speculative_num_steps]
    enabled = false                # named, but not searched
    [budget]
    wall = "2h"                    # seconds, or with s / m / h
    explore_gpu_seconds = 900
    max_regression = "20%"         # a fraction or a percentage

Flags given on the command line win over the file's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.autotune.budget import Budget, Spent
from tui.autotune.record import CandidateRecord
from tui.autotune.space import KNOBS, KnobValue, SearchSpace
from tui.inputs import CONFIG_LIMIT, InputError, parse_toml, read_text
from tui.rollout.canary import CanaryOptions
from tui.rollout.rollout import RolloutOptions


class SearchRefused(RuntimeError):
    """The search cannot start (another one runs, too few GPUs, a mixed fleet); nothing ran."""


class OptionsError(ValueError):
    """A bad knob, range or budget value; the message is one line naming the field and what is
    allowed."""


MAX_VALUES = 32
"""Most values one knob may take (a range with a tiny step is refused, not searched)."""

WALL_MAX_S = 10.0**7
"""The largest wall-time budget, seconds (about 16 weeks)."""
EXPLORE_MAX_GPU_S = 10.0**9
"""The largest exploration budget, GPU-seconds."""


@dataclass(frozen=True, slots=True)
class AutotuneOptions:
    """What to search, within which budget, and how each step measures."""

    space: SearchSpace = field(default_factory=SearchSpace.default)
    """Knobs and their values."""
    budget: Budget = field(default_factory=Budget)
    """Wall time, exploration GPU-seconds, largest regression."""
    gpu: int | None = None
    """The canary GPU (default: the lowest running GPU)."""
    canary: CanaryOptions = field(default_factory=CanaryOptions)
    """How each canary measures."""
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    """How a winner is rolled out."""
    mean_output_tokens: int = 2500
    """The job's mean output length (the cheap model's KV room per request)."""
    poll_s: float = 0.25
    """How often control requests (and a held operation lock) are read while waiting."""
    lock_wait_s: float = 900.0
    """Longest a step waits for another operation to release the fleet's operation lock
    before the search fails (naming that operation)."""
    max_ttft_p90_s: float | None = None
    """A candidate whose canary window's TTFT p90 exceeds this (seconds) is rejected, whatever
    its throughput; one whose TTFT p90 could not be measured too (the limit cannot be shown
    kept). None: no limit."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """How a search ended."""

    phase: str
    """finished, stopped or failed."""
    reason: str
    """Why, in words."""
    incumbent: str
    """The profile every GPU runs at the end."""
    records: tuple[CandidateRecord, ...]
    """Every candidate considered."""
    spent: Spent
    """What it spent."""
    stale: dict[str, Any] | None = None
    """The status of an earlier search that died, found at start."""


# --- knobs ------------------------------------------------------------------------------------


def _number(field_name: str, text: object, kind: type, allowed: str) -> KnobValue:
    """``text`` as an int or float, or an OptionsError naming the field and the range."""
    what = "an integer" if kind is int else "a number"
    if isinstance(text, bool):
        raise OptionsError(f"{field_name} {text!r}: not {what}; allowed range {allowed}")
    try:
        if kind is int and isinstance(text, float) and text.is_integer():
            text = int(text)
        value: KnobValue = kind(str(text).strip())
    except ValueError:
        raise OptionsError(f"{field_name} {text!r}: not {what}; allowed range {allowed}") from None
    if not math.isfinite(value):
        raise OptionsError(f"{field_name} {text!r}: allowed range {allowed}")
    return value


def _knob_value(name: str, part: str, text: object) -> KnobValue:
    knob = KNOBS[name]
    value = _number(f"{name}.{part}", text, knob.kind, knob.allowed())
    if not knob.admits(float(value)):
        raise OptionsError(f"{name}.{part} {value:g}: allowed range {knob.allowed()}")
    return value


def _check_name(name: str) -> None:
    if name not in KNOBS:
        raise OptionsError(f"knob {name!r}: unknown (allowed: {', '.join(KNOBS)})")


def knob_values(name: str, values: Sequence[object]) -> tuple[KnobValue, ...]:
    """A knob's list of values, each checked against its range, sorted, duplicates dropped.

    Raises:
        OptionsError: an unknown knob, a value outside its range, none or too many values.
    """
    _check_name(name)
    out = sorted({_knob_value(name, "values", v) for v in values})
    if not out:
        raise OptionsError(f"{name}.values: empty; give 1 to {MAX_VALUES} values")
    if len(out) > MAX_VALUES:
        raise OptionsError(f"{name}.values: {len(out)} values; at most {MAX_VALUES}")
    return tuple(out)


def knob_range(name: str, low: object, high: object, step: object = None) -> tuple[KnobValue, ...]:
    """A knob's values from a range: LOW, LOW+STEP, ... up to HIGH (both ends included when
    the step lands on HIGH); without a step, the knob's default values within [LOW, HIGH]
    plus both ends.

    Args:
        name: The knob.
        low: The smallest value (text or number).
        high: The largest value.
        step: The step (None or blank: the default values in the range).

    Returns:
        The sorted values.

    Raises:
        OptionsError: an unknown knob, a value outside its range, LOW > HIGH, a step <= 0, or
            more than ``MAX_VALUES`` values (each naming the field).
    """
    _check_name(name)
    knob = KNOBS[name]
    lo, hi = _knob_value(name, "low", low), _knob_value(name, "high", high)
    if lo > hi:
        raise OptionsError(f"{name}.low {lo:g} is above {name}.high {hi:g}")
    if step is None or (isinstance(step, str) and not step.strip()):
        inside = {v for v in knob.default_values if lo <= v <= hi}
        return tuple(sorted(inside | {lo, hi}))
    span = "an integer >= 1" if knob.kind is int else f"a number in (0, {hi - lo:g}]"
    st = _number(f"{name}.step", step, knob.kind, span if hi > lo else "> 0")
    if st <= 0:
        raise OptionsError(f"{name}.step {st:g}: must be > 0 ({span})")
    count = math.floor((hi - lo) / st + 1e-9) + 1
    if count > MAX_VALUES:
        raise OptionsError(
            f"{name}.step {st:g}: gives {count} values from {lo:g} to {hi:g}; "
            f"at most {MAX_VALUES} (use a step >= {(hi - lo) / (MAX_VALUES - 1):.3g})"
        )
    values = [knob.kind(round(lo + i * st, 9)) for i in range(count)]
    return tuple(sorted(set(values)))


_SPEC = re.compile(r"^([a-z_]+)=(.+)$")


def parse_knob(text: str) -> tuple[str, tuple[KnobValue, ...]]:
    """A ``--knob`` option: 'NAME=V1,V2,...' or 'NAME=LOW:HIGH[:STEP]'.

    Raises:
        OptionsError: a malformed spec, an unknown knob or a bad value (naming it).
    """
    match = _SPEC.match(text.strip())
    if match is None:
        raise OptionsError(
            f"--knob {text!r}: expected NAME=V1,V2,... or NAME=LOW:HIGH[:STEP] "
            f"(knobs: {', '.join(KNOBS)})"
        )
    name, raw = match.groups()
    _check_name(name)
    if ":" in raw:
        parts = raw.split(":")
        if len(parts) not in (2, 3):
            raise OptionsError(f"--knob {text!r}: a range is LOW:HIGH or LOW:HIGH:STEP")
        return name, knob_range(name, *parts)
    return name, knob_values(name, raw.split(","))


def default_range(name: str) -> tuple[KnobValue, KnobValue]:
    """The (low, high) a knob's default values span (the form's pre-filled range)."""
    values = KNOBS[name].default_values
    return min(values), max(values)


def space_of(specs: Sequence[tuple[str, tuple[KnobValue, ...]]]) -> SearchSpace:
    """A space from parsed knob specs, in knob order (a knob named twice: the last wins).

    Raises:
        OptionsError: no knob at all.
    """
    chosen = dict(specs)
    if not chosen:
        raise OptionsError(f"knobs: none turned on; turn on at least one of {', '.join(KNOBS)}")
    return SearchSpace(tuple((k, chosen[k]) for k in KNOBS if k in chosen))


# --- the budget ---------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*([0-9.eE+-]+)\s*([smh]?)\s*$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_wall(text: object) -> float:
    """The wall-time budget: seconds, or a number with s, m or h ('90m', '4h').

    Raises:
        OptionsError: not a duration, or outside (0, 10^7] seconds.
    """
    allowed = f"allowed range (0, {WALL_MAX_S:.0f}] seconds (or with s, m, h)"
    match = _DURATION.match(str(text)) if not isinstance(text, bool) else None
    try:
        value = float(match.group(1)) * _UNITS[match.group(2)] if match else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= WALL_MAX_S:
        raise OptionsError(f"wall {text!r}: {allowed}")
    return value


def parse_explore(text: object) -> float:
    """The exploration budget in GPU-seconds.

    Raises:
        OptionsError: not a number, or outside (0, 10^9].
    """
    allowed = f"(0, {EXPLORE_MAX_GPU_S:.0f}] GPU-seconds"
    value = float(_number("explore_gpu_seconds", text, float, allowed))
    if not 0 < value <= EXPLORE_MAX_GPU_S:
        raise OptionsError(f"explore_gpu_seconds {text!r}: allowed range {allowed}")
    return value


def parse_regression(text: object) -> float:
    """The largest regression risked: a fraction ('0.25') or a percentage ('25%').

    Raises:
        OptionsError: not a number, or outside (0, 1) (0% to 100%, both excluded).
    """
    allowed = "(0, 1) as a fraction, or (0%, 100%)"
    raw = str(text).strip()
    scale = 100.0 if raw.endswith("%") else 1.0
    value = float(_number("max_regression", raw.rstrip("%"), float, allowed)) / scale
    if not 0 < value < 1:
        raise OptionsError(f"max_regression {text!r}: allowed range {allowed}")
    return value


TTFT_LIMIT_MAX_S = 3600.0
"""The largest TTFT p90 limit, seconds (SGLang's TTFT histogram's buckets end at 400 s)."""


def parse_ttft_limit(text: object) -> float:
    """``--max-ttft-p90``: seconds in (0, 3600].

    Raises:
        OptionsError: not a number, or outside the range (naming the option).
    """
    allowed = f"(0, {TTFT_LIMIT_MAX_S:g}] seconds"
    value = float(_number("--max-ttft-p90", text, float, allowed))
    if not 0 < value <= TTFT_LIMIT_MAX_S:
        raise OptionsError(f"--max-ttft-p90 {text!r}: allowed range {allowed}")
    return value


def parse_canary_gpu(text: str, gpus: Sequence[int] | None = None) -> int | None:
    """The canary GPU of a search: blank for the lowest running GPU, else one of ``gpus``.

    Args:
        text: What the operator typed.
        gpus: The fleet's GPUs (None: any index 0..1023, checked when the search starts).

    Raises:
        OptionsError: not a whole number, or not one of ``gpus``.
    """
    raw = text.strip()
    if not raw:
        return None
    choices = sorted(gpus) if gpus else None
    allowed = "blank (the lowest running GPU) or one of the fleet's GPUs " + (
        ", ".join(map(str, choices)) if choices else "0..1023"
    )
    value = _number("canary_gpu", raw, int, allowed)
    if not isinstance(value, int) or (choices and value not in choices) or not 0 <= value <= 1023:
        raise OptionsError(f"canary_gpu {text!r}: allowed {allowed}")
    return value


def budget_of(wall: object, explore: object, regression: object) -> Budget:
    """A budget from its three fields (text or numbers), each checked.

    Raises:
        OptionsError: the first bad field (naming it and its range).
    """
    return Budget(parse_wall(wall), parse_explore(explore), parse_regression(regression))


# --- the config file and the argv of a request ------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """What the operator asks for: the space and the budget."""

    space: SearchSpace
    """Knobs and their values."""
    budget: Budget
    """Wall time, exploration GPU-seconds, largest regression."""
    gpu: int | None = None
    """The canary GPU (None: the lowest running)."""


def _config_knob(name: str, table: object) -> tuple[KnobValue, ...] | None:
    if not isinstance(table, Mapping):
        raise OptionsError(f"knobs.{name}: expected a table (low/high/step, or values)")
    unknown = set(table) - {"low", "high", "step", "values", "enabled"}
    if unknown:
        raise OptionsError(
            f"knobs.{name}: unknown key {sorted(unknown)[0]!r} "
            "(allowed: low, high, step, values, enabled)"
        )
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise OptionsError(f"knobs.{name}.enabled {enabled!r}: allowed true or false")
    if not enabled:
        return None
    if "values" in table:
        values = table["values"]
        if not isinstance(values, list):
            raise OptionsError(f"knobs.{name}.values: expected a list of numbers")
        return knob_values(name, values)
    low, high = default_range(name)
    return knob_range(name, table.get("low", low), table.get("high", high), table.get("step"))


def load_config(path: Path) -> tuple[SearchSpace | None, dict[str, float]]:
    """The space (None: the file names no knobs) and the budget fields a config file sets.

    Raises:
        OptionsError: an unreadable file, bad TOML, an unknown section or key, a bad value.
    """
    try:
        text = read_text(path, CONFIG_LIMIT, "a config file")  # a FIFO or /dev/zero: refused
    except FileNotFoundError as exc:
        raise OptionsError(f"--config {path}: {exc.strerror or exc}") from None
    except InputError as exc:
        raise OptionsError(f"--config {exc}") from None
    try:
        doc = parse_toml(text)
    except ValueError as exc:
        raise OptionsError(f"--config {path}: not TOML: {exc}") from None
    unknown = set(doc) - {"knobs", "budget"}
    if unknown:
        raise OptionsError(
            f"--config {path}: unknown section {sorted(unknown)[0]!r} (allowed: knobs, budget)"
        )
    space = None
    knobs = doc.get("knobs")
    if knobs is not None:
        if not isinstance(knobs, Mapping):
            raise OptionsError(f"--config {path}: [knobs] must be a table of knob tables")
        specs = []
        for name, table in knobs.items():
            _check_name(name)
            values = _config_knob(name, table)
            if values is not None:
                specs.append((name, values))
        space = space_of(specs)
    budget: dict[str, float] = {}
    table = doc.get("budget", {})
    parsers = {
        "wall": parse_wall,
        "explore_gpu_seconds": parse_explore,
        "max_regression": parse_regression,
    }
    if not isinstance(table, Mapping):
        raise OptionsError(f"--config {path}: [budget] must be a table")
    for key, raw in table.items():
        if key not in parsers:
            raise OptionsError(
                f"budget.{key}: unknown (allowed: wall, explore_gpu_seconds, max_regression)"
            )
        budget[key] = parsers[key](raw)
    return space, budget


def request_argv(request: SearchRequest) -> list[str]:
    """The ``gpufleet autotune start`` options that ask for exactly ``request`` (every value
    listed, so the CLI's parse of them gives back the same space and budget)."""
    argv: list[str] = []
    for name, values in request.space.values:
        argv += ["--knob", f"{name}={','.join(str(v) for v in values)}"]
    budget = request.budget
    argv += ["--wall", repr(budget.wall_s)]
    argv += ["--explore-gpu-seconds", repr(budget.explore_gpu_s)]
    argv += ["--max-regression", repr(budget.max_regression)]
    if request.gpu is not None:
        argv += ["--gpu", str(request.gpu)]
    return argv
