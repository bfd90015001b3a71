"""Build a validated ``Profile`` from a TOML document (a plain dict), collecting every problem.

TOML layout (see ``profiles/*.toml``)::

    name = "b200-aggressive"          # optional, defaults to the file stem
    note = "..."
    [engine]   kind = "sglang"|"sim", sglang_version (a release or "auto"), python, ...
    [fleet]    gpus = [0, 1], base_port = 30000 (or ports = [...]), host, log_dir, log_file
    [env]      NAME = "value"
    [server]   model_path, the four knobs, mamba_radix_cache_strategy, speculative_*
    [server.extra_flags]   any_other_sglang_flag = value     (true = bare flag)
    [gpu.5]    any [server] field ("auto" resets a knob), plus [gpu.5.extra_flags], and
               device = 0 (the physical GPU slot 5's server runs on, when several share one)

Values end up in argv, so strings may not hold whitespace or shell metacharacters even though
nothing is ever run through a shell: such a value is almost always a paste mistake.

Last, the launch argv of every GPU goes through SGLang's own flag table
(``tui.profiles.flag_check``): a flag, value or choice SGLang would refuse is a problem here,
before anything is stopped, not an exit 2 on a GPU left without a server.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.profiles.errors import Problem, ProfileError
from tui.profiles.flag_check import launch_problems
from tui.profiles.model import (
    AUTO,
    DEVICE_MAX,
    DRAIN_TIMEOUT_MAX_S,
    SERVER_FIELDS,
    Engine,
    FlagValue,
    GpuOverride,
    Profile,
    ServerFlags,
    StopSettings,
)
from tui.profiles.sglang_release import AUTO_RELEASE
from tui.profiles.templates import log_dir_problem, log_file_problem
from tui.sglang.flagtable.table import known_versions
from tui.sglang.knobs import KNOB_TABLE

_UNSAFE = re.compile(r"[\s;&|$`<>(){}\[\]*?!~#'\"\\]")
_UNSAFE_TEMPLATE = re.compile(r"[\s;&|$`<>()\[\]*?!~#'\"\\]")  # {gpu}, {state} allowed
_FLAG_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

TOP_KEYS = ("name", "note", "engine", "fleet", "env", "server", "gpu", "stop")
STOP_KEYS = ("drain_timeout_s",)
ENGINE_KEYS = (
    "kind",
    "sglang_version",
    "python",
    "legacy_mamba_flag",
    "sim_gpu",
    "sim_speed",
    "sim_model",
)
FLEET_KEYS = ("gpus", "base_port", "ports", "host", "log_dir", "log_file")

# Flags the profile manages itself: passing them through extra_flags would fight the profile.
RESERVED_EXTRA = {
    "host": "set fleet.host",
    "port": "ports come from fleet.base_port / fleet.ports",
    "mamba_scheduler_strategy": "SGLang renamed it --mamba-radix-cache-strategy (an alias up to "
    "0.5.19, refused from 0.5.20); set server.mamba_radix_cache_strategy",
    # SGLang merges a --config YAML into argv before parsing (prepare_server_args): its flags
    # would reach the server without the flag table ever seeing them.
    "config": "its YAML's flags would reach SGLang unchecked; list them in [server.extra_flags]",
} | {name: f"set server.{name} (it is first-class)" for name in SERVER_FIELDS}

# field -> (kind, check, range text) for the fields that are no number: choices (the strategy,
# the speculative algorithm) are the flag table's to judge, for the SGLang version the profile
# targets (flag_check). The numbers are judged by their row of the knob table.
_Check = tuple[str, Any, str]
_TEXT_RULES: dict[str, _Check] = {
    "model_path": ("str", lambda v: bool(v), "a non-empty path or model id"),
    "mamba_radix_cache_strategy": ("str", lambda v: True, "a strategy name"),
    "speculative_algorithm": ("str", lambda v: True, "an algorithm name"),
}


def server_rule(name: str) -> _Check:
    """(kind, check, problem) of one ``[server]`` field: a number's from its row of
    ``tui.sglang.knobs.KNOB_TABLE`` (read now, so the row is the one source), else the text's."""
    if name in _TEXT_RULES:
        return _TEXT_RULES[name]
    knob = KNOB_TABLE[name]
    return (knob.kind.__name__, knob.range.contains, knob.rule())


