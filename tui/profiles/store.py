"""Profiles on disk: TOML files in ``tui.paths.profiles_dir()`` (tomllib reads, tomli-w writes)."""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from tui.paths import profiles_dir
from tui.profiles.errors import Problem, ProfileError
from tui.profiles.model import AUTO, SERVER_FIELDS, Profile, ServerFlags
from tui.profiles.parse import profile_from_dict

SUFFIX = ".toml"


def load_profile(path: str | Path) -> Profile:
    """Read and validate one profile file.

    Args:
        path: the TOML file.

    Returns:
        The profile (named after the file when it has no ``name``).

    Raises:
        ProfileError: unreadable, not TOML, or invalid (every problem listed).
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ProfileError(
            [Problem("file", str(path), f"cannot be read: {exc}")], str(path)
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(
            [Problem("file", str(path), f"is not valid TOML: {exc}")], str(path)
        ) from exc
    return profile_from_dict(data, default_name=path.stem, source=str(path))


def _server_dict(flags: ServerFlags) -> dict[str, Any]:
    out: dict[str, Any] = {f: getattr(flags, f) for f in SERVER_FIELDS}
    out = {k: v for k, v in out.items() if v is not None}
    if flags.extra_flags:
        out["extra_flags"] = dict(flags.extra_flags)
    return out


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The TOML document of a profile (inverse of ``profile_from_dict``)."""
    e = profile.engine
    engine: dict[str, Any] = {"kind": e.kind}
    if e.sglang_version is not None:
        engine["sglang_version"] = e.sglang_version
    if e.kind == "sglang":
        engine["python"] = e.python
        engine["legacy_mamba_flag"] = e.legacy_mamba_flag
    else:
        engine |= {"sim_gpu": e.sim_gpu, "sim_speed": e.sim_speed}
        if e.sim_model is not None:
            engine["sim_model"] = e.sim_model
    fleet: dict[str, Any] = {"gpus": list(profile.gpus)}
    base = profile.ports[0] if profile.ports else 30000
    if list(profile.ports) == list(range(base, base + len(profile.ports))):
        fleet["base_port"] = base
    else:
        fleet["ports"] = list(profile.ports)
    fleet |= {"host": profile.host, "log_dir": profile.log_dir, "log_file": profile.log_file}
    doc: dict[str, Any] = {"name": profile.name, "note": profile.note, "engine": engine}
    doc["fleet"] = fleet
    if profile.env:
        doc["env"] = dict(profile.env)
    doc["server"] = _server_dict(profile.server)
    gpu: dict[str, Any] = {}
    for o in profile.overrides:
        table: dict[str, Any] = {k: (AUTO if v is None else v) for k, v in o.values}
        if o.extra_flags:
            table["extra_flags"] = dict(o.extra_flags)
        gpu[str(o.gpu)] = table
    if gpu:
        doc["gpu"] = gpu
    return doc


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write a profile as TOML, atomically (write a temporary file, then rename).

    Args:
        profile: the profile.
        path: destination file (a ``.toml`` name).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            tomli_w.dump(profile_to_dict(profile), handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def list_profiles(directory: Path | None = None) -> list[Path]:
    """Profile files in ``directory`` (default: ``profiles_dir()``), sorted by name."""
    root = profiles_dir() if directory is None else directory
    return sorted(root.glob(f"*{SUFFIX}")) if root.is_dir() else []


def resolve_profile(name_or_path: str, directory: Path | None = None) -> Path:
    """Find a profile by file path, or by name in the profiles directory.

    Raises:
        ProfileError: nothing by that name (the known names are listed).
    """
    candidate = Path(name_or_path)
    if candidate.is_file():
        return candidate
    root = profiles_dir() if directory is None else directory
    named = root / f"{name_or_path}{SUFFIX}"
    if named.is_file():
        return named
    known = ", ".join(p.stem for p in list_profiles(root)) or "none"
    raise ProfileError(
        [Problem("profile", name_or_path, f"no such file or profile in {root} (known: {known})")],
        name_or_path,
    )


def load_named(name_or_path: str, directory: Path | None = None) -> Profile:
    """``load_profile(resolve_profile(name_or_path))``."""
    return load_profile(resolve_profile(name_or_path, directory))
