"""What a profile launches on one GPU: the exact argv, the environment and the log path.

Flag names follow SGLang 0.5.23 (``--mamba-radix-cache-strategy``); profiles for SGLang before
the rename set ``engine.legacy_mamba_flag = true`` to get ``--mamba-scheduler-strategy``, since
0.5.23 keeps no alias and an unknown flag makes it exit at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import replace
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


def argv_for(profile: Profile, gpu: int) -> list[str]:
    """The exact argv that launches GPU ``gpu``'s server.

    Args:
        profile: the profile.
        gpu: a GPU index of the profile.

    Returns:
        Program and flags as a list (never a shell string).
    """
    flags = flags_for(profile, gpu)
    argv = engine_prefix(profile)
    if flags.model_path is not None:
        argv += ["--model-path", flags.model_path]
    argv += ["--host", profile.host, "--port", str(profile.port_for(gpu))]
    for name in SERVER_FIELDS:
        value = getattr(flags, name)
        if name == "model_path" or value is None:
            continue
        if name == "mamba_radix_cache_strategy" and profile.engine.legacy_mamba_flag:
            name = "mamba_scheduler_strategy"
        argv += [_flag(name), _value(value)]
    for name, value in flags.extra_flags:
        if value is True:
            argv.append(_flag(name))
        elif value is not False:
            argv += [_flag(name), _value(value)]
    if profile.engine.kind == "sim":
        argv += [
            "--sim-gpu",
            profile.engine.sim_gpu,
            "--sim-speed",
            _value(profile.engine.sim_speed),
        ]
        if profile.engine.sim_model is not None:
            argv += ["--sim-model", profile.engine.sim_model]
    return argv


def env_for(profile: Profile, gpu: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of GPU ``gpu``'s server.

    Args:
        profile: the profile.
        gpu: a GPU index of the profile.
        base: environment to start from (default: this process's).

    Returns:
        ``base`` plus the profile's env, with ``CUDA_VISIBLE_DEVICES`` set to the GPU.
    """
    profile.port_for(gpu)
    env = dict(os.environ if base is None else base)
    env.update(profile.env)
    env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return env


def log_dir_for(profile: Profile) -> Path:
    """The profile's log directory with ``{state}`` resolved to gpufleet's state directory."""
    return Path(profile.log_dir.replace("{state}", str(state_dir()))).expanduser()


def log_path_for(profile: Profile, gpu: int) -> Path:
    """The log file of GPU ``gpu``'s server."""
    name = profile.log_file.format(gpu=gpu, port=profile.port_for(gpu))
    return log_dir_for(profile) / name