def _did_you_mean(key: str, allowed: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key{hint} (known: {', '.join(allowed)})"


class _Collector:
    """Accumulates problems while reading one document."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, field: str, value: object, message: str) -> None:
        self.problems.append(Problem(field, value, message))

    def unknown(self, prefix: str, data: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        for key in data:
            if key not in allowed:
                self.add(f"{prefix}{key}", data[key], _did_you_mean(key, allowed))

    def table(self, field: str, value: object) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(field, value, "must be a table")
            return {}
        return value

    def safe_str(
        self, field: str, value: object, *, allow_empty: bool = False, template: bool = False
    ) -> str | None:
        if not isinstance(value, str):
            self.add(field, value, f"must be a string, not {type(value).__name__}")
            return None
        if not value and not allow_empty:
            self.add(field, value, "must not be empty")
            return None
        if (_UNSAFE_TEMPLATE if template else _UNSAFE).search(value):
            self.add(field, value, "must not contain whitespace or shell metacharacters")
            return None
        return value

    def typed(self, field: str, value: object, kind: str) -> Any:
        """Check the TOML type (bool is never a number); returns None when wrong."""
        if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            self.add(field, value, f"must be an integer, not {type(value).__name__}")
            return None
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                self.add(field, value, f"must be a number, not {type(value).__name__}")
                return None
            return float(value)
        if kind == "str":
            return self.safe_str(field, value)
        return value


def _server_value(c: _Collector, prefix: str, name: str, value: object) -> Any:
    kind, check, text = server_rule(name)
    field = f"{prefix}{name}"
    typed = c.typed(field, value, kind)
    if typed is None:
        return None
    if not check(typed):
        c.add(field, value, text)
        return None
    return typed


def _extra_flags(c: _Collector, prefix: str, raw: object) -> tuple[tuple[str, FlagValue], ...]:
    out: list[tuple[str, FlagValue]] = []
    for name, value in c.table(prefix, raw).items():
        field = f"{prefix}.{name}"
        if not _FLAG_NAME.match(name):
            c.add(field, value, "flag name must be lowercase letters, digits, '-' or '_'")
            continue
        key = name.replace("-", "_")
        if key in RESERVED_EXTRA:
            c.add(field, value, f"not allowed in extra_flags: {RESERVED_EXTRA[key]}")
            continue
        if isinstance(value, str):
            if c.safe_str(field, value) is None:
                continue
        elif not isinstance(value, bool | int | float):
            c.add(field, value, "must be a string, integer, float or boolean")
            continue
        out.append((key, value))
    return tuple(out)


def _server(c: _Collector, raw: object) -> ServerFlags:
    data = c.table("server", raw)
    c.unknown("server.", data, (*SERVER_FIELDS, "extra_flags"))
    values = {f: _server_value(c, "server.", f, data[f]) for f in SERVER_FIELDS if f in data}
    extra = _extra_flags(c, "server.extra_flags", data.get("extra_flags"))
    return ServerFlags(**values, extra_flags=extra)


def _overrides(c: _Collector, raw: object, gpus: tuple[int, ...]) -> tuple[GpuOverride, ...]:
    out = []
    for key, table in c.table("gpu", raw).items():
        prefix = f"gpu.{key}"
        if not re.fullmatch(r"[0-9]{1,6}", str(key)) or int(key) not in gpus:
            c.add(prefix, key, f"no such GPU in fleet.gpus {list(gpus)}")
            continue
        data = c.table(prefix, table)
        c.unknown(f"{prefix}.", data, (*SERVER_FIELDS, "extra_flags", "device"))
        values: list[tuple[str, str | int | float | None]] = []
        for f in SERVER_FIELDS:
            if f not in data:
                continue
            if data[f] == AUTO and f != "model_path":
                values.append((f, None))
                continue
            v = _server_value(c, f"{prefix}.", f, data[f])
            if v is not None:
                values.append((f, v))
        extra = _extra_flags(c, f"{prefix}.extra_flags", data.get("extra_flags"))
        device = _device(c, f"{prefix}.device", data["device"]) if "device" in data else None
        out.append(GpuOverride(int(key), tuple(values), extra, device))
    return tuple(sorted(out, key=lambda o: o.gpu))


def _device(c: _Collector, field: str, value: object) -> int | None:
    """``[gpu.N] device``: a physical GPU index, 0..``DEVICE_MAX``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= DEVICE_MAX:
        c.add(field, value, f"must be a GPU index, an integer in 0..{DEVICE_MAX}")
        return None
    return value


def _engine(c: _Collector, raw: object) -> Engine:
    data = c.table("engine", raw)
    c.unknown("engine.", data, ENGINE_KEYS)
    kw: dict[str, Any] = {}
    kind = data.get("kind", "sglang")
    if kind not in ("sglang", "sim"):
        c.add("engine.kind", kind, "must be 'sglang' or 'sim'")
    else:
        kw["kind"] = kind
    if "sglang_version" in data:
        version = c.safe_str("engine.sglang_version", data["sglang_version"])
        if version is not None and version not in (*known_versions(), AUTO_RELEASE):
            known = ", ".join(known_versions())
            c.add(
                "engine.sglang_version",
                version,
                f"no SGLang flag table for this version (gpufleet has: {known}; or "
                f"'{AUTO_RELEASE}': the release engine.python has)",
            )
        elif version is not None:
            kw["sglang_version"] = version
    if "python" in data and (v := c.safe_str("engine.python", data["python"])) is not None:
        kw["python"] = v
    if "legacy_mamba_flag" in data:
        if isinstance(data["legacy_mamba_flag"], bool):
            kw["legacy_mamba_flag"] = data["legacy_mamba_flag"]
        else:
            c.add("engine.legacy_mamba_flag", data["legacy_mamba_flag"], "must be true or false")
    if "sim_gpu" in data:
        if data["sim_gpu"] in SIM_GPU_KINDS:
            kw["sim_gpu"] = data["sim_gpu"]
        else:
            c.add("engine.sim_gpu", data["sim_gpu"], f"must be one of {', '.join(SIM_GPU_KINDS)}")
    if "sim_speed" in data:
        speed = c.typed("engine.sim_speed", data["sim_speed"], "float")
        if speed is not None and 0 < speed <= 10000:
            kw["sim_speed"] = speed
        elif speed is not None:
            c.add("engine.sim_speed", data["sim_speed"], "must be in (0, 10000]")
    if "sim_model" in data and (v := c.safe_str("engine.sim_model", data["sim_model"])):
        kw["sim_model"] = v
    return Engine(**kw)


def _ports(c: _Collector, data: Mapping[str, Any], n: int) -> tuple[int, ...]:
    if "ports" in data and "base_port" in data:
        c.add("fleet.ports", data["ports"], "give either fleet.ports or fleet.base_port, not both")
        return ()
    if "ports" in data:
        raw = data["ports"]
        if not isinstance(raw, list):
            c.add("fleet.ports", raw, "must be a list of integers")
            return ()
        ports = [p for i, p in enumerate(raw) if c.typed(f"fleet.ports[{i}]", p, "int") is not None]
        if len(raw) != n:
            c.add("fleet.ports", raw, f"must list one port per GPU ({n})")
    else:
        base = data.get("base_port", 30000)
        if c.typed("fleet.base_port", base, "int") is None:
            return ()
        ports = list(range(base, base + n))
    ok = True
    for i, p in enumerate(ports):
        if not 1 <= p <= 65535:
            c.add(f"fleet.ports[{i}]", p, "must be in 1..65535")
            ok = False
    dupes = sorted({p for p in ports if ports.count(p) > 1})
    if dupes:
        c.add("fleet.ports", ports, f"duplicate port(s) {dupes}: each GPU needs its own")
        ok = False
    return tuple(ports) if ok else ()


def _fleet(c: _Collector, raw: object) -> dict[str, Any]:
    data = c.table("fleet", raw)
    c.unknown("fleet.", data, FLEET_KEYS)
    kw: dict[str, Any] = {}
    gpus_raw = data.get("gpus")
    gpus: list[int] = []
    if not isinstance(gpus_raw, list) or not gpus_raw:
        c.add("fleet.gpus", gpus_raw, "must be a non-empty list of GPU indices")
    else:
        for i, g in enumerate(gpus_raw):
            if c.typed(f"fleet.gpus[{i}]", g, "int") is None:
                continue
            if g < 0:
                c.add(f"fleet.gpus[{i}]", g, "must be >= 0")
            elif g in gpus:
                c.add(f"fleet.gpus[{i}]", g, "duplicate GPU index")
            else:
                gpus.append(g)
    kw["gpus"] = tuple(gpus)
    kw["ports"] = _ports(c, data, len(gpus_raw) if isinstance(gpus_raw, list) else 0)
    if "host" in data and (v := c.safe_str("fleet.host", data["host"])):
        kw["host"] = v
    if "log_dir" in data and (v := c.safe_str("fleet.log_dir", data["log_dir"], template=True)):
        if (problem := log_dir_problem(v)) is not None:
            c.add("fleet.log_dir", v, problem)
        else:
            kw["log_dir"] = v
    if "log_file" in data and (v := c.safe_str("fleet.log_file", data["log_file"], template=True)):
        if "/" in v:
            c.add("fleet.log_file", v, "must be a file name, not a path (use fleet.log_dir)")
        elif (problem := log_file_problem(v, kw["gpus"], kw["ports"] or kw["gpus"])) is not None:
            c.add("fleet.log_file", v, problem)
        else:
            kw["log_file"] = v
    return kw


def _env(c: _Collector, raw: object) -> tuple[tuple[str, str], ...]:
    out = []
    for name, value in c.table("env", raw).items():
        if not _ENV_NAME.match(name):
            c.add(f"env.{name}", value, "variable name must be letters, digits and '_'")
        elif name == "CUDA_VISIBLE_DEVICES":
            c.add(f"env.{name}", value, "set per GPU by gpufleet (fleet.gpus, a [gpu.N] device)")
        elif (v := c.safe_str(f"env.{name}", value, allow_empty=True)) is not None:
            out.append((name, v))
    return tuple(out)


def _stop(c: _Collector, raw: object) -> StopSettings:
    data = c.table("stop", raw)
    c.unknown("stop.", data, STOP_KEYS)
    if "drain_timeout_s" not in data:
        return StopSettings()
    value = data["drain_timeout_s"]
    typed = c.typed("stop.drain_timeout_s", value, "float")
    if typed is None:
        return StopSettings()
    if not (0 < typed <= DRAIN_TIMEOUT_MAX_S) or typed != typed:
        c.add("stop.drain_timeout_s", value, f"must be seconds in (0, {DRAIN_TIMEOUT_MAX_S:.0f}]")
        return StopSettings()
    return StopSettings(drain_timeout_s=typed)


def profile_from_dict(
    data: Mapping[str, Any], default_name: str, source: str = "profile"
) -> Profile:
    """Validate a parsed TOML document and build the profile.

    Args:
        data: the document, as ``tomllib`` returns it.
        default_name: name to use when the document has none (the file stem).
        source: what to call the document in the error (a path).

    Returns:
        The profile.

    Raises:
        ProfileError: with every problem found.
    """
    c = _Collector()
    c.unknown("", data, TOP_KEYS)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not _PROFILE_NAME.match(name):
        c.add("name", name, "must be letters, digits, '.', '_' or '-'")
    note = data.get("note", "")
    if not isinstance(note, str):
        c.add("note", note, "must be a string")
    engine = _engine(c, data.get("engine"))
    fleet = _fleet(c, data.get("fleet"))
    server = _server(c, data.get("server"))
    overrides = _overrides(c, data.get("gpu"), fleet["gpus"])
    # engine.legacy_mamba_flag with extra_buffer_lazy is the release's table's to judge: 0.5.17
    # to 0.5.19 take the old name as an alias of the flag that has that choice (and use it:
    # srt/server_args.py), 0.5.20 on refuse the old name itself.
    env = _env(c, data.get("env"))
    stop = _stop(c, data.get("stop"))
    if c.problems:
        raise ProfileError(c.problems, source)
    profile = Profile(
        name=name,
        note=note,
        engine=engine,
        env=env,
        server=server,
        overrides=overrides,
        stop=stop,
        **fleet,
    )
    problems = launch_problems(profile)
    if problems:
        raise ProfileError(problems, source)
    return profile
