"""The core never imports Textual: harlequin's trick, a fresh interpreter and sys.modules."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import tui

ROOT = Path(tui.__file__).resolve().parent


def core_modules() -> list[str]:
    """Every module of the package outside tui.ui."""
    names = []
    for info in pkgutil.walk_packages([str(ROOT)], prefix="tui."):
        if info.name == "tui.ui" or info.name.startswith("tui.ui."):
            continue
        if info.name == "tui.__main__":
            continue
        names.append(info.name)
    return sorted(names)


def test_core_has_modules() -> None:
    names = core_modules()
    assert "tui.paths" in names
    assert "tui.gpu.snapshot" in names


def test_core_imports_without_textual() -> None:
    names = core_modules()
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"core imported Textual: {result.stdout.strip()}"


def test_cli_dispatch_lists_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tui", "--help"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0
    for command in ("sim", "logs", "profile", "apply", "generate", "demo"):
        assert command in result.stdout


def test_cli_unknown_command_exits_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tui", "frobnicate"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "unknown command" in result.stderr
