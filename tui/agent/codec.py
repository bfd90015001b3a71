"""Typed values across the agent's API: frozen dataclasses to JSON and back, by their type hints.

The console sends commands (``tui.ops.commands``: ``encode_command``), which the agent decodes
(``decode_command``, every field checked by its type, then by the command itself) and runs on its
own port: one route for every operation. The agent sends the operations core's events and
results (``OpEvent``, ``ApplyResult``, ``CanaryResult``, ``RolloutResult``), the monitor's
``FleetSnapshot``, the node's firing alerts (``AlertFired``) and the job's energy ledger
(``JobEnergy``) to consoles; the console rebuilds the same dataclasses, so its screens run
unchanged on a remote node. Only the classes
reachable from ``ROOTS`` can be built (a closed registry: a document cannot name any other
class), each field is converted by its declared type, and a document that does not fit raises
``CodecError`` naming the field.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import types
from collections.abc import Callable
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from tui.control.stop_release import DrainProgress, StopReleased
from tui.fleet.snapshot import FleetSnapshot
from tui.ops.alerts.engine import AlertFired
from tui.ops.commands import Command, Op
from tui.ops.events import OperationFinished, OperationStarted
from tui.ops.journal import JournalEntry
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus
from tui.profiles import Profile, profile_to_dict
from tui.profiles.store import NAME
from tui.retune.events import (
    ApplyFinished,
    ApplyRefused,
    ApplyResult,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
)
from tui.retune.preflight import Preflight
from tui.rollout.canary_result import CanaryLook, CanaryResult
from tui.rollout.rollout import RolloutResult, RolloutStep

TYPE_KEY = "_t"
"""The key naming a dataclass in a document (``type`` is a field of ``JournalEntry``)."""

ROOTS: tuple[type, ...] = (
    OperationStarted,
    OperationFinished,
    GpuPhase,
    GpuReady,
    GpuFailed,
    MeasureProgress,
    ApplyRefused,
    ApplyFinished,
    DrainProgress,
    CanaryLook,
    RolloutStep,
    ApplyResult,
    CanaryResult,
    RolloutResult,
    StopReleased,
    FleetSnapshot,
    PipelineStatus,
    JournalEntry,
    Preflight,
    AlertFired,
    JobEnergy,
)
"""Every type the API carries; the registry holds these and the dataclasses inside them."""

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class CodecError(ValueError):
    """A document does not fit the type it should be (the message names the field)."""


def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _walk(hint: Any, found: dict[str, type]) -> None:
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if hint.__name__ in found:
            return
        found[hint.__name__] = hint
        for field in dataclasses.fields(hint):
            _walk(_hints(hint)[field.name], found)
        return
    for arg in get_args(hint):
        _walk(arg, found)


def _registry() -> dict[str, type]:
    found: dict[str, type] = {}
    for root in ROOTS:
        _walk(root, found)
    return found


REGISTRY: dict[str, type] = _registry()
"""Class name -> the only class a document may name."""


def encode(value: Any) -> Any:
    """A JSON-ready form of ``value`` (dataclasses tagged with their class name).

    Args:
        value: A dataclass of the registry, or anything inside one.

    Returns:
        Dicts, lists, strings, numbers, booleans and None; NaN and infinities as strings
        (JSON has none).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {TYPE_KEY: type(value).__name__}
        for field in dataclasses.fields(value):
            out[field.name] = encode(getattr(value, field.name))
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, collections.abc.Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(data: Any, hint: Any, where: str = "value") -> Any:
    """Rebuild a value of type ``hint`` from its encoded form.

    Args:
        data: What ``encode`` produced (parsed JSON).
        hint: The type to build (a registry dataclass, or a typing form of one).
        where: The field's path, for errors.

    Returns:
        The value.

    Raises:
        CodecError: the document does not fit ``hint`` (naming ``where``).
    """
    origin = get_origin(hint)
    if hint is Any or hint is object:
        return data
    if origin in (Union, types.UnionType):
        return _decode_union(data, get_args(hint), where)
    if origin is Literal:
        if data not in get_args(hint):
            raise CodecError(f"{where}: {data!r} is not one of {list(get_args(hint))}")
        return data
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode_dataclass(data, hint, where)
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(data)
        except ValueError:
            raise CodecError(f"{where}: {data!r} is not a {hint.__name__}") from None
    if origin in (tuple, list):
        if not isinstance(data, list):
            raise CodecError(f"{where}: expected a list, got {type(data).__name__}")
        args = get_args(hint)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise CodecError(f"{where}: expected {len(args)} items, got {len(data)}")
            return tuple(
                decode(d, a, f"{where}[{i}]")
                for i, (d, a) in enumerate(zip(data, args, strict=True))
            )
        item = args[0] if args else Any
        items = [decode(d, item, f"{where}[{i}]") for i, d in enumerate(data)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, collections.abc.Mapping):
        return _decode_dict(data, hint, where)
    return _decode_scalar(data, hint, where)


