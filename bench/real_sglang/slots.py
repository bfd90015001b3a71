"""Two real SGLang servers on one GPU, as a two-GPU fleet of gpufleet's: the slots' pieces.

gpufleet runs one server per GPU and names each by its GPU index: it launches GPU ``g``'s
server with ``CUDA_VISIBLE_DEVICES=g`` and waits on the driver's processes of GPU ``g`` when it
stops it. The verdict harness needs a canary and its control on the one GPU a lent machine has
(an H100 serves two when the second's fraction leaves the first's share: 0.45 then 0.60), so:

- **the launcher** (``write_launcher``): the profile's ``engine.python`` is a small Python
  script that keeps the slot gpufleet gave (``GPUFLEET_HARNESS_SLOT``), points
  ``CUDA_VISIBLE_DEVICES`` at the one real device and execs the real interpreter with the same
  argv (same pid: gpufleet's identity checks, start ticks and launch id, hold); with ``sim``
  it execs ``gpufleet sim --sim-build 0.5.17`` in place of ``sglang.launch_server`` (the
  harness proved end to end without a GPU: the very same profiles, launches and stops);
- **the slot's processes** (``slot_pids``): who holds the slot's memory is the processes
  carrying its slot in their environment (the server and its scheduler children);
- **the profile** (``profile_text``): SGLang 0.5.17's flags for the tiny model, the knobs, the
  slots' ports, and slot 1's own fraction (``[gpu.1]``).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import psutil

from tui.control.release import GpuPids

SLOT_ENV = "GPUFLEET_HARNESS_SLOT"
"""The slot gpufleet launched a server for (its GPU index), kept by the launcher."""

COMMON_FLAGS: dict[str, Any] = {
    "load_format": "dummy",
    "attention_backend": "triton",
    "sampling_backend": "pytorch",
    "grammar_backend": "none",
    "enable_metrics": True,
    "context_length": 4096,
    "random_seed": 0,
    "disable_cuda_graph": True,
}
"""The bundle's constraints (no FlashAttention-3, no xgrammar), a small context, metrics on,
no CUDA graphs (each start ~40 s instead of more)."""

SECOND_SLOT_FRACTION = 0.60
"""Slot 1's ``mem_fraction_static``: started after slot 0, it leaves slot 0's share."""


def write_launcher(path: Path, device: int, sim: bool, sim_speed: float) -> Path:
    """Write the launcher script (executable) at ``path``.

    Args:
        path: Where.
        device: The real CUDA device every slot runs on.
        sim: Exec the simulator (SGLang 0.5.17's behaviour) instead of SGLang.
        sim_speed: The simulator's speed.

    Returns:
        ``path``.
    """
    sim_argv = ["-m", "tui", "sim", "--sim-build", "0.5.17", "--sim-gpu", "h100"]
    sim_argv += ["--sim-speed", f"{sim_speed:g}"]
    path.write_text(
        f"#!{sys.executable}\n"
        '"""gpufleet slot launcher (bench/real_sglang/slots.py): one GPU, many slots."""\n'
        "import os, sys\n"
        f"os.environ[{SLOT_ENV!r}] = os.environ.get('CUDA_VISIBLE_DEVICES', '0')\n"
        f"os.environ['CUDA_VISIBLE_DEVICES'] = {str(device)!r}\n"
        "argv = sys.argv[1:]\n"
        f"if {sim!r} and argv[:2] == ['-m', 'sglang.launch_server']:\n"
        f"    model = argv[argv.index('--model-path') + 1]\n"
        f"    argv = {sim_argv!r} + ['--sim-model', model] + argv[2:]\n"
        "os.execv(sys.executable, [sys.executable, *argv])\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def slot_pids() -> GpuPids:
    """A ``GpuPids`` for slots on one device: a slot's processes are those whose environment
    names it (``SLOT_ENV``: the server and its scheduler children inherit it). Not NVML's list:
    in a container NVML may name the host's pids, none of them ours, and a wait on it would
    see nothing to wait for; a slot's memory is released once its processes are gone (CUDA's
    teardown may outlast them by seconds: the next start on a shared card finds a little
    less free, which the tiny model never misses)."""

    def pids(slot: int) -> Collection[int]:
        out: set[int] = set()
        for process in psutil.process_iter(["pid"]):
            try:
                if process.environ().get(SLOT_ENV) == str(slot):
                    out.add(process.pid)
            except (psutil.Error, OSError):
                continue  # gone, or not ours to read
        return out

    return pids


def profile_text(
    name: str,
    knobs: Mapping[str, Any],
    *,
    launcher: Path,
    model: str,
    ports: tuple[int, int],
    log_dir: Path,
) -> str:
    """A two-slot profile: SGLang 0.5.17 through ``launcher``, ``knobs`` shared, slot 1 with
    its own fraction, each slot's port."""
    lines = [
        f"name = {json.dumps(name)}",
        'note = "bench/real_sglang/verdicts_real.py: two slots of one GPU"',
        "[engine]",
        'kind = "sglang"',
        'sglang_version = "0.5.17"',
        f"python = {json.dumps(str(launcher))}",
        "[fleet]",
        "gpus = [0, 1]",
        f"ports = [{ports[0]}, {ports[1]}]",
        'host = "127.0.0.1"',
        f"log_dir = {json.dumps(str(log_dir))}",
        "[env]",
    ]
    for key in ("PYTHONPATH", "CUDA_HOME", "TVM_FFI_CACHE_DIR", "TRITON_CACHE_DIR"):
        value = os.environ.get(f"SERVER_{key}") or os.environ.get(key)
        if value:
            lines.append(f"{key} = {json.dumps(value)}")
    lines += ['HF_HUB_OFFLINE = "1"', 'TRANSFORMERS_OFFLINE = "1"', "[server]"]
    lines.append(f"model_path = {json.dumps(model)}")
    for key, value in knobs.items():
        lines.append(f"{key} = {json.dumps(value)}")
    lines.append("[server.extra_flags]")
    lines += [f"{key} = {json.dumps(value)}" for key, value in COMMON_FLAGS.items()]
    lines += ["[gpu.1]", f"mem_fraction_static = {SECOND_SLOT_FRACTION}"]
    return "\n".join(lines) + "\n"
