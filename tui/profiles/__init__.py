"""Tuning profiles: TOML files that fully describe a fleet launch (core, no Textual).

Public API::

    load_profile(path) -> Profile             # validated; ProfileError lists every Problem
    load_named(name_or_path) -> Profile        # by name (user's dir, then profiles_dir()), or path
    load_by_name(name) -> Profile              # by name only (what a remote caller names)
    save_profile(profile, path) -> Path        # tomli-w, atomic
    list_profiles(directory=None) -> list[Path]  # default: the user's and profiles_dir()'s
    profile_engine(path) -> str | None         # its engine.kind, without validating the rest
    profile_from_dict(data, default_name) -> Profile
    argv_for(profile, gpu) -> list[str]        # exact argv (never a shell string)
    launch_problems(profile, gpus=None)        # what SGLang's own flag table refuses in it
    target_release(profile) -> str             # the release that judges it (auto resolved)
    profile_release(profile) -> Release        # the same, with where it was learned
    env_for(profile, gpu, base=None) -> dict   # CUDA_VISIBLE_DEVICES set
    log_path_for(profile, gpu) -> Path         # {state} resolved
    flags_for(profile, gpu) -> ServerFlags     # shared flags + that GPU's override
    diff(a, b) -> list[Change]                 # field level, per-GPU overrides included
"""

from tui.profiles.diff import Change, diff
from tui.profiles.errors import Problem, ProfileError
from tui.profiles.flag_check import launch_problems
from tui.profiles.launch_args import argv_for, env_for, flags_for, log_dir_for, log_path_for
from tui.profiles.model import KNOBS, Engine, GpuOverride, Profile, ServerFlags
from tui.profiles.parse import profile_from_dict
from tui.profiles.sglang_release import Release, ReleaseError, profile_release, target_release
from tui.profiles.store import (
    list_profiles,
    load_by_name,
    load_named,
    load_profile,
    profile_engine,
    profile_to_dict,
    resolve_profile,
    save_profile,
)
from tui.sglang.knobs import KNOB_TABLE  # the knobs' rows, for the form's labels

__all__ = [
    "KNOBS",
    "KNOB_TABLE",
    "Change",
    "Engine",
    "GpuOverride",
    "Problem",
    "Profile",
    "ProfileError",
    "Release",
    "ReleaseError",
    "ServerFlags",
    "argv_for",
    "diff",
    "env_for",
    "flags_for",
    "launch_problems",
    "list_profiles",
    "load_by_name",
    "load_named",
    "load_profile",
    "log_dir_for",
    "log_path_for",
    "profile_engine",
    "profile_from_dict",
    "profile_release",
    "profile_to_dict",
    "resolve_profile",
    "save_profile",
    "target_release",
]
