"""``gpufleet plan MODEL [SGLANG FLAGS]``: SGLang's memory plan for one model on one GPU.

MODEL is a model folder (its config.json, and its safetensors headers when the weights are
there), a hub id in the Hugging Face cache, or a hand-written model name (``qwen3.6-27b``,
``llama-8b``). The GPU is ``--gpu-gb`` (capacity, GiB) or ``--gpu b200|h200|h100``; or give what
a real server measured: ``--pre-gb`` (its ``Load weight begin. avail mem``) and ``--avail-gb``
(its ``Load weight end. ... avail mem``: the weights as really loaded), or ``--log`` to read both
from a log and compare the prediction with the lines that launch printed. ``--build`` picks the
SGLang build's arithmetic (0.5.23, 0.5.17, seed). The SGLang flags that size memory are taken
(the others are listed as ignored), so a launch command's flags can be pasted as they are.

Prints the predicted Mamba slots, conv/ssm sizes, KV tokens, K/V sizes and the effective max
running requests, then SGLang's own lines for them. Exit status: 0 the plan fits (and, with
``--log``, agrees with the log within its print rounding), 1 SGLang would fail to start (the
failure line is printed; with ``--log``, the log died of the same line), 2 bad input (a model
that cannot be planned names the missing field), 3 the log disagrees beyond rounding (or failed
differently).

Example, the 0.5.17 check on the GPU machine (stdlib only: python3 -m tui plan there):

    gpufleet plan tests/fixtures/model_configs/gpufleet--tiny-qwen35 --build 0.5.17 \\
        --log /tmp/out/sgl.log --load-format dummy --disable-cuda-graph \\
        --mem-fraction-static 0.2 --context-length 4096 --max-running-requests 16 \\
        --max-mamba-cache-size 64
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path

from tui.cli_args import ArgumentParser, number
from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.inputs import InputError
from tui.retune.fit_advice import why_unfit
from tui.retune.plan_log import LoggedLaunch, read_launch, tolerance
from tui.sglang.builds import BUILDS, SGLANG_0_5_23
from tui.sglang.mamba import ssm_slot_bytes
from tui.sglang.memory import ALLOCATED_BEFORE_WEIGHTS, plan_memory
from tui.sglang.modelcfg.errors import ModelConfigError
from tui.sglang.modelcfg.spec import resolve_model
from tui.sglang.models import CUDA_CONTEXT_BYTES, GIB, ModelSpec
from tui.sglang.plan_types import Calibration, MemoryPlan
from tui.sim import logfmt
from tui.sim.logfmt import gb

_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")


def build_parser() -> ArgumentParser:
    """The command's parser (SGLang's memory flags with their own names)."""
    p = ArgumentParser(
        prog="gpufleet plan",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="model folder, cached hub id, or qwen3.6-27b / llama-8b")
    p.add_argument("--build", choices=BUILDS, default=SGLANG_0_5_23)
    gpu = p.add_argument_group("the GPU")
    gpu.add_argument(
        "--gpu-gb",
        type=number(float, 0, 1 << 20, low_open=True),
        help="capacity in GiB (as NVML reports it)",
    )
    gpu.add_argument("--gpu", choices=sorted(SIM_GPU_KINDS), help="a GPU kind's capacity")
    gpu.add_argument(
        "--pre-gb",
        type=number(float, 0, 1 << 20, low_open=True),
        help="free GiB before the weights load (the log's 'Load weight begin')",
    )
    gpu.add_argument(
        "--avail-gb",
        type=number(float, 0, 1 << 20),
        help="free GiB after the target weights (the log's 'Load weight end')",
    )
    gpu.add_argument("--log", type=Path, help="an SGLang log: inputs from it, then compare")
    flags = p.add_argument_group("SGLang flags that size memory")
    positive = number(int, 1, 1 << 40)
    flags.add_argument("--mem-fraction-static", type=number(float, 0, 1, low_open=True))
    flags.add_argument("--max-running-requests", type=number(int, 0, 1 << 31))
    flags.add_argument("--max-mamba-cache-size", type=positive)
    flags.add_argument(
        "--mamba-full-memory-ratio", type=number(float, 0, 1 << 10, low_open=True), default=0.9
    )
    flags.add_argument("--max-total-tokens", type=positive)
    flags.add_argument("--page-size", type=positive)
    flags.add_argument("--context-length", type=positive)
    flags.add_argument("--chunked-prefill-size", type=positive)
    flags.add_argument("--max-prefill-tokens", type=positive)
    flags.add_argument(
        "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", type=positive, dest="cuda_graph_max_bs"
    )
    flags.add_argument("--speculative-algorithm")
    flags.add_argument("--speculative-num-draft-tokens", type=positive)
    flags.add_argument(
        "--mamba-radix-cache-strategy",
        "--mamba-scheduler-strategy",
        choices=_STRATEGIES,
        default="auto",
        dest="mamba_radix_cache_strategy",
    )
    flags.add_argument("--mamba-ssm-dtype", choices=("float32", "bfloat16", "float16"))
    flags.add_argument("--load-format")
    for name in ("disable-radix-cache", "disable-overlap-schedule", "disable-cuda-graph"):
        flags.add_argument(f"--{name}", action="store_true")
    return p


def main(argv: Sequence[str]) -> int:
    """Print one plan (and its comparison with a log).

    Args:
        argv: arguments after ``gpufleet plan``.

    Returns:
        0, 1, 2 or 3 as the module docstring says.
    """
    parser = build_parser()
    args, ignored = parser.parse_known_args(list(argv))
    try:
        model = resolve_model(args.model, load_format=args.load_format)
    except ModelConfigError as exc:
        parser.error(str(exc))
    launch = _read_log(parser, args.log) if args.log is not None else None
    logged_pre = _gib(args.pre_gb) or (launch.pre_bytes if launch else None)
    # The server measured pre before what it takes ahead of its weights; its line prints after.
    pre = logged_pre + ALLOCATED_BEFORE_WEIGHTS.get(args.build, 0) if logged_pre else None
    avail = _gib(args.avail_gb) if args.avail_gb is not None else None
    if avail is None and launch is not None:
        avail = launch.avail_after_weights_bytes
    total = _gib(args.gpu_gb) or (SIM_GPU_KINDS[args.gpu][1] if args.gpu else None)
    if total is None:
        if pre is None:
            parser.error("give the GPU: --gpu-gb, --gpu, --pre-gb or --log")
        total = pre + CUDA_CONTEXT_BYTES  # only the GPU-size defaults read it
    if avail is not None and pre is None:
        parser.error("--avail-gb needs --pre-gb (or --log): the weights are pre - avail")
    measured = logged_pre - avail if logged_pre and avail is not None else None
    calibration = Calibration(weight_bytes=measured) if measured is not None else None
    # The plan as a function of the two flags the diagnosis varies (``tui.retune.fit_advice``).
    plan_for = functools.partial(
        plan_memory,
        model,
        total,
        pre_bytes=pre,
        mem_fraction_static=args.mem_fraction_static,
        max_running_requests=args.max_running_requests,
        mamba_full_memory_ratio=args.mamba_full_memory_ratio,
        max_total_tokens=args.max_total_tokens,
        page_size=args.page_size,
        context_length=args.context_length,
        chunked_prefill_size=args.chunked_prefill_size,
        max_prefill_tokens=args.max_prefill_tokens,
        cuda_graph_max_bs=args.cuda_graph_max_bs,
        speculative_algorithm=args.speculative_algorithm,
        speculative_num_draft_tokens=args.speculative_num_draft_tokens,
        disable_radix_cache=args.disable_radix_cache,
        mamba_radix_cache_strategy=args.mamba_radix_cache_strategy,
        disable_overlap_schedule=args.disable_overlap_schedule,
        mamba_ssm_dtype=args.mamba_ssm_dtype,
        disable_cuda_graph=args.disable_cuda_graph,
        calibration=calibration,
        build=args.build,
    )
    plan = plan_for(max_mamba_cache_size=args.max_mamba_cache_size)
    why = (
        why_unfit(plan, plan_for, explicit=args.max_mamba_cache_size is not None)
        if plan.failure is not None
        else None
    )
    for line in describe(model, plan, ignored, weights_measured=calibration is not None, why=why):
        print(line)
    if launch is None:
        return 0 if plan.ok else 1
    if not plan.ok or launch.failure is not None:
        return _compare_failure(plan, launch)
    return _compare(args, model, plan, launch)


def _compare_failure(plan: MemoryPlan, launch: LoggedLaunch) -> int:
    """Both failed: 1 when with the same line; otherwise 3."""
    predicted = plan.failure.line if plan.failure is not None else "(starts)"
    logged = launch.failure or "(started)"
    same = predicted == logged
    print(
        f"compare   failure: predicted {predicted!r}, log {logged!r} "
        f"{'same' if same else 'DIFFERS'}"
    )
    return 1 if same else 3


def _gib(value: float | None) -> int | None:
    return round(value * GIB) if value is not None else None


def _read_log(parser: ArgumentParser, path: Path) -> LoggedLaunch:
    try:
        return read_launch(path)
    except OSError as exc:
        parser.error(f"--log {path}: cannot read: {exc.strerror or exc}")
    except InputError as exc:  # a FIFO or a device: refused, never waited on
        parser.error(f"--log {exc}")


def describe(
    model: ModelSpec,
    plan: MemoryPlan,
    ignored: Sequence[str],
    *,
    weights_measured: bool,
    why: str | None = None,
) -> list[str]:
    """The plan as lines: the inputs, the predicted numbers, SGLang's own lines for them.

    ``why``: why a failing plan fails (``tui.retune.fit_advice.why_unfit``: gpufleet's
    diagnosis first where SGLang's own line points at the wrong knob); default SGLang's line.
    """
    source = "measured (pre - avail)" if weights_measured else model.weights_source
    lines = [
        f"model     {model.name} ({model.architecture}"
        + (f", {model.config_path}" if model.config_path else "")
        + ")",
        f"build     {plan.build}",
        f"weights   {gb(plan.weight_bytes)} GB target + {gb(plan.draft_weight_bytes)} GB draft "
        f"({source})",
        f"memory    pre {gb(plan.pre_bytes)} GB"
        + (
            f" ({gb(plan.before_weights_bytes)} GB taken before the weights)"
            if plan.before_weights_bytes
            else ""
        )
        + f", after weights {gb(plan.avail_after_weights_bytes)}"
        f" GB, mem_fraction_static {plan.mem_fraction_static}, slack {gb(plan.slack_bytes)} GB, "
        f"KV budget {gb(plan.rest_bytes)} GB"
        + (
            f" (after the {gb(plan.multimodal_reserve_bytes)} GB multimodal reserve)"
            if plan.multimodal_reserve_bytes
            else ""
        ),
    ]
    if model.is_hybrid_mamba:
        lines.append(
            f"per slot  conv_state {model.conv_state_bytes} B, ssm_state "
            f"{ssm_slot_bytes(model, None)} B at the model's dtype; "
            f"{plan.mamba_slots_per_request} slots per request ({plan.mamba_strategy})"
        )
    lines.append(
        f"per token K+V {model.kv_bytes_per_token} B"
        + (f" + draft {model.draft_kv_bytes_per_token} B" if plan.speculative else "")
    )
    if ignored:
        lines.append(f"ignored   {' '.join(ignored)} (not part of the memory plan)")
    if not plan.ok:
        assert plan.failure is not None
        lines.append(f"fails     {why or plan.failure.line}")
        return lines
    lines.append(
        f"predicted mamba_slots={plan.max_mamba_cache_size} conv_state_bytes="
        f"{plan.conv_state_bytes} ssm_state_bytes={plan.ssm_state_bytes} "
        f"kv_tokens={plan.max_total_num_tokens} k_bytes={plan.k_bytes} v_bytes={plan.v_bytes} "
        f"max_running_requests={plan.max_running_requests}"
        + (" (capped by the Mamba pool)" if plan.capped_by_mamba else "")
    )
    lines += [f"  {w}" for w in plan.warnings]
    if plan.is_hybrid_mamba:
        lines.append("  " + logfmt.mamba_line(plan).rstrip())
    mla = model.kv_layout == "mla"
    lines.append(
        "  "
        + logfmt.kv_line(plan.max_total_num_tokens, plan.k_bytes, plan.v_bytes, plan.build, mla)
    )
    if plan.speculative:
        lines.append(
            "  "
            + logfmt.kv_line(
                plan.max_total_num_tokens, plan.draft_k_bytes, plan.draft_v_bytes, plan.build, mla
            )
        )
    lines.append("  " + logfmt.summary_line(plan))
    return lines


def _compare(
    args: argparse.Namespace, model: ModelSpec, plan: MemoryPlan, launch: LoggedLaunch
) -> int:
    """Print predicted against logged; 3 when a number is off by more than the rounding."""
    budgeted = plan.speculative and plan.build in model.draft_kv_budgeted_builds
    cell = model.kv_bytes_per_token + (model.draft_kv_bytes_per_token if budgeted else 0)
    per_slot = model.conv_state_bytes + ssm_slot_bytes(model, args.mamba_ssm_dtype)
    bound = tolerance(
        plan,
        cell,
        per_slot if model.is_hybrid_mamba else 0,
        args.mamba_full_memory_ratio,
        explicit_slots=args.max_mamba_cache_size is not None,
    )
    rows = [
        ("kv_tokens", plan.max_total_num_tokens, launch.kv_tokens, bound.kv_tokens),
        (
            "max_running_requests",
            plan.max_running_requests,
            launch.max_running_requests,
            bound.max_running_requests,
        ),
    ]
    if model.is_hybrid_mamba:
        rows.insert(
            0, ("mamba_slots", plan.max_mamba_cache_size, launch.mamba_slots, bound.mamba_slots)
        )
    gb_rows = [
        ("conv_state_gb", plan.conv_state_bytes, launch.conv_gb),
        ("ssm_state_gb", plan.ssm_state_bytes, launch.ssm_gb),
        ("k_gb", plan.k_bytes, launch.k_gb),
        ("v_gb", plan.v_bytes, launch.v_gb),
    ]
    if not model.is_hybrid_mamba:
        gb_rows = gb_rows[2:]
    bad = 0
    for name, predicted, logged, allowed in rows:
        if logged is None:
            print(f"compare   {name}: predicted {predicted}, not in the log")
            continue
        off = predicted - int(logged)
        verdict = "ok" if abs(off) <= allowed else "DIFFERS"
        bad += verdict != "ok"
        print(
            f"compare   {name}: predicted {predicted}, log {logged}, off {off:+d} "
            f"(rounding allows +-{allowed}) {verdict}"
        )
    for name, predicted_bytes, logged_gb in gb_rows:
        if logged_gb is None:
            continue
        predicted_gb = round(predicted_bytes / GIB, 2)
        verdict = "ok" if abs(predicted_gb - float(logged_gb)) <= 0.011 else "DIFFERS"
        bad += verdict != "ok"
        print(
            f"compare   {name}: predicted {predicted_gb:.2f}, log {float(logged_gb):.2f} {verdict}"
        )
    return 3 if bad else 0