def _decode_dict(data: Any, hint: Any, where: str) -> dict[Any, Any]:
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected an object, got {type(data).__name__}")
    key_hint, value_hint = get_args(hint) or (str, Any)
    out: dict[Any, Any] = {}
    for key, value in data.items():
        real_key = _decode_scalar(key, key_hint, f"{where} key") if key_hint is not str else key
        out[real_key] = decode(value, value_hint, f"{where}[{key}]")
    return out


def _decode_union(data: Any, options: tuple[Any, ...], where: str) -> Any:
    if data is None:
        if type(None) in options:
            return None
        raise CodecError(f"{where}: must not be null")
    if isinstance(data, dict) and TYPE_KEY in data:
        cls = REGISTRY.get(str(data[TYPE_KEY]))
        if cls is None or not any(_admits(option, cls) for option in options):
            raise CodecError(f"{where}: {data[TYPE_KEY]!r} is not allowed here")
        return _decode_dataclass(data, cls, where)
    last: CodecError | None = None
    for option in options:
        if option is type(None):
            continue
        try:
            return decode(data, option, where)
        except CodecError as error:
            last = error
    raise last or CodecError(f"{where}: {data!r} fits none of its types")


def _admits(option: Any, cls: type) -> bool:
    return option is cls or option is Any


def _decode_dataclass(data: Any, cls: type, where: str) -> Any:
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected a {cls.__name__} object")
    named = data.get(TYPE_KEY, cls.__name__)
    if named != cls.__name__ or REGISTRY.get(cls.__name__) is not cls:
        raise CodecError(f"{where}: expected a {cls.__name__}, got {named!r}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in data:
            kwargs[field.name] = decode(
                data[field.name], hints[field.name], f"{where}.{field.name}"
            )
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise CodecError(f"{where}.{field.name}: missing")
    return cls(**kwargs)


def _decode_scalar(data: Any, hint: Any, where: str) -> Any:
    if hint is bool:
        if isinstance(data, bool):
            return data
    elif hint is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        if isinstance(data, str) and data.lstrip("-").isdigit():
            return int(data)  # a dict key
    elif hint is float:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data)
        if isinstance(data, str) and data in _NON_FINITE:
            return _NON_FINITE[data]
    elif hint is str:
        if isinstance(data, str):
            return data
    else:
        return data
    raise CodecError(f"{where}: {data!r} is not a {getattr(hint, '__name__', hint)}")


def decode_as(data: Any, cls: type[Any]) -> Any:
    """``decode`` for a registry class, with the class's name as the path.

    Raises:
        CodecError: the document is not a ``cls``.
    """
    return decode(data, cls, cls.__name__)


# --- commands: the operations API's one route --------------------------------------------------

