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
from pathlib import Path

import pytest
import tomli_w
from repo_paths import FIXTURES

from tui.agent.codec import encode
from tui.gpu.cards import card_bytes
from tui.ops.cli import apply as apply_cli
from tui.ops.service import FleetOps, OpsOptions
from tui.profiles import Profile, profile_from_dict
from tui.retune import plan_cli
from tui.retune import preflight as preflight_module
from tui.retune.plan_log import read_launch
from tui.retune.preflight import Preflight, preflight
from tui.state.fleet_state import read_records
from tui.ui.cli import build_parser as console_parser
from tui.ui.tuning.preflight_panel import render_preflight

REAL = FIXTURES / "real_sglang" / "0.5.17"
H100_BYTES = 81559 * 1024**2
"""What NVML reported for the recording machine's card (nvidia-smi: 81559 MiB)."""
SERVED = {"load_format": "dummy", "context_length": 4096, "disable_cuda_graph": True}
"""The recorded launches' flags that size memory besides the knobs."""


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    """A directory holding a stand-in SGLang 0.5.17: its ``__init__`` sets the version."""
    package = tmp_path / "site" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.5.17"\n')
    return package.parent


def _profile(site: Path, version: str = "auto", /, **knobs: object) -> Profile:
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


def _profile_file(tmp_path: Path, site: Path) -> Path:
    """The issue's first setting as a profile file: 0.45, 80 slots, ratio 0.4, auto."""
    path = tmp_path / "real.toml"
    path.write_text(
        tomli_w.dumps(
            {
                "name": "real",
                "engine": {"kind": "sglang", "python": sys.executable, "sglang_version": "auto"},
                "fleet": {"gpus": [0], "base_port": 31990},
                "env": {"PYTHONPATH": str(site)},
                "server": {
                    "model_path": str(REAL / "model"),
                    "mem_fraction_static": 0.45,
                    "max_mamba_cache_size": 80,
                    "mamba_full_memory_ratio": 0.4,
                    "extra_flags": SERVED,
                },
            }
        )
    )
    return path


@pytest.fixture()
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without an NVIDIA driver (whatever it has)."""
    monkeypatch.setattr(preflight_module, "gpu_capacity", lambda gpu: None)


@pytest.mark.usefixtures("no_driver")
def test_card_predicts_off_the_gpu_machine_and_without_it_the_exit_says_so(
    tmp_path: Path, site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 'cannot predict: ... memory capacity unknown' for every GPU, exit 0, and no way
    to name the card."""
    path = str(_profile_file(tmp_path, site))
    assert apply_cli.main([path, "--preflight-only"]) == apply_cli.UNPREDICTED == 4
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "preflight GPU 0: cannot predict: gpu 0: memory capacity unknown (no NVIDIA driver to "
        "ask); name the card: --card b200|h100|h200 or --card-gb GB"
    ]
    assert err == "gpufleet apply: --preflight-only: no prediction for GPU 0 (each line says why)\n"
    assert apply_cli.main([path, "--preflight-only", "--card", "h100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"preflight planned for SGLang 0.5.17 (auto: {sys.executable})"
    assert lines[1].startswith("preflight GPU 0: mamba slots 80, KV tokens ")
    assert "max_running auto -> 26 (capped)" in lines[1]
    # --card-gb is the same card by its capacity (81559 MiB, as NVML reports an H100).
    assert apply_cli.main([path, "--preflight-only", "--card-gb", str(81559 / 1024)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == lines[1]
    assert read_records() == {}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--card", "a100"], "argument --card: invalid choice: 'a100' (choose from 'b200', "
                             "'h100', 'h200')"),
        (["--card-gb", "0"], "argument --card-gb: 0: allowed range (0, 1048576]"),
        (["--card-gb", "nan"], "argument --card-gb: nan: allowed range (0, 1048576]"),
        (["--card", "h100", "--card-gb", "80"], "argument --card-gb: not allowed with argument "
                                                "--card"),
    ],
)  # fmt: skip
def test_a_bad_card_is_one_line_naming_the_option(
    tmp_path: Path, site: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    path = str(_profile_file(tmp_path, site))
    with pytest.raises(SystemExit) as exit_info:
        apply_cli.main([path, "--preflight-only", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


@pytest.mark.usefixtures("no_driver")
async def test_the_forms_preflight_takes_the_consoles_card(site: Path) -> None:
    """``gpufleet console --profile P --card h100``: the tuning form predicts where no driver
    answers (before: 'preflight unavailable: ... memory capacity unknown')."""
    knobs = {"mem_fraction_static": 0.45, "max_mamba_cache_size": 80}
    profile = _profile(site, **knobs)
    with pytest.raises(ValueError, match=r"name the card: --card b200\|h100\|h200 or --card-gb"):
        await FleetOps(profile).preflight(profile, [0])
    args = console_parser().parse_args(["--profile", "real", "--card", "h100"])
    ops = FleetOps(profile, options=OpsOptions(card_bytes=card_bytes(args)))
    (item,) = await ops.preflight(profile, [0])
    assert item.plan.gpu_total_bytes == H100_BYTES
    assert item.max_running_effective == 26 and item.capped
