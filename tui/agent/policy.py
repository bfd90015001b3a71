"""What a profile may not do when it reaches the node through the agent's API.

A profile is a program: it names the interpreter that runs SGLang (``engine.python``) and the
environment the server starts with. Through the API (``PUT /api/v1/profiles/NAME`` saves one,
``POST /api/v1/operations`` applies, canaries or rolls one out) a token holder could otherwise
make the server load code of their choosing: ``LD_PRELOAD=/tmp/evil.so``, a ``PYTHONPATH`` with
a ``sitecustomize.py``, or an ``engine.python`` of their own. So a profile that comes through the
API is refused (400, one line naming the field) when:

- its ``[env]`` sets a variable the node does not allow: the node's ``[agent] env`` list names
  what an API profile may set (names, or patterns such as ``SGLANG_*``; ``DEFAULT_ENV`` when
  the list is not set), and everything else is refused. A variable allowed by a pattern may not
  hold a path (a value with ``/``, ``~`` first, ``.`` or ``..``): within the tuning families
  the variables that point a library at files are the ones that load code (``CUDA_HOME`` runs
  ``nvcc`` from it, ``HF_MODULES_CACHE`` imports Python from it, ``NCCL_DEBUG_FILE`` writes
  over any file); a variable named exactly may. Under that, whatever the list says, a variable
  that makes the dynamic loader, glibc, CUDA or an interpreter load code or binaries is always
  refused (``LOADER_PREFIXES``, ``LOADER_NAMES``, ``LOADER_PATTERNS``);
- its ``engine.python`` (real SGLang only; the simulator runs gpufleet's own interpreter) is
  not in the node's allow-list: the default ``python``, the interpreter of the profile the agent
  serves (the node operator's choice), and the ``[agent] python`` list of the node's
  ``settings.toml`` (``tui.paths.settings_file()``)::

      [agent]
      python = ["/opt/sglang/.venv/bin/python"]
      env = ["SGLANG_*", "NCCL_*", "HF_HOME"]

Why an allow-list: a deny-list stopped ``LD_*`` and ``PYTHON*`` only, and ``OPENSSL_CONF``
through the agent ran code in the launched server (OpenSSL loads the engines its configuration
names). The variables that load code are too many to list; the ones operators set are few
families. What the policy does not cover is documented (docs/security.md):
``[server.extra_flags]`` such as ``trust_remote_code`` stay an admin token's power, which is why
saving a profile needs one.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui import paths
from tui.inputs import CONFIG_LIMIT, InputError, read_toml
from tui.profiles import Engine, Profile

LOADER_PREFIXES = ("LD_", "DYLD_", "PYTHON")
"""glibc's dynamic loader (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``LD_AUDIT``, ...), macOS's,
and CPython's own (``PYTHONPATH``, ``PYTHONSTARTUP``, ``PYTHONHOME``, ``PYTHONUSERBASE``, ...)."""
LOADER_NAMES = frozenset(
    {
        "PATH",  # which ``python`` (and every program the server runs) is found
        "BASH_ENV",  # a shell the server starts sources these
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "GCONV_PATH",  # glibc loads iconv modules from here
        "GLIBC_TUNABLES",  # parsed by the loader itself (CVE-2023-4911)
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "PERL5LIB",  # interpreters a build step may start
        "PERL5OPT",
        "PERLLIB",
        "RUBYLIB",
        "RUBYOPT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "JAVA_TOOL_OPTIONS",
        "CUDA_INJECTION64_PATH",  # the CUDA driver loads this library into the process
        "TORCH_EXTENSIONS_DIR",  # torch loads compiled extensions from here
    }
)
"""Exact names that load code or pick the programs run."""
LOADER_PATTERNS = ("TRITON_*_PATH", "NCCL_*_PLUGIN")
"""Triton runs ``ptxas``/``cuobjdump`` and loads ``libcuda`` from ``TRITON_*_PATH``; NCCL loads
a net, tuner or profiler plugin library named by ``NCCL_*_PLUGIN``."""

DEFAULT_ENV: tuple[str, ...] = (
    "SGLANG_*",  # SGLang's own switches (SGLANG_ENABLE_JIT_DEEPGEMM, SGLANG_TORCH_PROFILER_...)
    "SGL_*",  # their older names
    "CUDA_*",  # CUDA_LAUNCH_BLOCKING, CUDA_DEVICE_MAX_CONNECTIONS, CUDA_MODULE_LOADING
    "NCCL_*",  # NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_P2P_LEVEL, NCCL_DEBUG
    "TORCH_*",  # TORCH_CUDA_ARCH_LIST, TORCH_NCCL_*, TORCH_LOGS
    "PYTORCH_*",  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    "HF_*",  # HF_HUB_OFFLINE, HF_HUB_ENABLE_HF_TRANSFER, HF_TOKEN
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "NVIDIA_TF32_OVERRIDE",
)
"""What an API profile may set when the node's ``[agent] env`` does not say: the families of
tuning variables SGLang's docs and operators set; none of them may hold a path."""
_ENV_PATTERN = re.compile(r"[A-Za-z_*?][A-Za-z0-9_*?]*")