WIRE_COMMANDS: dict[str, type[Op[Any]]] = {
    cls.WIRE: cls  # type: ignore[misc]
    for cls in get_args(Command)
    if cls.WIRE is not None
}
"""Every command the operations API runs, by its ``kind`` on the wire."""
MAX_GPU = 255
"""Largest GPU index a node accepts (a node's own numbers)."""
_GPU_FIELDS = ("gpus", "gpu")
_NAME_FIELDS = ("profile", "expect")

ProfileReader = Callable[[Any], Profile]
"""Judges a profile document that crossed the API (``tui.agent.profile_api.parse_profile``)."""


def result_type(command: type[Op[Any]]) -> Any:
    """What running ``command`` returns (the ``R`` of its ``Op[R]``), to decode its result."""
    return get_args(getattr(command, "__orig_bases__", (Op[Any],))[0])[0]


def encode_command(command: Op[Any]) -> dict[str, Any]:
    """A command as the operations API takes it: ``kind`` and each field that is not its
    default; a profile itself as its TOML document, a profile by name as the name.

    Raises:
        CodecError: the command has no name on the API, or carries what must stay on its host
            (a confirmed server's pid).
    """
    if command.WIRE is None:
        raise CodecError(f"kind: {type(command).__name__} is not run through the agent")
    out: dict[str, Any] = {"kind": command.WIRE}
    for field in dataclasses.fields(command):  # type: ignore[arg-type]
        value = getattr(command, field.name)
        if value == field.default:
            continue
        if field.name == "confirmed":
            raise CodecError("confirmed: a server no node verifies is stopped from its own host")
        out[field.name] = profile_to_dict(value) if isinstance(value, Profile) else encode(value)
    return out


def decode_command(body: Any, read_profile: ProfileReader) -> Op[Any]:
    """The command a request body asks for, every field checked before anything runs.

    Args:
        body: The parsed JSON body: ``kind`` and the command's fields (node-local GPUs).
        read_profile: Judges a profile document (``profile`` given as a document, not a name).

    Raises:
        CodecError: one line naming the field and what is allowed.
    """
    if not isinstance(body, collections.abc.Mapping):
        raise CodecError("body: must be a JSON object")
    kind = body.get("kind")
    cls = WIRE_COMMANDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise CodecError(f"kind: {kind!r} is not one of {', '.join(WIRE_COMMANDS)}")
    hints = _hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.name != "confirmed"]  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for field in fields:
        if field.name not in body:
            if field.default is dataclasses.MISSING:
                raise CodecError(f"{field.name}: missing (a {kind} needs it)")
            continue
        value = body[field.name]
        if field.name == "profile" and isinstance(value, collections.abc.Mapping):
            kwargs[field.name] = read_profile(value)
            continue
        kwargs[field.name] = _checked(field.name, decode(value, hints[field.name], field.name))
    allowed = ["kind", *(f.name for f in fields)]
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise CodecError(f"{unknown[0]}: not a field of {kind} (allowed: {', '.join(allowed)})")
    try:
        return cls(**kwargs)
    except ValueError as error:  # the command's own check, naming the field
        raise CodecError(str(error)) from None


def _checked(name: str, value: Any) -> Any:
    """A node's GPU numbers within ``MAX_GPU``, sorted once each; a profile named by a name,
    never a path (the node looks it up in its own profile directories only)."""
    if name in _GPU_FIELDS and value is not None:
        gpus = value if isinstance(value, tuple) else (value,)
        if (name == "gpus" and not gpus) or any(not 0 <= g <= MAX_GPU for g in gpus):
            raise CodecError(
                f"{name}: {list(gpus)!r} must be a non-empty list of GPU indices (0-{MAX_GPU})"
            )
        return tuple(sorted(set(gpus))) if isinstance(value, tuple) else value
    named = name in _NAME_FIELDS and isinstance(value, str)
    if named and (not NAME.match(value) or value.endswith(".toml")):
        raise CodecError(
            f"{name}: {value[:80]!r} must be a profile name: letters, digits, '.', '_' or "
            "'-' (1-200), not a path"
        )
    return value
