"""Profiles on disk: TOML files in ``tui.paths.profiles_dir()`` (tomllib reads, tomli-w writes)."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from tui.inputs import PROFILE_LIMIT, InputError, read_text, too_deep
from tui.outputs import make_dir, replace_file
from tui.paths import profiles_dir, user_profiles_dir
from tui.profiles.errors import Problem, ProfileError
from tui.profiles.model import AUTO, SERVER_FIELDS, Profile, ServerFlags
from tui.profiles.parse import profile_from_dict

SUFFIX = ".toml"
MAX_PROFILE_BYTES = PROFILE_LIMIT
"""Largest profile file read (a real one is a few KB; /dev/zero or a 2 GB file is refused)."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
"""A profile name: what ``resolve_name`` takes (never a path: no '/', no leading '.')."""
MAX_DEPTH = 16
"""Deepest nesting of tables and arrays in a profile (a real one needs 4)."""


def _read_document(path: Path) -> dict[str, Any]:
    """Read a profile file through the one door (``tui.inputs``): a regular file of at most
    ``MAX_PROFILE_BYTES`` of UTF-8 TOML, nested at most ``MAX_DEPTH`` deep.

    Raises:
        ProfileError: naming the file and what is wrong with it.
    """

    def refuse(message: str) -> ProfileError:
        return ProfileError([Problem("file", str(path), message)], str(path))

    try:
        text = read_text(path, MAX_PROFILE_BYTES, "a profile file")
    except FileNotFoundError as exc:
        raise refuse(f"cannot be read: {exc.strerror or exc}") from None
    except InputError as exc:
        raise refuse(exc.problem) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise refuse(f"is not valid TOML: {exc}") from None
    except RecursionError:
        raise refuse(f"nests tables or arrays deeper than {MAX_DEPTH} levels") from None
    if too_deep(data, MAX_DEPTH):
        raise refuse(f"nests tables or arrays deeper than {MAX_DEPTH} levels")
    return data


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
    data = _read_document(path)
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
        table: dict[str, Any] = {} if o.device is None else {"device": o.device}
        table |= {k: (AUTO if v is None else v) for k, v in o.values}
        if o.extra_flags:
            table["extra_flags"] = dict(o.extra_flags)
        gpu[str(o.gpu)] = table
    if gpu:
        doc["gpu"] = gpu
    if profile.stop.drain_timeout_s is not None:
        doc["stop"] = {"drain_timeout_s": profile.stop.drain_timeout_s}
    return doc


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write a profile as TOML, atomically (``tui.outputs.replace_file``: a temporary file,
    fsynced, renamed; never through a link).

    Args:
        profile: the profile.
        path: destination file (a ``.toml`` name).

    Returns:
        The path written.

    Raises:
        OSError: it cannot be written (``tui.outputs.UnsafePath``: a directory another user
            could write).
    """
    path = Path(path)
    make_dir(path.parent)
    replace_file(path, tomli_w.dumps(profile_to_dict(profile)).encode())
    return path


def profile_dirs() -> list[Path]:
    """Where profiles are looked up, first wins: the user's (``user_profiles_dir()``, where
    the console saves), then ``profiles_dir()`` (the shipped ones, or an explicit directory)."""
    dirs = [user_profiles_dir(), profiles_dir()]
    return [d for i, d in enumerate(dirs) if d not in dirs[:i]]


def list_profiles(directory: Path | None = None) -> list[Path]:
    """Profile files, sorted by name: those of ``directory``, or (default) of every
    ``profile_dirs()`` directory, a user's profile hiding a shipped one of the same name."""
    roots = profile_dirs() if directory is None else [directory]
    found: dict[str, Path] = {}
    for root in roots:
        if root.is_dir():
            for path in sorted(root.glob(f"*{SUFFIX}")):
                found.setdefault(path.stem, path)
    return sorted(found.values(), key=lambda path: path.stem)


def profile_engine(path: Path) -> str | None:
    """The ``engine.kind`` a profile file names ('sglang' when it names none), without
    validating the rest; None when the file cannot be read as a profile document."""
    try:
        data = _read_document(path)
    except ProfileError:
        return None
    engine = data.get("engine", {})
    kind = engine.get("kind", "sglang") if isinstance(engine, dict) else None
    return kind if isinstance(kind, str) else None


def resolve_profile(name_or_path: str, directory: Path | None = None) -> Path:
    """Find a profile by file path, or by name in the profile directories.

    Raises:
        ProfileError: nothing by that name (the known names are listed).
    """
    candidate = Path(name_or_path)
    roots = profile_dirs() if directory is None else [directory]
    named = [root / f"{name_or_path}{SUFFIX}" for root in roots]
    try:
        if candidate.is_file():
            return candidate
        # Something else by that name (a directory, /dev/zero) is named in load_profile's error,
        # unless a profile of that name exists.
        for path in (*named, candidate):
            if path.exists():
                return path
    except OSError as exc:  # e.g. a name too long for the file system
        raise ProfileError(
            [Problem("profile", name_or_path[:80], f"cannot be looked up: {exc.strerror}")],
            name_or_path[:80],
        ) from None
    known = ", ".join(p.stem for p in list_profiles(directory)) or "none"
    where = " or ".join(str(root) for root in roots)
    raise ProfileError(
        [Problem("profile", name_or_path, f"no such file or profile in {where} (known: {known})")],
        name_or_path,
    )


def resolve_name(name: str, directory: Path | None = None) -> Path:
    """Find a profile by name only, in the profile directories: never read as a path.

    What a remote caller names (the agent's API) goes through here, so ``/etc/passwd`` or
    ``../../x`` is refused as a name, not opened.

    Raises:
        ProfileError: not a name (``NAME``), or no profile of that name (the known ones listed).
    """
    if not NAME.match(name) or name.endswith(SUFFIX):
        raise ProfileError(
            [Problem("profile", name[:80], "must be a profile name: letters, digits, '.', '_' "
                     "or '-' (1-200), not a path")],
            "profile",
        )  # fmt: skip
    roots = profile_dirs() if directory is None else [directory]
    for root in roots:
        candidate = root / f"{name}{SUFFIX}"
        if os.path.lexists(candidate):
            return candidate
    known = ", ".join(p.stem for p in list_profiles(directory)) or "none"
    raise ProfileError(
        [Problem("profile", name, f"no such profile in {' or '.join(map(str, roots))} "
                 f"(known: {known})")],
        name,
    )  # fmt: skip


def load_by_name(name: str, directory: Path | None = None) -> Profile:
    """``load_profile(resolve_name(name))``: a profile by name only."""
    return load_profile(resolve_name(name, directory))


def load_named(name_or_path: str, directory: Path | None = None) -> Profile:
    """``load_profile(resolve_profile(name_or_path))``."""
    return load_profile(resolve_profile(name_or_path, directory))
