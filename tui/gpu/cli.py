"""``gpufleet gpus``: print one sample of every GPU (NVML, or the simulated fleet)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from tui.cli_args import ArgumentParser
from tui.gpu.snapshot import GpuSnapshot
from tui.gpu.source import PREFERENCES, open_gpu_source

MIB = 1024**2


def _fmt(value: float | int | None, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}{unit}"


def _table(snapshots: Sequence[GpuSnapshot]) -> str:
    header = f"{'GPU':>3}  {'name':<22} {'memory used/total MiB':>22} {'util':>5} {'temp':>5} "
    header += f"{'power/limit W':>14}  processes"
    lines = [header]
    for snap in snapshots:
        memory = f"{snap.memory_used // MIB}/{snap.memory_total // MIB}"
        power = f"{_fmt(snap.power_w)}/{_fmt(snap.power_limit_w)}"
        procs = ", ".join(
            f"{p.pid}:{p.name or '?'}:{'-' if p.used_bytes is None else p.used_bytes // MIB}MiB"
            for p in snap.processes
        )
        util = _fmt(snap.utilization_gpu, "%")
        lines.append(
            f"{snap.index:>3}  {snap.name[:22]:<22} {memory:>22} {util:>5}"
            f" {_fmt(snap.temperature_c, 'C'):>5} {power:>14}  {procs or '-'}"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print one sample of every GPU.

    Args:
        argv: Arguments after ``gpufleet gpus``.

    Returns:
        0 when GPUs were read, 1 when no source could read any.
    """
    parser = ArgumentParser(prog="gpufleet gpus", description=__doc__)
    parser.add_argument("--json", action="store_true", help="one JSON object per GPU, per line")
    parser.add_argument(
        "--source", choices=PREFERENCES, default="auto", help="which GPU source to read"
    )
    args = parser.parse_args(argv)
    source = open_gpu_source(args.source)
    try:
        snapshots = source.sample()
    finally:
        source.close()
    if not snapshots:
        print(f"no GPUs: {source.describe()}")
        return 1
    if args.json:
        for snap in snapshots:
            print(json.dumps(asdict(snap)))
    else:
        print(source.describe())
        print(_table(snapshots))
    return 0
