"""Every file location gpufleet uses, in one place.

The state directory defaults to ``$XDG_STATE_HOME/gpufleet`` (``~/.local/state/gpufleet``) and can
be moved with ``GPUFLEET_STATE_DIR``; the settings the operator writes live in
``$XDG_CONFIG_HOME/gpufleet`` (``~/.config/gpufleet``, moved with ``GPUFLEET_CONFIG_DIR``); tests
point both at temporary directories. Nothing else in the package builds a path to gpufleet's own
files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

STATE_ENV = "GPUFLEET_STATE_DIR"
"""Environment variable that overrides the state directory."""

SIM_GPU_ENV = "GPUFLEET_SIM_GPU_DIR"
"""Environment variable that overrides where simulated GPUs publish their telemetry."""

PROFILES_ENV = "GPUFLEET_PROFILES_DIR"
"""Environment variable that overrides the profiles directory."""

CONFIG_ENV = "GPUFLEET_CONFIG_DIR"
"""Environment variable that overrides the user's configuration directory (tests point it away)."""

SGLANG_REFERENCE_ENV = "GPUFLEET_SGLANG_REFERENCE"
"""Environment variable that overrides where SGLang's own releases are kept for reference."""


def state_dir() -> Path:
    """Return the root of gpufleet's state (created on demand by writers, not here)."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "gpufleet"


def sim_gpu_dir() -> Path:
    """Directory where simulated GPUs publish device and per-process telemetry records."""
    explicit = os.environ.get(SIM_GPU_ENV)
    return Path(explicit) if explicit else state_dir() / "simgpu"


def demo_dir() -> Path:
    """Working directory of ``gpufleet demo``: the demo fleet's logs, prompts and outputs."""
    return state_dir() / "demo"


def fleet_state_file() -> Path:
    """What runs on each GPU: server identity, port, current and previous profile (one file)."""
    return state_dir() / "fleet_state.json"


def operation_lock_file() -> Path:
    """Held by the one operation (apply, canary, rollout, ...) changing the fleet now."""
    return state_dir() / "operation.lock"


def journal_file() -> Path:
    """Append-only journal of applies, canaries and rollouts (JSON lines)."""
    return state_dir() / "journal.jsonl"


def history_file() -> Path:
    """The fleet's time series (``tui.history``): SQLite, bounded in time and size."""
    return state_dir() / "history.sqlite3"


def pipeline_status_file() -> Path:
    """Default status document of the generation pipeline."""
    return state_dir() / "pipeline" / "status.json"


def pipeline_dir() -> Path:
    """Default working directory of a pipeline started from the console."""
    return state_dir() / "pipeline"


def job_records_dir() -> Path:
    """The records of the pipeline jobs started detached (``tui.pipeline.job_record``): what an
    agent may start again, and the id that names a job's process."""
    return state_dir() / "pipeline" / "jobs"


def profiles_dir() -> Path:
    """Directory of tuning profiles.

    ``$GPUFLEET_PROFILES_DIR`` if set, else ``./profiles`` when it exists, else the shipped ones.
    """
    explicit = os.environ.get(PROFILES_ENV)
    if explicit:
        return Path(explicit)
    local = Path.cwd() / "profiles"
    if local.is_dir():
        return local
    return Path(__file__).resolve().parent.parent / "profiles"


def config_dir() -> Path:
    """The user's gpufleet configuration: ``$GPUFLEET_CONFIG_DIR``, else
    ``$XDG_CONFIG_HOME/gpufleet`` (``~/.config/gpufleet``): the operator's settings, which
    gpufleet only reads, and the profiles the console saves (``user_profiles_dir``)."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "gpufleet"


def user_profiles_dir() -> Path:
    """Where the console saves the profiles it makes: ``$GPUFLEET_PROFILES_DIR`` when set (an
    explicit profiles directory), else ``config_dir()/profiles``; never the source tree's
    ``profiles/`` nor the shipped ones. The pickers list them beside ``profiles_dir()``'s."""
    explicit = os.environ.get(PROFILES_ENV)
    return Path(explicit) if explicit else config_dir() / "profiles"


def cordon_file() -> Path:
    """Servers closed to new work while an operation drains them (``tui.state.cordons``)."""
    return state_dir() / "cordons.json"


def cordon_ack_dir() -> Path:
    """One file per job that honours cordons, saying which servers it has stopped sending to
    (``tui.state.cordon_acks``)."""
    return state_dir() / "cordon-acks"


def sglang_reference_dir() -> Path:
    """Where SGLang's own releases are kept (their wheels, ``tui.sglang.flagtable.reference``)
    to generate and check the flag tables.

    ``$GPUFLEET_SGLANG_REFERENCE`` if set, else ``sglang-reference`` inside the running Python's
    prefix (the project's ``.venv``): a development tool's files, kept out of the app's imports.
    """
    explicit = os.environ.get(SGLANG_REFERENCE_ENV)
    return Path(explicit) if explicit else Path(sys.prefix) / "sglang-reference"


def settings_file() -> Path:
    """The operator's settings (``[console] readonly = true``; ``tui.ui.settings``)."""
    return config_dir() / "settings.toml"


def alerts_journal_file() -> Path:
    """The alerts' journal: one JSON line per alert fired or resolved, in the journal's format
    (type ``alert``), apart from the operations' (``tui.ops.alerts.runner``)."""
    return state_dir() / "alerts.jsonl"


def alerts_lock_file() -> Path:
    """Held by the one process that posts and journals the node's alerts (the agent, else a
    console or ``gpufleet alerts``): the others only show them (``tui.ops.alerts.runner``)."""
    return state_dir() / "alerts.lock"


def autotune_dir() -> Path:
    """The autotune search's status document, control requests and lock."""
    return state_dir() / "autotune"
