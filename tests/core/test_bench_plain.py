"""``bench.gpu_overhead`` sizes its GPU-backed server to the card it finds, and alternates the
console as it is with the console with each replacement switched off (``bench.plain_variants``):
what each buys, paired run by run, and the verdict against the 10 % bar."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from bench import gpu_overhead
from bench.harness import Stat
from bench.plain_variants import EARN_BAR, earned_table, verdict
from bench.ptyrun import PtyCost
from tui import plain

H100_MIB = 81559
H200_MIB = 143771
B200_MIB = 174522


@pytest.mark.parametrize(
    ("total", "card", "model"),
    [
        (H100_MIB, "h100", "llama-8b"),  # it asked an H200's memory of an 80 GB card
        (H200_MIB, "h200", "qwen3.6-27b"),
        (B200_MIB + 10, "b200", "qwen3.6-27b"),
        (100_000, "h100", "llama-8b"),  # a 97 GiB card: the H100's figures fit in it
    ],
)
def test_the_gpu_backed_server_is_sized_to_the_card(total: int, card: str, model: str) -> None:
    flags = gpu_overhead.gpu_backed_flags(total)
    assert flags[:4] == ["--gpu-backing", "cuda", "--sim-gpu", card]
    if model == "llama-8b":
        assert flags[flags.index("--sim-model") + 1] == "llama-8b"
        assert "--max-mamba-cache-size" not in flags
    else:
        assert "--sim-model" not in flags  # the simulator's default: the seed's model
        assert "--max-mamba-cache-size" in flags


@pytest.mark.parametrize("total", [None, 40_000])
def test_no_card_or_too_small_a_card_is_said(total: int | None) -> None:
    with pytest.raises(RuntimeError, match="GPU 0"):
        gpu_overhead.gpu_backed_flags(total)


def test_one_rotation_holds_the_console_its_variants_the_base_and_the_peer() -> None:
    args = argparse.Namespace(plain=["keepalive", "render"], base=Path("/b"), local=False)
    programs = gpu_overhead.programs_for([31000, 31001], args)
    assert list(programs) == [
        "gpufleet",
        "plain keepalive",
        "plain render",
        "gpufleet before",
        "nvitop",
    ]
    console, env, ready = programs["gpufleet"]
    assert env == {plain.ENV: ""}  # a GPUFLEET_PLAIN in the bench's own environment is not its
    assert ready == b"GPU 1"  # measured once the last panel is drawn
    assert programs["plain keepalive"] == (console, {plain.ENV: "keepalive"}, ready)
    assert programs["plain render"][1] == {plain.ENV: "render"}
    assert programs["gpufleet before"][2] == ready
    assert programs["nvitop"][0][-3:] == ["nvitop", "--interval", "1"]
    assert programs["nvitop"][2] is None


def test_a_misspelt_variant_stops_the_bench_before_any_fleet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        gpu_overhead.main(["--plain", "keepalive,turbo", "--logs", "/nonexistent/never"])
    assert stopped.value.code == 2
    assert "GPUFLEET_PLAIN: 'turbo' is not a switch" in capsys.readouterr().err


def test_the_verdict_needs_every_pair_on_one_side_of_the_bar() -> None:
    assert EARN_BAR == 1.10
    assert verdict(Stat.of([1.12, 1.30])) == "earns its place"
    assert verdict(Stat.of([1.02, 1.09])) == "does not earn its place"
    assert verdict(Stat.of([1.05, 1.15])).startswith("cannot tell")
    assert verdict(Stat.of([1.01])) == "cannot tell (1 pair)"  # one draw of the noise
    assert verdict(None) == "–"


def _cost(cpu_per_minute: float) -> PtyCost:
    return PtyCost(60.0, cpu_per_minute, 50 << 20, 60_000, 60, 1.5)


def test_each_variant_is_paired_with_the_console_run_of_its_rotation() -> None:
    # the machine slowed in the second rotation: both programs cost more there
    cpu = {
        "gpufleet": [0.60, 0.80],
        "plain keepalive": [0.78, 1.04],  # 1.30 in both rotations
        "plain gcfreeze": [0.62, 0.83],  # ~1.03
        "nvitop": [0.65, 0.70],
    }
    table = earned_table({name: [_cost(v) for v in runs] for name, runs in cpu.items()})
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table if line.startswith("| ")}
    assert "| 1.30 (1.30–1.30, n=2) | earns its place |" in rows["plain keepalive"]
    assert "| does not earn its place |" in rows["plain gcfreeze"]
    assert rows["plain gcfreeze"].endswith("| 1000 (1000–1000, n=2) | 1.50 (1.50–1.50, n=2) |")
    assert "nvitop" not in rows
    assert earned_table({"gpufleet": [_cost(0.6)], "nvitop": [_cost(0.6)]}) == []


def test_a_process_cpu_is_read_to_the_nanosecond_and_agrees_with_psutil() -> None:
    """``ptyrun`` reads each process's CPU clock: psutil's 10 ms ticks were 5 % of a 20 s window
    of the console, as much as the differences the variants are measured for."""
    import subprocess
    import sys

    import psutil

    from bench.ptyrun import process_cpu_s

    burn = (
        "import sys, time\n"
        "end = time.process_time() + 0.25\n"
        "while time.process_time() < end: pass\n"
        "print('burnt', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        precise = process_cpu_s(child.pid)
        times = psutil.Process(child.pid).cpu_times()
        assert 0.25 <= precise < 5.0  # the burn and the interpreter's start
        assert abs(precise - (times.user + times.system)) < 0.03  # ticks: at most 2 behind
        assert round(precise * 1e9) % 10_000_000 != 0  # finer than a tick
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    with pytest.raises(OSError):
        process_cpu_s(child.pid)  # reaped: no clock (the tree's reading falls back to psutil)


@pytest.mark.parametrize(("printed", "mib"), [("81559\n", 81559), ("143771\n143771\n", 143771)])
def test_the_card_is_read_from_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, printed: str, mib: int
) -> None:
    """GPU 0's total as ``nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits``
    prints it (a stand-in on PATH: this machine has no GPU)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{printed}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert gpu_overhead.card_mib() == mib
    assert gpu_overhead.gpu_backed_flags(gpu_overhead.card_mib())[3] in ("h100", "h200")


def test_without_nvidia_smi_there_is_no_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_overhead.card_mib() is None
