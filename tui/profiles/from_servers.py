"""A profile written from the command lines of servers already running (``gpufleet adopt``).

Each server's argv is read back flag by flag (``tui.profiles.argv_read``); the fleet's profile
keeps what they share under ``[server]`` (a value most GPUs run with) and each GPU's difference
as its own ``[gpu.N]`` override (a knob it leaves to SGLang is ``"auto"`` there, a switch it
lacks is ``false``). The interpreter and the environment a relaunch needs (``relevant_env``:
``PYTHONPATH``, CUDA's and Hugging Face's variables, SGLang's own, never a token or a secret)
are kept too, so a relaunch reproduces the server.

Nothing is dropped in silence: what a profile cannot hold is one line each (``Drafted.lines``);
the document goes through the one validator (``profile_from_dict``, SGLang's flag table
included) and a field it refuses is taken out with its reason as a line; last, each GPU's
launch argv is parsed beside the server's own, and every setting that would differ is a line.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.profiles.argv_read import (
    Launch,
    ReadFlags,
    flag_parser,
    read_flags,
    split_launch,
)
from tui.profiles.errors import ProfileError
from tui.profiles.launch_args import argv_for, engine_prefix
from tui.profiles.model import AUTO, FlagValue, Profile
from tui.profiles.parse import profile_from_dict
from tui.sglang.flagtable.table import PINNED_VERSION, known_versions

ENV_NAMES = frozenset(
    {
        "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "LD_LIBRARY_PATH",
        "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING",
        "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM",
        "TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE", "XDG_CACHE_HOME",
    }
)  # fmt: skip
"""Environment variables a relaunch needs as the server had them (with ``ENV_PREFIXES``)."""
ENV_PREFIXES = (
    "SGLANG_", "SGL_", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "TVM_FFI_",
    "FLASHINFER_", "HF_", "NVIDIA_", "CUDA_",
)  # fmt: skip
"""Families of variables that change how SGLang, PyTorch, NCCL or Hugging Face behave."""
SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "CREDENTIAL")
"""A variable whose name holds one of these is never written into a profile (a file)."""
NOT_KEPT = frozenset({"CUDA_VISIBLE_DEVICES"})
"""Set by gpufleet per GPU at every launch (``env_for``)."""


class DraftError(ValueError):
    """The servers cannot make one profile (one line, naming the field)."""


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """One running server, as its profile is written from it."""

    gpu: int
    """The GPU it serves."""
    port: int
    """The port it listens on."""
    argv: tuple[str, ...]
    """Its command line."""
    env: Mapping[str, str]
    """Its environment (``relevant_env`` picks what is kept)."""
    python: str = ""
    """Its interpreter as a path a relaunch can run ("" when it could not be found)."""
    device: int | None = None
    """The card it runs on (its ``CUDA_VISIBLE_DEVICES``) when not ``gpu``: the slot's
    ``[gpu.N] device``. None: ``gpu``."""


@dataclass(frozen=True, slots=True)
class Drafted:
    """The profile, and what it could not hold."""

    profile: Profile
    """Valid (the one validator passed it), every GPU on its port."""
    lines: tuple[str, ...]
    """One line per flag or setting of the servers the profile does not reproduce."""


def relevant_env(environ: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """The variables of a server's environment a relaunch must set as it had them.

    Args:
        environ: The server's environment.
        own: gpufleet's (a relaunch inherits it): ``PATH`` is kept only where it differs.

    Returns:
        ``ENV_NAMES`` and the ``ENV_PREFIXES`` families, never a secret, nor what gpufleet sets
        per launch (``CUDA_VISIBLE_DEVICES``, ``GPUFLEET_*``).
    """
    kept: dict[str, str] = {}
    for name, value in environ.items():
        if name in NOT_KEPT or name.startswith("GPUFLEET_"):
            continue
        if any(word in name.upper() for word in SECRET_WORDS):
            continue
        wanted = name in ENV_NAMES or name.startswith(ENV_PREFIXES)
        if wanted or (name == "PATH" and own.get("PATH") != value):
            kept[name] = value
    return dict(sorted(kept.items()))


def _same(values: Mapping[int, object], what: str, lines: list[str]) -> object:
    """The one value every server has; a line (and the first GPU's) when they differ."""
    distinct = list(dict.fromkeys(values.values()))
    if len(distinct) > 1:
        each = ", ".join(f"GPU {g}: {v}" for g, v in values.items())
        first = next(iter(values))
        lines.append(
            f"{what} differs between the servers ({each}): the profile keeps GPU {first}'s"
        )
    return distinct[0] if distinct else None


def _split(
    per_gpu: Mapping[int, Mapping[str, FlagValue]], absent: object
) -> tuple[dict[str, FlagValue], dict[int, dict[str, object]]]:
    """What most GPUs run with (shared), and each GPU's difference (its override); a GPU
    without a shared setting gets ``absent`` for it."""
    keys = list(dict.fromkeys(k for values in per_gpu.values() for k in values))
    shared: dict[str, FlagValue] = {}
    overrides: dict[int, dict[str, object]] = {gpu: {} for gpu in per_gpu}
    for key in keys:
        having = {g: v[key] for g, v in per_gpu.items() if key in v}
        counts = Counter(repr(v) for v in having.values())
        common = max(having.values(), key=lambda v: counts[repr(v)])  # ties: the first GPU's
        if counts[repr(common)] * 2 > len(per_gpu):
            shared[key] = common
            for gpu, values in per_gpu.items():
                if key not in values:
                    overrides[gpu][key] = absent
                elif values[key] != common:
                    overrides[gpu][key] = values[key]
        else:
            for gpu, value in having.items():
                overrides[gpu][key] = value
    return shared, overrides


def _document(
    name: str,
    note: str,
    servers: Sequence[ServerCommand],
    launches: Mapping[int, Launch],
    read: Mapping[int, ReadFlags],
    release: str | None,
    log: tuple[str, str],
    own_env: Mapping[str, str],
    lines: list[str],
) -> dict[str, Any]:
    kind = launches[servers[0].gpu].kind
    engine: dict[str, Any] = {"kind": kind}
    if kind == "sglang":
        pythons = {s.gpu: s.python or launches[s.gpu].python for s in servers}
        engine["python"] = _same(pythons, "the interpreter", lines)
        if release is not None:
            engine["sglang_version"] = release
        legacy = {g: r.legacy_mamba_flag for g, r in read.items()}
        engine["legacy_mamba_flag"] = bool(_same(legacy, "--mamba-scheduler-strategy", lines))
    for field in ("sim_gpu", "sim_speed", "sim_model"):
        values = {g: r.engine[field] for g, r in read.items() if field in r.engine}
        if values and kind == "sim":
            engine[field] = _same(values, f"--{field.replace('_', '-')}", lines)
    hosts = {g: r.host or "127.0.0.1" for g, r in read.items()}
    envs = {s.gpu: tuple(relevant_env(s.env, own_env).items()) for s in servers}
    env = _same(envs, "the environment (PYTHONPATH, CUDA_HOME, ...)", lines)
    shared, per_gpu = _split({g: r.server for g, r in read.items()}, AUTO)
    extra, per_gpu_extra = _split({g: r.extra for g, r in read.items()}, False)
    server: dict[str, Any] = dict(shared)
    if extra:
        server["extra_flags"] = extra
    gpu_tables: dict[str, Any] = {}
    devices = {s.gpu: s.device for s in servers if s.device is not None and s.device != s.gpu}
    for gpu, table in per_gpu.items():
        if gpu in devices:
            table = {"device": devices[gpu], **table}
        if table.get("model_path") == AUTO:
            lines.append(f"GPU {gpu}: runs without --model-path while the others name one")
            del table["model_path"]
        if per_gpu_extra[gpu]:
            table["extra_flags"] = per_gpu_extra[gpu]
        if table:
            gpu_tables[str(gpu)] = table
    doc: dict[str, Any] = {"name": name, "note": note, "engine": engine}
    doc["fleet"] = {
        "gpus": [s.gpu for s in servers],
        "ports": [s.port for s in servers],
        "host": _same(hosts, "--host", lines),
        "log_dir": log[0],
        "log_file": log[1],
    }
    if env:
        doc["env"] = dict(env)  # type: ignore[call-overload]
    doc["server"] = server
    if gpu_tables:
        doc["gpu"] = gpu_tables
    return doc


def _drop(doc: dict[str, Any], dotted: str) -> bool:
    """Take the field ``dotted`` ('server.extra_flags.foo', 'gpu.3.foo') out of ``doc``."""
    parts = dotted.split(".")
    table: Any = doc
    for part in parts[:-1]:
        table = table.get(part) if isinstance(table, dict) else None
    if not isinstance(table, dict) or parts[-1] not in table:
        return False
    del table[parts[-1]]
    return True


def _validated(doc: dict[str, Any], lines: list[str], explained: set[str]) -> Profile:
    """The profile of ``doc``; each field the validator refuses is taken out, with a line (and
    its name in ``explained``)."""
    for _ in range(64):
        try:
            return profile_from_dict(doc, default_name=str(doc["name"]), source="adopted")
        except ProfileError as exc:
            problems = exc.problems
        for problem in problems:
            if problem.field.split(".")[0] not in ("server", "gpu", "env") or not _drop(
                doc, problem.field
            ):
                raise DraftError(f"cannot write the profile: {problem}") from None
            lines.append(f"{problem.field} = {problem.value!r}: not kept ({problem.message})")
            explained.add(problem.field.rsplit(".", 1)[-1])
    raise DraftError("cannot write the profile: the validator kept refusing it")


def _namespace(parser: argparse.ArgumentParser, flags: Sequence[str]) -> dict[str, Any] | None:
    try:
        namespace, _ = parser.parse_known_args(list(flags))
    except Exception:  # a parser that refuses (ParseFailure, ArgumentError): nothing to compare
        return None
    return vars(namespace)


def _differences(
    profile: Profile,
    server: ServerCommand,
    launch: Launch,
    explained: set[str],
    release: str | None,
) -> list[str]:
    """What GPU ``server.gpu``'s launch from ``profile`` would run differently."""
    parser = flag_parser(launch.kind, release, launch.flags)
    ours = argv_for(profile, server.gpu)[len(engine_prefix(profile)) :]
    theirs, mine = list(launch.flags), list(ours)
    if launch.kind == "sim":
        from tui.sim.parser import with_model_path

        theirs, mine = with_model_path(parser, theirs), with_model_path(parser, mine)
    before, after = _namespace(parser, theirs), _namespace(parser, mine)
    if before is None or after is None or "*" in explained:
        return []
    return [
        f"port {server.port}: {dest} = {before.get(dest)!r} on the server, "
        f"{after.get(dest)!r} in the profile"
        for dest in sorted(set(before) | set(after))
        if before.get(dest) != after.get(dest) and dest not in explained
    ]


def draft_profile(
    name: str,
    servers: Sequence[ServerCommand],
    *,
    release: str | None,
    log: tuple[str, str],
    own_env: Mapping[str, str],
    note: str = "",
) -> Drafted:
    """The profile that relaunches ``servers`` as they run.

    Args:
        name: The profile's name.
        servers: The servers, one per GPU, in the fleet's order.
        release: The SGLang release they run (``engine.sglang_version``; None: not known).
        log: (log_dir, log_file) of the profile.
        own_env: gpufleet's environment (``relevant_env``).
        note: The profile's note.

    Raises:
        DraftError: a server's argv is no server's, they run different programs, or the
            document cannot be made valid (one line).
    """
    launches: dict[int, Launch] = {}
    for server in servers:
        launch = split_launch(server.argv)
        if launch is None:
            raise DraftError(f"--ports: port {server.port} runs no SGLang server")
        launches[server.gpu] = launch
    kinds = {launch.kind for launch in launches.values()}
    if len(kinds) > 1:
        raise DraftError(
            "--ports: some ports run SGLang and others gpufleet's simulator: adopt them as two "
            "fleets, each with its own --name"
        )
    lines: list[str] = []
    read: dict[int, ReadFlags] = {}
    for server in servers:
        launch = launches[server.gpu]
        for option in launch.interpreter_options:
            lines.append(f"port {server.port}: interpreter option {option!r}: not kept")
        parser = flag_parser(launch.kind, release, launch.flags)
        read[server.gpu] = read_flags(parser, launch.flags, f"port {server.port}")
        lines += read[server.gpu].lines
    version = release if next(iter(kinds)) == "sglang" else None
    if version is not None and version not in known_versions():
        lines.append(
            f"the servers run SGLang {version}, which gpufleet has no flag table for: "
            f"engine.sglang_version is left out (the newest table, {PINNED_VERSION}, judges it)"
        )
        version = None
    doc = _document(name, note, servers, launches, read, version, log, own_env, lines)
    dropped: set[str] = set()
    profile = _validated(doc, lines, dropped)
    for server in servers:
        explained = dropped | read[server.gpu].explained
        lines += _differences(profile, server, launches[server.gpu], explained, release)
    return Drafted(profile, tuple(dict.fromkeys(lines)))
