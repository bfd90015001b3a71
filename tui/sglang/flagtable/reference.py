"""SGLang itself, kept beside the app (never imported by it) to generate and check the tables.

One directory (``tui.paths.sglang_reference_dir()``, ``.venv/sglang-reference`` by default, so
``make clean`` removes it with the rest) holds:

* each release's wheel, exactly as PyPI serves it (``pip download --no-deps``, checked against
  the SHA-256 pinned below). It is never unpacked: the generator puts the wheel itself on
  ``sys.path`` (Python imports pure-Python modules from a zip, and the parser's path is pure
  Python once ``tui.sglang.flagtable.stubs`` answers the native imports), and the release
  knowledge test reads a few source files out of it (``tui.sglang.releases``);
* ``deps/``: ``pip install --no-deps --target`` of the few packages the parser-building imports
  need for real, shared by every release (below).

Why the wheels stay zipped: seven releases unpacked (and byte-compiled by pip) take over 1 GB;
zipped they are the 200 MB downloaded, with nothing to write.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tui.outputs import make_dir, open_lock

STAMP = ".gpufleet-reference.json"
"""File written last into a directory: what it was installed with."""

DEPS = "deps"
"""Sub-directory of the shared packages."""

DEPS_PACKAGES: tuple[str, ...] = (
    # The flag declarations are msgspec Structs (srt/arg_groups/fields/*): must be real.
    "msgspec==0.23.0",
    # json_list_type (srt/utils/common.py) parses flag values with orjson: must be real.
    "orjson==3.13.0",
    # Pure Python, imported at module level by sglang.srt.utils.common.
    "packaging==26.4",
    "typing_extensions==4.16.0",
    "requests==2.34.2",
    "urllib3==2.8.0",
    "idna==3.20",
    "certifi==2026.10.19.post1",
    "charset-normalizer==3.5.3",
    # 0.5.17 and 0.5.18 import the model configs from server_args.py, and one of them serialises
    # a logit processor class with dill at import (srt/sampling/custom_logit_processor.py).
    "dill==0.4.1",
)
"""What every release's parser needs installed for real; starlette and psutil come from the app."""

WHEEL_PLATFORM = ("manylinux_2_34_x86_64", "3.11", "cp", "cp311")
"""(platform, Python, implementation, ABI) of the wheel fetched, whatever machine fetches it:
SGLang publishes only platform wheels, and the parser's pure-Python files are the same in each,
so one fixed choice keeps every download byte for byte the file pinned below."""


@dataclass(frozen=True, slots=True)
class Release:
    """One SGLang release gpufleet ships a flag table for."""

    version: str
    """The release, e.g. ``"0.5.17"``."""
    wheel: str
    """Its wheel's file name on PyPI (``WHEEL_PLATFORM``)."""
    sha256: str
    """The wheel's SHA-256, as PyPI lists it."""
    size: int
    """The wheel's size in bytes (a cheap check that the file is whole)."""
    stubs: tuple[str, ...] = ()
    """Modules answered by stand-ins for this release only (``stubs.OPTIONAL``)."""


def _wheel(version: str) -> str:
    platform, _python, _impl, abi = WHEEL_PLATFORM
    return f"sglang-{version}-{abi}-{abi}-{platform}.whl"


RELEASES: dict[str, Release] = {
    r.version: r
    for r in (
        Release(
            "0.5.17",
            _wheel("0.5.17"),
            "575e38f5683624ded3b4bb267f637a098e5ed37d13a1d1ff5ea09bd781a04d16",
            22301836,
            ("transformers",),
        ),
        Release(
            "0.5.18",
            _wheel("0.5.18"),
            "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf",
            24022793,
            ("transformers",),
        ),
        Release(
            "0.5.19",
            _wheel("0.5.19"),
            "425e87377e725d03db8262382008f3fd9561a6cf5d82f485f8b9929f02ffe12b",
            26152986,
        ),
        Release(
            "0.5.20",
            _wheel("0.5.20"),
            "1573527042f4f6b4ead838302818595fc77fdc611dbcc2e40cd150fbc8f8513c",
            27393709,
        ),
        Release(
            "0.5.21",
            _wheel("0.5.21"),
            "96c029f75dec99baa33a5db3d41b1bebefdd6bcfba3a2f7c807fe1cf49a87c20",
            28764971,
        ),
        Release(
            "0.5.22",
            _wheel("0.5.22"),
            "cc9a0f15bd8f877a0584fdb7a1702240177a1f1cc8d17c978715161717b9037b",
            34454956,
        ),
        Release(
            "0.5.23",
            _wheel("0.5.23"),
            "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
            39063923,
        ),
    )
}
"""Every release with a shipped table, oldest first (``pip index versions sglang`` lists them)."""