DEFAULT_PYTHON = Engine().python
"""``engine.python`` when a profile names none (found on the agent's own PATH)."""


class PolicyError(ValueError):
    """A profile the API may not save or run (the message names the field, one line)."""


def names_a_path(value: str) -> bool:
    """Whether an environment value names a file or directory (refused for a variable allowed
    by a pattern only)."""
    return "/" in value or value.startswith("~") or value.strip() in (".", "..")


def loader_variable(name: str) -> bool:
    """Whether the environment variable ``name`` loads code or picks programs (refused)."""
    upper = name.upper()
    return (
        upper.startswith(LOADER_PREFIXES)
        or upper in LOADER_NAMES
        or any(fnmatch.fnmatchcase(upper, pattern) for pattern in LOADER_PATTERNS)
    )


@dataclass(frozen=True, slots=True)
class ApiPolicy:
    """The node's rules for profiles that come through the API."""

    pythons: frozenset[str]
    """``engine.python`` values allowed."""
    source: str = ""
    """Where the allow-list came from, for the refusal."""
    env: tuple[str, ...] = DEFAULT_ENV
    """Environment variables an API profile may set: names, or ``fnmatch`` patterns."""

    def check(self, profile: Profile, where: str = "profile") -> None:
        """Refuse ``profile`` if it sets a variable the node does not allow, or an interpreter
        not allowed.

        Raises:
            PolicyError: naming the field, the value and the setting that would allow it.
        """
        for name, value in profile.env:
            self._check_env(name, value, where)
        python = profile.engine.python
        if profile.engine.kind == "sglang" and python not in self.pythons:
            allowed = ", ".join(sorted(self.pythons))
            raise PolicyError(
                f"{where}: engine.python = {python!r}: not allowed through the agent (allowed: "
                f"{allowed}; the node's [agent] python in {self.source or 'settings.toml'})"
            )

    def _check_env(self, name: str, value: str, where: str) -> None:
        setting = f"[agent] env in {self.source or 'settings.toml'}"
        if loader_variable(name):
            raise PolicyError(
                f"{where}: env.{name}: not allowed through the agent, whatever the node's "
                f"{setting} says (variables that load code: LD_*, PYTHON*, PATH and the like; "
                "see docs/security.md)"
            )
        if name in self.env:
            return
        pattern = next((p for p in self.env if fnmatch.fnmatchcase(name, p)), None)
        if pattern is None:
            raise PolicyError(
                f"{where}: env.{name}: not allowed through the agent (allowed: "
                f"{', '.join(self.env) or 'none'}; add {name!r} to the node's {setting})"
            )
        if names_a_path(value):
            raise PolicyError(
                f"{where}: env.{name} = {value[:100]!r}: a path, allowed only for a variable "
                f"the node's {setting} names exactly, not by the pattern {pattern!r}"
            )


def _env_list(value: Any, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _ENV_PATTERN.fullmatch(v) for v in value
    ):
        raise PolicyError(
            f"{path}: agent.env must be a list of variable names or patterns (letters, digits, "
            "'_', '*', '?'), such as [\"SGLANG_*\", \"HF_HOME\"]"
        )
    return tuple(value)


def _python_list(value: Any, path: Path) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(f"{path}: agent.python must be a list of interpreter paths")
    return list(value)


def load_policy(trusted: Iterable[Profile] = (), path: Path | None = None) -> ApiPolicy:
    """The node's policy: the default interpreter, those of ``trusted`` (the profile the agent
    serves) and the ``[agent] python`` list of the settings file; the ``[agent] env`` list
    (``DEFAULT_ENV`` when it is not set).

    Args:
        trusted: Profiles the node's operator chose (their interpreters are allowed).
        path: The settings file (default ``tui.paths.settings_file()``); missing is fine.

    Raises:
        PolicyError: the settings file is unreadable, or its ``[agent]`` table is wrong.
    """
    path = path or paths.settings_file()
    pythons = {DEFAULT_PYTHON, *(p.engine.python for p in trusted)}
    try:
        doc = read_toml(path, CONFIG_LIMIT, "a settings file")
    except FileNotFoundError:
        doc = {}
    except InputError as error:
        raise PolicyError(str(error)) from None
    agent = doc.get("agent", {})
    if not isinstance(agent, dict):
        raise PolicyError(f"{path}: agent must be a table ([agent])")
    unknown = sorted(set(agent) - {"python", "env"})
    if unknown:
        raise PolicyError(f"{path}: agent.{unknown[0]} is not a setting (allowed: env, python)")
    pythons |= set(_python_list(agent.get("python", []), path))
    env = _env_list(agent["env"], path) if "env" in agent else DEFAULT_ENV
    return ApiPolicy(frozenset(pythons), str(path), env)
