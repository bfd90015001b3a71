"""SGLang itself, installed beside the app (never imported by it) to generate and check the table.

``pip install --no-deps --target DIR`` of the pinned SGLang wheel plus the few packages its
parser-building imports need for real (below); everything heavy is answered by stand-ins
(``tui.sglang.flagtable.stubs``). DIR is ``tui.paths.sglang_reference_dir(version)``, inside
the project's ``.venv`` by default, so ``make clean`` removes it with the rest.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

STAMP = ".gpufleet-reference.json"
"""File written last into the directory: the package list it was installed with."""

REFERENCE_PACKAGES: dict[str, tuple[str, ...]] = {
    "0.5.23": (
        "sglang==0.5.23",
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
    ),
}
"""What each pinned SGLang needs installed for real; starlette and psutil come from the app."""


class ReferenceError(RuntimeError):
    """The reference SGLang cannot be installed (no package for the version, pip failed)."""


def reference_ready(version: str, directory: Path) -> bool:
    """Whether ``directory`` holds a complete install of ``version``'s reference packages."""
    try:
        stamp = json.loads((directory / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return bool(stamp.get("packages") == list(REFERENCE_PACKAGES.get(version, ("?",))))


def install_reference(version: str, directory: Path, *, timeout_s: float = 600.0) -> Path:
    """Install SGLang ``version`` and its parser's real imports into ``directory`` (once).

    Installs into a fresh sibling directory and renames it into place, under a lock, so a
    concurrent or interrupted install never leaves a half-filled directory behind.

    Args:
        version: a version of ``REFERENCE_PACKAGES``.
        directory: the target directory.
        timeout_s: limit for pip.

    Returns:
        ``directory``.

    Raises:
        ReferenceError: an unknown version, or pip failed (its last lines quoted).
    """
    if version not in REFERENCE_PACKAGES:
        known = ", ".join(REFERENCE_PACKAGES)
        raise ReferenceError(f"no reference package list for SGLang {version} (known: {known})")
    directory.parent.mkdir(parents=True, exist_ok=True)
    lock_path = directory.parent / f".{directory.name}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if reference_ready(version, directory):
            return directory
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        try:
            packages = list(REFERENCE_PACKAGES[version])
            command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
            command += ["--disable-pip-version-check", "--target", str(staging), *packages]
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s, check=False
            )
            if done.returncode != 0:
                tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
                raise ReferenceError(f"pip could not install SGLang {version}: {tail}")
            (staging / STAMP).write_text(json.dumps({"packages": packages}))
            if directory.exists():
                shutil.rmtree(directory)
            staging.rename(directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return directory
