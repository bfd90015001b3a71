"""What a profile launches on one GPU: the exact argv, the environment and the log path.

Flag names are the current ones (``--mamba-radix-cache-strategy``). ``engine.legacy_mamba_flag``
still writes the pre-rename ``--mamba-scheduler-strategy``: a deprecated alias up to SGLang
0.5.19, refused from 0.5.20, so the flag check (``tui.profiles.flag_check``) accepts it or not
by the profile's release. ``argv_parts`` says which profile field wrote each token.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tui.paths import state_dir
from tui.profiles.model import SERVER_FIELDS, FlagValue, Profile, ServerFlags

SGLANG_MODULE = "sglang.launch_server"


def flags_for(profile: Profile, gpu: int) -> ServerFlags:
    """The server flags GPU ``gpu`` runs with: the shared flags with its override applied.

    Args:
        profile: the profile.
        gpu: a GPU index of the profile.

    Returns:
        The resolved flags (override values win; pass-through flags merged by name).
    """
    profile.port_for(gpu)  # raises KeyError for a GPU outside the profile
    override = profile.override_for(gpu)
    if override is None:
        return profile.server
    extra = dict(profile.server.extra_flags)
    extra.update(override.extra_flags)
    values: dict[str, Any] = dict(override.values)
    return replace(profile.server, **values, extra_flags=tuple(extra.items()))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _value(value: FlagValue) -> str:
    # repr keeps floats exact and short (0.93, not 0.9300000000000001); ints and strs as is.
    return repr(value) if isinstance(value, float) else str(value)


def engine_prefix(profile: Profile) -> list[str]:
    """The program part of the argv (before the flags)."""
    if profile.engine.kind == "sim":
        return [sys.executable, "-m", "tui", "sim"]
    return [profile.engine.python, "-m", SGLANG_MODULE]


@dataclass(frozen=True, slots=True)
class ArgvPart:
    """A run of launch argv tokens and the profile field they come from."""

    field: str
    """Dotted profile field, e.g. ``server.extra_flags.page_size`` or ``gpu.5.page_size``."""
    value: object
    """The field's value as the profile holds it."""
    tokens: tuple[str, ...]
    """The argv tokens it becomes."""


def argv_parts(profile: Profile, gpu: int) -> list[ArgvPart]:
    """The flags of GPU ``gpu``'s launch argv, each with the profile field it comes from.

    Args:
        profile: the profile.
        gpu: a GPU index of the profile.

    Returns:
        The parts in argv order; their tokens, joined, are ``argv_for``'s flags.
    """
    flags = flags_for(profile, gpu)
    override = profile.override_for(gpu)
    own = {name for name, _ in override.values} if override is not None else set()
    own_extra = {name for name, _ in override.extra_flags} if override is not None else set()

    def where(name: str, extra: bool = False) -> str:
        mine = name in (own_extra if extra else own)
        table = f"gpu.{gpu}" if mine else "server"
        return f"{table}.extra_flags.{name}" if extra else f"{table}.{name}"

    parts: list[ArgvPart] = []
    if flags.model_path is not None:
        parts.append(
            ArgvPart(where("model_path"), flags.model_path, ("--model-path", flags.model_path))
        )
    parts.append(ArgvPart("fleet.host", profile.host, ("--host", profile.host)))
    port = profile.port_for(gpu)
    parts.append(ArgvPart("fleet.ports", port, ("--port", str(port))))
    for name in SERVER_FIELDS:
        value = getattr(flags, name)
        if name == "model_path" or value is None:
            continue
        field = where(name)
        flag = name
        if name == "mamba_radix_cache_strategy" and profile.engine.legacy_mamba_flag:
            flag, field = "mamba_scheduler_strategy", "engine.legacy_mamba_flag"
        parts.append(ArgvPart(field, value, (_flag(flag), _value(value))))
    for name, value in flags.extra_flags:
        if value is True:
            parts.append(ArgvPart(where(name, extra=True), value, (_flag(name),)))
        elif value is not False:
            parts.append(ArgvPart(where(name, extra=True), value, (_flag(name), _value(value))))
    engine = profile.engine
    if engine.kind == "sim":
        parts.append(ArgvPart("engine.sim_gpu", engine.sim_gpu, ("--sim-gpu", engine.sim_gpu)))
        speed = _value(engine.sim_speed)
        parts.append(ArgvPart("engine.sim_speed", engine.sim_speed, ("--sim-speed", speed)))
        if engine.sim_model is not None:
            model = engine.sim_model
            parts.append(ArgvPart("engine.sim_model", model, ("--sim-model", model)))
    return parts


def argv_for(profile: Profile, gpu: int) -> list[str]:
    """The exact argv that launches GPU ``gpu``'s server.

    Args:
        profile: the profile.
        gpu: a GPU index of the profile.

    Returns:
        Program and flags as a list (never a shell string).
    """
    return engine_prefix(profile) + [t for part in argv_parts(profile, gpu) for t in part.tokens]


def env_for(profile: Profile, gpu: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of GPU ``gpu``'s server.

    Args:
        profile: the profile.
        gpu: a GPU index of the profile.
        base: environment to start from (default: this process's).

    Returns:
        ``base`` plus the profile's env, with ``CUDA_VISIBLE_DEVICES`` set to the GPU's device
        (``Profile.device_for``: the slot's own index unless it shares another's card).
    """
    env = dict(os.environ if base is None else base)
    env.update(profile.env)
    env["CUDA_VISIBLE_DEVICES"] = str(profile.device_for(gpu))
    return env


def log_dir_for(profile: Profile) -> Path:
    """The profile's log directory with ``{state}`` resolved to gpufleet's state directory."""
    return Path(profile.log_dir.replace("{state}", str(state_dir()))).expanduser()


def log_path_for(profile: Profile, gpu: int) -> Path:
    """The log file of GPU ``gpu``'s server."""
    name = profile.log_file.format(gpu=gpu, port=profile.port_for(gpu))
    return log_dir_for(profile) / name
