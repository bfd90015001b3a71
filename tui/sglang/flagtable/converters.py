"""SGLang's argparse type converters, by the name the flag table records.

Each behaves as SGLang's own function does on every string argparse can hand it: the same value,
or the same exception class with the same text (argparse prints an ``ArgumentTypeError``'s text,
and ``invalid <__name__> value: '...'`` for a ValueError or TypeError). The flag-table test feeds
both SGLang's parser and ours the same values to keep it so.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

Converter = Callable[[str], Any]

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1


def human_readable_int(value: str) -> int:
    """``srt/utils/common.py``: an int with an optional SI (k, M, G, T) or IEC (Ki..Ti) suffix."""
    value = value.strip()
    si_multiplier = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec_multiplier = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec_multiplier:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec_multiplier[suffix]
        return int(Decimal(number) * si_multiplier[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def _orjson_strict(text: str) -> Any:
    """``orjson.loads`` as SGLang uses it, with the standard library's parser.

    orjson refuses what the standard parser tolerates (NaN and Infinity, floats that overflow,
    lone surrogates) and turns integers outside 64 bits into floats.
    """

    def constant(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not valid JSON", text, 0)

    def number(literal: str) -> float:
        parsed = float(literal)
        if parsed in (float("inf"), float("-inf")):
            raise json.JSONDecodeError("number out of range", text, 0)
        return parsed

    def integer(literal: str) -> int | float:
        parsed = int(literal)
        return parsed if _INT64_MIN <= parsed <= _UINT64_MAX else float(literal)

    result = json.loads(text, parse_constant=constant, parse_float=number, parse_int=integer)
    if _has_lone_surrogate(result):
        raise json.JSONDecodeError("str is not valid UTF-8: surrogates not allowed", text, 0)
    return result


def _has_lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


def json_list_type(value: str) -> Any:
    """``srt/utils/common.py``: a JSON value (orjson's strictness)."""
    try:
        return _orjson_strict(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def nullable_str(val: str) -> str | None:
    """``srt/utils/common.py``: None for an empty string or ``None``."""
    if not val or val == "None":
        return None
    return val


def parse_cuda_graph_backend_arg(raw: str) -> str:
    """``srt/model_executor/cuda_graph_config.py``: refuses the retired ``tc_piecewise``."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError(
            "tc_piecewise was removed; select breakable, full, or disabled"
        )
    return raw


def cuda_graph_config_parser(
    phases: tuple[str, ...],
    allowed_keys: Mapping[str, tuple[str, ...]],
    checks_backend: bool = True,
) -> Converter:
    """``parse_cuda_graph_config_arg`` over the phases and keys the table recorded.

    Args:
        phases: ``Phase.ALL``.
        allowed_keys: ``ALLOWED_KEYS_PER_PHASE``.
        checks_backend: whether the release refuses a retired ``backend`` value in the object
            (0.5.22 on; up to 0.5.21 any value of an allowed key passes).

    Returns:
        The converter (named as SGLang's).
    """

    def parse_cuda_graph_config_arg(raw: str) -> dict[str, dict[str, Any]]:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as e:
            raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {e}") from None
        if not isinstance(parsed, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
            )
        result: dict[str, dict[str, Any]] = {}
        for phase, phase_settings in parsed.items():
            phase = str(phase)
            if phase not in phases:
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config: unknown phase '{phase}', expected one of {phases}"
                )
            if not isinstance(phase_settings, dict):
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config['{phase}'] must be a JSON object, got "
                    f"{type(phase_settings).__name__}"
                )
            if checks_backend and "backend" in phase_settings:
                parse_cuda_graph_backend_arg(phase_settings["backend"])
            allowed = allowed_keys[phase]
            result[phase] = {}
            for key, value in phase_settings.items():
                if key not in allowed:
                    raise argparse.ArgumentTypeError(
                        f"--cuda-graph-config['{phase}']: unknown key '{key}', "
                        f"expected one of {allowed}"
                    )
                result[phase][key] = value
        return result

    return parse_cuda_graph_config_arg


def converters(type_data: Mapping[str, Any]) -> dict[str, Converter]:
    """Every converter by its table name.

    Args:
        type_data: the table's ``type_data`` (cuda-graph phases, keys, backend check).

    Returns:
        Name -> callable.
    """
    keys = {k: tuple(v) for k, v in type_data.get("cuda_graph_allowed_keys", {}).items()}
    return {
        "str": str,
        "int": int,
        "float": float,
        "json.loads": json.loads,
        "human_readable_int": human_readable_int,
        "json_list_type": json_list_type,
        "nullable_str": nullable_str,
        "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
        "parse_cuda_graph_config_arg": cuda_graph_config_parser(
            tuple(type_data.get("cuda_graph_phases", ())),
            keys,
            bool(type_data.get("cuda_graph_config_checks_backend", True)),
        ),
    }
