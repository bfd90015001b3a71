"""``sglang_version = "auto"`` plans in the arithmetic of the release the servers will run.

Seen on the GPU machine (issue 35): a profile with ``auto``, ``engine.python`` the machine's
python and SGLang 0.5.17 on the profile's ``[env] PYTHONPATH``; the preflight said
``max_running auto -> 16 (capped)`` where the real server capped at 26 (0.5.17 takes 3 Mamba
slots a request for the tiny ``Qwen3_5ForCausalLM``, 0.5.23 takes 5), and ``64 -> 40 (capped)``
where it ran 64. The flags were judged by 0.5.17's table, but the plan followed 0.5.23's.

Here the interpreter is this one, given a ``PYTHONPATH`` holding a stand-in ``sglang`` whose
``__init__`` sets ``__version__ = "0.5.17"`` (no ``_version.py``: the probe imports it), the model
the recorded real server served (``tests/fixtures/real_sglang/0.5.17/model``) on its H100.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.agent.codec import encode
from tui.profiles import Profile, profile_from_dict
from tui.profiles.sglang_release import forget
from tui.retune import plan_cli
from tui.retune.plan_log import read_launch
from tui.retune.preflight import Preflight, preflight
from tui.ui.tuning.preflight_panel import render_preflight

REAL = Path(__file__).parent / "fixtures" / "real_sglang" / "0.5.17"
H100_BYTES = 81559 * 1024**2
"""What NVML reported for the recording machine's card (nvidia-smi: 81559 MiB)."""
SERVED = {"load_format": "dummy", "context_length": 4096, "disable_cuda_graph": True}
"""The recorded launches' flags that size memory besides the knobs."""


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    forget()
    yield
    forget()


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    """A directory holding a stand-in SGLang 0.5.17: its ``__init__`` sets the version."""
    package = tmp_path / "site" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.5.17"\n')
    return package.parent


def _profile(site: Path, version: str = "auto", **knobs: object) -> Profile:
    doc = {
        "name": "real",
        "engine": {"kind": "sglang", "python": sys.executable, "sglang_version": version},
        "fleet": {"gpus": [0], "base_port": 31990},
        "env": {"PYTHONPATH": str(site)},
        "server": {"model_path": str(REAL / "model"), **knobs, "extra_flags": SERVED},
    }
    return profile_from_dict(doc, "real")


def _plan_017(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    """``gpufleet plan --build 0.5.17`` of the same model, card and flags: its predicted line."""
    model = str(REAL / "model")
    served = ["--load-format", "dummy", "--context-length", "4096", "--disable-cuda-graph"]
    plan_cli.main([model, "--build", "0.5.17", "--gpu", "h100", *served, *flags])
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("predi"))


def _same_plan(a: Preflight, b: Preflight) -> bool:
    return dataclasses.replace(a, planned_for="") == dataclasses.replace(b, planned_for="")


@pytest.mark.parametrize(
    ("knobs", "flags", "effective", "capped"),
    [
        # The first setting: 80 slots, max running auto: 80 // 3 = 26 (0.5.23: 16).
        (
            {"mem_fraction_static": 0.45, "max_mamba_cache_size": 80,
             "mamba_full_memory_ratio": 0.4},
            ["--mem-fraction-static", "0.45", "--max-mamba-cache-size", "80",
             "--mamba-full-memory-ratio", "0.4"],
            26, True,
        ),
        # The retune: 200 slots hold 66 requests, so 64 asked run uncapped (0.5.23: 40).
        (
            {"mem_fraction_static": 0.45, "max_mamba_cache_size": 200,
             "mamba_full_memory_ratio": 0.6, "max_running_requests": 64},
            ["--mem-fraction-static", "0.45", "--max-mamba-cache-size", "200",
             "--mamba-full-memory-ratio", "0.6", "--max-running-requests", "64"],
            64, False,
        ),
    ],
)  # fmt: skip
def test_auto_plans_with_the_release_on_the_profiles_pythonpath(
    site: Path,
    capsys: pytest.CaptureFixture[str],
    knobs: dict[str, object],
    flags: list[str],
    effective: int,
    capped: bool,
) -> None:
    auto = preflight(_profile(site, **knobs), 0, gpu_total_bytes=H100_BYTES)
    assert auto.plan.build == "0.5.17"
    assert auto.planned_for == f"SGLang 0.5.17 (auto: {sys.executable})"
    assert (auto.max_running_effective, auto.capped) == (effective, capped)
    # The same plan as the release stated, and as ``gpufleet plan --build 0.5.17``.
    stated = preflight(_profile(site, "0.5.17", **knobs), 0, gpu_total_bytes=H100_BYTES)
    assert _same_plan(auto, stated)
    predicted = _plan_017(capsys, *flags)
    assert f"kv_tokens={auto.kv_tokens} " in predicted
    assert f"max_running_requests={effective}" in predicted
    assert predicted.endswith(" (capped by the Mamba pool)") is capped
    # Named in the form's panel and in the agent's JSON.
    assert f"planned for SGLang 0.5.17 (auto: {sys.executable})" in render_preflight([auto]).plain
    assert encode(auto)["planned_for"] == auto.planned_for


@pytest.mark.parametrize(
    ("scenario", "knobs"),
    [
        # 32 slots, 64 asked: the real server ran 10 (0.5.23's 5 a request would give 6).
        ("cap", {"mem_fraction_static": 0.3, "max_mamba_cache_size": 32,
                 "max_running_requests": 64}),
        # 64 slots, max running auto: the real server ran 21 (0.5.23's would give 12).
        ("graph", {"mem_fraction_static": 0.2, "max_mamba_cache_size": 64}),
    ],
)  # fmt: skip
def test_auto_predicts_what_the_recorded_real_server_ran(
    site: Path, scenario: str, knobs: dict[str, object]
) -> None:
    """The recordings hold no launch at the issue's settings; they hold the same cap (3 slots a
    request) at two others, and ``auto`` predicts what the real 0.5.17 ran there."""
    logged = read_launch(REAL / scenario / "server.log")
    predicted = preflight(_profile(site, **knobs), 0, gpu_total_bytes=H100_BYTES)
    assert predicted.max_running_effective == logged.max_running_requests
    assert predicted.mamba_slots == logged.mamba_slots