class ReferenceError(RuntimeError):
    """The reference SGLang cannot be installed (no such release, pip failed, a bad download)."""


def release(version: str) -> Release:
    """The release ``version``.

    Raises:
        ReferenceError: gpufleet knows no such release (the message lists the known ones).
    """
    if version not in RELEASES:
        known = ", ".join(RELEASES)
        raise ReferenceError(f"no reference for SGLang {version} (known: {known})")
    return RELEASES[version]


def wheel_path(version: str, root: Path) -> Path:
    """Where ``version``'s wheel lies under ``root`` (it may not be there)."""
    return root / release(version).wheel


def deps_dir(root: Path) -> Path:
    """The shared packages' directory under ``root``."""
    return root / DEPS


def _deps_ready(root: Path) -> bool:
    try:
        stamp = json.loads((deps_dir(root) / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return bool(stamp.get("packages") == list(DEPS_PACKAGES))


def reference_ready(version: str, root: Path) -> bool:
    """Whether ``root`` holds ``version``'s wheel (whole) and the shared packages."""
    if version not in RELEASES:
        return False
    path = wheel_path(version, root)
    return path.is_file() and path.stat().st_size == RELEASES[version].size and _deps_ready(root)


def _pip(args: list[str], what: str, timeout_s: float) -> None:
    command = [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ReferenceError(f"pip could not {what}: {tail}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _install_deps(root: Path, timeout_s: float) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{DEPS}.", dir=root))
    staging.chmod(0o755)  # mkdtemp makes it private; the venv's other files are not
    try:
        args = ["install", "--no-deps", "--no-compile", "--target", str(staging)]
        _pip([*args, *DEPS_PACKAGES], "install the reference packages", timeout_s)
        (staging / STAMP).write_text(json.dumps({"packages": list(DEPS_PACKAGES)}))
        shutil.rmtree(deps_dir(root), ignore_errors=True)
        staging.rename(deps_dir(root))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _download_wheel(rel: Release, root: Path, timeout_s: float) -> None:
    platform, python, implementation, abi = WHEEL_PLATFORM
    staging = Path(tempfile.mkdtemp(prefix=".wheel.", dir=root))
    try:
        args = ["download", "--no-deps", "--only-binary=:all:", "--platform", platform]
        args += ["--python-version", python, "--implementation", implementation, "--abi", abi]
        args += ["--dest", str(staging), f"sglang=={rel.version}"]
        _pip(args, f"download SGLang {rel.version}", timeout_s)
        got = staging / rel.wheel
        if not got.is_file():
            found = ", ".join(p.name for p in staging.iterdir()) or "nothing"
            raise ReferenceError(f"pip downloaded {found}, not {rel.wheel}")
        digest = _sha256(got)
        if digest != rel.sha256:
            raise ReferenceError(f"{rel.wheel}: SHA-256 {digest}, expected {rel.sha256}")
        got.rename(root / rel.wheel)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install_reference(
    versions: Iterable[str], root: Path, *, timeout_s: float = 600.0
) -> list[Path]:
    """Fetch each release's wheel and the shared packages into ``root`` (what is missing only).

    Each download goes to a fresh sibling directory and is renamed into place once whole (and,
    for a wheel, its SHA-256 checked), under a lock: a concurrent or interrupted install never
    leaves a half-written file behind.

    Args:
        versions: releases of ``RELEASES``.
        root: the reference directory.
        timeout_s: limit for each pip call.

    Returns:
        The wheels' paths, in the order asked.

    Raises:
        ReferenceError: an unknown release, pip failed (its last lines quoted), a bad download.
    """
    wanted = [release(v) for v in versions]
    make_dir(root)
    with os.fdopen(open_lock(root / ".lock"), "r+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _deps_ready(root):
            _install_deps(root, timeout_s)
        for rel in wanted:
            if not reference_ready(rel.version, root):
                _download_wheel(rel, root, timeout_s)
    return [root / rel.wheel for rel in wanted]
