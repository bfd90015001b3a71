"""``gpufleet profile`` through a real subprocess, and the argv against SGLang's own parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from flagtable_helpers import ensure_reference, parse_cases
from repo_paths import ROOT

from tui.profiles import argv_for, load_named

SHIPPED = ROOT / "profiles"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUFLEET_PROFILES_DIR": str(SHIPPED)}
    return subprocess.run(
        [sys.executable, "-m", "tui", "profile", *args],
        capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
    )  # fmt: skip


def test_argv_prints_one_json_list() -> None:
    out = _run("argv", "b200-aggressive", "--gpu", "3")
    assert out.returncode == 0, out.stderr
    argv = json.loads(out.stdout)
    assert argv == argv_for(load_named("b200-aggressive", SHIPPED), 3)
    assert argv[argv.index("--port") + 1] == "30003"
    assert _run("argv", "b200-aggressive", "--gpu", "9").returncode == 2


def test_validate_prints_every_problem_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        "[fleet]\ngpus = [0]\n[server]\nmem_fraction_static = 1.3\nmax_mamba_cache = 5\n"
        '[gpu.0]\nmodel_path = "a;b"\n'
    )
    out = _run("validate", str(bad))
    assert out.returncode == 1
    assert "server.mem_fraction_static = 1.3: must be in (0, 1)" in out.stderr
    assert "did you mean 'max_mamba_cache_size'" in out.stderr
    assert "gpu.0.model_path = 'a;b'" in out.stderr
    ok = _run("validate", str(SHIPPED / "sim-baseline.toml"))
    assert ok.returncode == 0 and "ok" in ok.stdout


def test_list_show_diff() -> None:
    listed = _run("list").stdout
    assert "b200-baseline" in listed and "sim-aggressive" in listed
    shown = _run("show", "sim-baseline")
    assert shown.returncode == 0 and 'kind = "sim"' in shown.stdout and "30006" in shown.stdout
    changes = _run("diff", "b200-baseline", "b200-aggressive").stdout.splitlines()
    assert "server.max_mamba_cache_size: 80 -> 200" in changes
    assert "server.max_running_requests: (unset) -> 64" in changes
    assert "server.mamba_full_memory_ratio: 0.4 -> 0.6" in changes


@pytest.mark.parametrize("name", ["b200-baseline", "b200-aggressive"])
def test_real_profiles_parse_with_sglang_own_arguments(name: str, tmp_path: Path) -> None:
    """Every GPU's argv of the real-SGLang profiles, through SGLang 0.5.23's own parser."""
    profile = load_named(name, SHIPPED)
    argvs = [argv_for(profile, gpu) for gpu in profile.gpus]
    assert all(argv[1:3] == ["-m", "sglang.launch_server"] for argv in argvs)
    results = parse_cases(
        [argv[3:] for argv in argvs], tmp_path, parser="sglang", reference=ensure_reference()
    )
    for gpu, result in zip(profile.gpus, results, strict=True):
        assert result["status"] == 0 and result["spec_error"] is None, result["stderr"]
        args = result["namespace"]
        assert args["port"] == 30000 + gpu
        assert args["mamba_radix_cache_strategy"] == "extra_buffer"
        assert args["speculative_algorithm"] == "EAGLE"
        assert args["mem_fraction_static"] == profile.server.mem_fraction_static
