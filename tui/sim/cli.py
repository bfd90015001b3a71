"""``gpufleet sim [SGLANG FLAGS]``: a drop-in for ``python -m sglang.launch_server``.

SGLang 0.5.23's own parser (rebuilt from its flag table, ``tui.sglang.flagtable``: a flag SGLang
refuses exits 2 with SGLang's own text) plus the simulator's: ``--sim-gpu {b200,h200,h100}``,
``--sim-model NAME|FOLDER`` (a hand-written model, or a folder holding a config.json:
``tui.sglang.modelcfg``), ``--sim-speed FACTOR`` (startup and decoding run FACTOR times faster),
``--sim-gpu-index N`` (default: the first entry of CUDA_VISIBLE_DEVICES, else 0),
``--sim-startup-seconds S`` (whole startup in S wall seconds, overriding the speed for startup),
``--sim-seed``, ``--sim-build {0.5.23,0.5.17,seed}`` (which SGLang build's memory arithmetic and
lines, ``tui.sglang.builds``) and ``--sim-fault`` (``tui.sim.faults``). Bad values exit 2 with
argparse's message; an unknown ``--speculative-algorithm`` exits 1 (SGLang's ValueError); a config
that does not fit dies the way SGLang does (exit 137, see ``tui.sim.server``). Unlike SGLang,
``--model-path`` may be left out: the simulated model's own path is used.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from tui.gpu.sim_records import ensure_device, live_processes
from tui.paths import sim_gpu_dir
from tui.sglang.flags import out_of_range, unmodelled
from tui.sglang.flagtable.check import speculative_crash
from tui.sglang.flagtable.table import load_table
from tui.sglang.memory import plan_memory
from tui.sglang.modelcfg.spec import resolve_model
from tui.sim.cuda_backing import BackingUnavailable, probe_device
from tui.sim.health import read_health_env
from tui.sim.parser import build_parser, requested_build, with_model_path
from tui.sim.server import PHASE_SECONDS, Emitter, SimConfig, run_server


def default_gpu_index() -> int:
    """The first entry of CUDA_VISIBLE_DEVICES when it is a number, else 0."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _config(args: argparse.Namespace, argv: list[str], unmodelled: str | None) -> SimConfig:
    health = read_health_env()
    model = resolve_model(args.sim_model, load_format=args.load_format)
    index = default_gpu_index() if args.sim_gpu_index is None else args.sim_gpu_index
    root = sim_gpu_dir()
    device = ensure_device(root, index, args.sim_gpu)
    gpu_total = device.memory_total
    # Pruned: a killed server's record stays behind (nothing withdrew it); a driver forgets a
    # dead process, and every such record cost the console's GPU sample a stat (issue 20).
    others = sum(r.used_bytes for r in live_processes(root, index, prune=True))
    if args.gpu_backing == "cuda":
        real = probe_device(index)  # the caller turns BackingUnavailable into a usage error
        gpu_total, others = real.total_bytes, real.used_bytes
    strategy = args.mamba_radix_cache_strategy or "auto"
    ratio = args.mamba_full_memory_ratio
    if ratio is None:  # unset: SGLang's declared fallback (0.9 in 0.5.23)
        ratio = load_table().fallback("mamba_full_memory_ratio")
    plan = plan_memory(
        model,
        gpu_total,
        other_resident_bytes=others,
        mem_fraction_static=args.mem_fraction_static,
        max_running_requests=args.max_running_requests,
        max_mamba_cache_size=args.max_mamba_cache_size,
        mamba_full_memory_ratio=ratio,
        max_total_tokens=args.max_total_tokens,
        page_size=args.page_size,
        context_length=args.context_length,
        chunked_prefill_size=args.chunked_prefill_size,
        cuda_graph_max_bs=args.cuda_graph_max_bs_decode,
        speculative_algorithm=args.speculative_algorithm,
        speculative_num_draft_tokens=args.speculative_num_draft_tokens,
        disable_radix_cache=args.disable_radix_cache,
        mamba_radix_cache_strategy=strategy,
        disable_overlap_schedule=args.disable_overlap_schedule,
        mamba_ssm_dtype=args.mamba_ssm_dtype,
        disable_cuda_graph=args.disable_cuda_graph,
        max_prefill_tokens=args.max_prefill_tokens,
        build=args.sim_build,
    )
    model_path = args.model_path or model.model_path
    server_args = {k: v for k, v in vars(args).items() if not k.startswith("sim_")}
    server_args.pop("gpu_backing", None)
    server_args.update(
        model_path=model_path,
        mem_fraction_static=plan.mem_fraction_static,
        max_running_requests=plan.requested_max_running_requests
        if plan.requested_max_running_requests is not None
        else (48 if plan.speculative else None),
        chunked_prefill_size=plan.chunked_prefill_size,
        context_length=plan.context_len,
        page_size=plan.page_size,
        max_mamba_cache_size=args.max_mamba_cache_size,
        mamba_full_memory_ratio=ratio,
        mamba_radix_cache_strategy=plan.mamba_strategy or strategy,
        speculative_num_draft_tokens=plan.num_draft_tokens or None,
    )
    early = [w for w in plan.warnings if w.startswith("Max running requests is reset")]
    if unmodelled:
        early.insert(0, unmodelled)
    total = sum(PHASE_SECONDS.values())
    scale = (
        args.sim_startup_seconds / total
        if args.sim_startup_seconds is not None
        else 1.0 / args.sim_speed
    )
    return SimConfig(
        plan=plan,
        model=model,
        host=args.host,
        port=args.port,
        speed=args.sim_speed,
        startup_scale=scale,
        gpu_index=index,
        gpu_kind=args.sim_gpu,
        gpu_name=device.name,
        root=root,
        server_args=server_args,
        model_path=model_path,
        served_model_name=args.served_model_name or model_path,
        launch_command=shlex.join(["gpufleet", "sim", *argv]),
        enable_metrics=args.enable_metrics,
        decode_log_interval=args.decode_log_interval,
        skip_warmup=args.skip_server_warmup,
        info_logs=args.log_level.lower() in ("debug", "info"),
        early_messages=tuple(early),
        seed=args.sim_seed if args.sim_seed is not None else args.port * 1000 + index,
        health=health,
        faults=args.sim_fault,
        cuda_backing=args.gpu_backing == "cuda",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulated server until it is stopped.

    Args:
        argv: arguments after ``sim``.

    Returns:
        Exit status: 0 after a SIGTERM drain, 2 on bad flags or environment (a config that does
        not fit, a crash or a group SIGTERM kill the process, as in SGLang).
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(build=requested_build(args_list))
    args = parser.parse_args(with_model_path(parser, args_list))
    if reason := out_of_range(args):  # SGLang accepts it, the simulator cannot simulate it
        parser.exit(2, f"gpufleet sim: error: {reason}\n")
    if (crash := speculative_crash(args.speculative_algorithm)) is not None:
        print(crash, file=sys.stderr)  # SGLang raises while resolving its arguments: exit 1
        return 1
    try:
        config = _config(args, args_list, unmodelled(parser, args_list).message())
    except BackingUnavailable as exc:
        parser.error(f"--gpu-backing cuda needs PyTorch and an NVIDIA GPU: {exc}")
    except ValueError as exc:  # the environment the health handler reads
        parser.error(str(exc))
    emit = Emitter(sys.stdout, info=config.info_logs)
    # SIGINT ends in KeyboardInterrupt, as SGLang's does: the interpreter then exits by SIGINT.
    # Not Python's own handler: asyncio.run replaces that one with a handler that cancels the
    # main task, and uvicorn raises the captured SIGINT again into it after its shutdown; when
    # the shutdown's last await had nothing left to wait for, the cancellation was never
    # delivered and the process exited 0 (seen under load, test_sim_signals).
    signal.signal(signal.SIGINT, _interrupt)
    return asyncio.run(run_server(config, emit))


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Python's default SIGINT behaviour, under a handler asyncio.run leaves in place."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    raise SystemExit(main())
