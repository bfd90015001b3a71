"""The core never imports Textual: harlequin's trick, a fresh interpreter and sys.modules."""

from __future__ import annotations

import os
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


def test_an_apply_imports_no_server_and_no_pipeline(tmp_path: Path) -> None:
    # What an apply's start imports is paid for by every retune (issue 20): the simulated
    # server (its flag check needs only the simulator's parser) and the pipeline's modules have
    # no part in it. (httpx's own command-line tool it imports as httpx comes: keeping it out
    # saved ~47 ms once a command and no CPU under load, below issue 37's bar.)
    from bench.simfleet import BASELINE, sim_profile_text

    profile = tmp_path / "p.toml"
    profile.write_text(
        sim_profile_text("p", [0, 1], [41900, 41901], str(tmp_path / "logs"), BASELINE, 10.0)
    )
    code = (
        "import sys\n"
        "from tui.cli import main\n"
        f"assert main(['apply', {str(profile)!r}, '--preflight-only']) == 0\n"
        "names = ('tui.sim.server', 'tui.sim.cli', 'tui.ops.pipeline')\n"
        "loaded = [n for n in names if sys.modules.get(n) is not None]\n"
        "print('loaded:' + ','.join(loaded))\n"
    )
    env = {**os.environ, "GPUFLEET_STATE_DIR": str(tmp_path / "state")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "preflight GPU 1" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "loaded:", result.stdout
