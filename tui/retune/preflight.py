"""Preflight: what a candidate profile will allocate on one GPU, before anything is stopped.

The prediction is SGLang's own memory plan (``tui.sglang.memory.plan_memory``) for the GPU's
resolved flags, in the arithmetic of the release the profile targets (``engine.sglang_version``,
``auto`` resolved the way its flags are judged: ``tui.profiles.sglang_release``; the planner
models 0.5.17 and 0.5.23, and plans any other release in 0.5.23's arithmetic, saying so; a
simulated fleet's ``--sim-build`` is its build), and says which (``Preflight.planned_for``), for
whatever model it serves: a simulated model by name or config
folder, or the real ``--model-path`` (a name of the hand-written specs, a local folder or a hub id
in the Hugging Face cache, derived from its config.json: ``tui.sglang.modelcfg``). When a server
already ran on that GPU the plan is calibrated on the sizes its log printed (bytes per KV token,
per Mamba slot, weights), so model constants that are slightly off do not shift the prediction. A
configuration that will not start gets a plain "does not fit", and one whose launch argv SGLang's
own parser refuses (its flag table) a plain "does not start".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tui.gpu.capacity import gpu_capacity
from tui.gpu.cards import CARD_HINT
from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.profiles import Profile, ReleaseError, flags_for, profile_release
from tui.profiles.flag_check import launch_problems
from tui.retune.calibration import scan_calibration
from tui.retune.fit_advice import why_unfit
from tui.retune.sharing import Beside, Readings, beside
from tui.sglang.builds import BUILDS, SGLANG_0_5_17, SGLANG_0_5_23, Build
from tui.sglang.caps import cap_cause, running_capped
from tui.sglang.flagtable.table import load_table
from tui.sglang.memory import Calibration, MemoryPlan, plan_memory
from tui.sglang.modelcfg.spec import resolve_model
from tui.sglang.models import CUDA_CONTEXT_BYTES, GIB, ModelSpec
from tui.words import gpus_words

DEFAULT_MODEL = "qwen3.6-27b"
"""The simulator's model when a sim profile names none (the seed's)."""

_PASS_THROUGH = {
    # pass-through SGLang flag -> plan_memory keyword, with its type
    "max_total_tokens": int,
    "page_size": int,
    "context_length": int,
    "chunked_prefill_size": int,
    "cuda_graph_max_bs_decode": int,
    "disable_radix_cache": bool,
    "disable_overlap_schedule": bool,
    "mamba_ssm_dtype": str,
    "max_prefill_tokens": int,
    "disable_cuda_graph": bool,
}


@dataclass(frozen=True, slots=True)
class Preflight:
    """The predicted allocation of one profile on one GPU."""

    gpu: int
    """GPU index."""
    profile: str
    """Profile name."""
    fits: bool
    """True when the server is predicted to start."""
    mamba_slots: int
    """Predicted max_mamba_cache_size."""
    kv_tokens: int
    """Predicted max_total_num_tokens."""
    max_running_requested: int | None
    """--max-running-requests as the profile asks (None = auto)."""
    max_running_effective: int
    """Predicted effective max running requests (SGLang's auto-cap included)."""
    capped: bool
    """True when SGLang will cap max_running_requests (Mamba slots or KV)."""
    available_gpu_mem_bytes: int
    """Predicted headroom after pools and graphs (the summary's available_gpu_mem)."""
    calibrated: bool
    """True when sizes measured from a running server's log were used."""
    why_not: str | None
    """'does not fit: <why>' (memory) or 'does not start: <why>' (SGLang refuses the argv)."""
    plan: MemoryPlan
    """The full plan."""
    planned_for: str = ""
    """The release whose arithmetic the plan follows, and how it was known:
    ``SGLang 0.5.17 (auto: /opt/sglang/bin/python)`` (empty from an older agent)."""
    beside: str = ""
    """For a slot sharing its card: what the fleet's other slots there hold, subtracted from
    the free memory it will find (``tui.retune.sharing.Beside.describe``); "" otherwise."""

    def describe(self) -> str:
        """One line for the form and the CLI."""
        shared = f"; {self.beside}" if self.beside else ""
        if not self.fits:
            return f"GPU {self.gpu}: {self.why_not}{shared}"
        cap = " (capped)" if self.capped else ""
        asked = self.max_running_requested if self.max_running_requested is not None else "auto"
        source = "calibrated" if self.calibrated else "model constants"
        return (
            f"GPU {self.gpu}: mamba slots {self.mamba_slots}, KV tokens {self.kv_tokens}, "
            f"max_running {asked} -> {self.max_running_effective}{cap}, "
            f"free after start {self.available_gpu_mem_bytes / GIB:.1f} GB ({source}){shared}"
        )


def planned_for_lines(items: Sequence[Preflight]) -> list[str]:
    """``planned for SGLang 0.5.17 (auto: /opt/sglang/bin/python)``: the release the plans
    follow, once (a line per release, naming its GPUs, when GPUs differ: a per-GPU
    ``--sim-build``). Empty for none, or for an older agent's predictions, which do not say."""
    planned: dict[str, list[int]] = {}
    for item in items:
        if item.planned_for:
            planned.setdefault(item.planned_for, []).append(item.gpu)
    if len(planned) == 1:
        return [f"planned for {words}" for words in planned]
    return [f"planned for {words} ({gpus_words(gpus)})" for words, gpus in planned.items()]


def calibration_from_log(path: str | Path) -> Calibration | None:
    """Sizes from the allocation lines of the most recent launch in a server log.

    One full scan (``tui.retune.calibration``: only the lines that can be allocation lines are
    parsed); a caller that asks again and again keeps a ``CalibrationCache`` instead.

    Args:
        path: An SGLang (or simulated) server log.

    Returns:
        The calibration, or None when the log has no allocation lines (or cannot be read).
    """
    return scan_calibration(path)


def model_for(profile: Profile, gpu: int) -> ModelSpec:
    """The model spec a profile serves on a GPU: the simulated model (a name or a config
    folder), else its ``--model-path`` derived from its config.json (``resolve_model``).

    Raises:
        ValueError: the model cannot be planned, in one line naming what is missing and where
            it looked (``tui.sglang.modelcfg.errors.ModelConfigError``).
    """
    if profile.engine.kind == "sim":
        return resolve_model(profile.engine.sim_model or DEFAULT_MODEL)
    flags = flags_for(profile, gpu)
    if flags.model_path is None:
        raise ValueError("server.model_path: not set, so there is no model to plan")
    load_format = dict(flags.extra_flags).get("load_format")
    return resolve_model(
        flags.model_path, load_format=load_format if isinstance(load_format, str) else None
    )


def build_for(profile: Profile, gpu: int) -> tuple[Build, str]:
    """The SGLang build whose arithmetic the profile's plan on ``gpu`` follows, and the words
    that say so (``SGLang 0.5.17 (auto: /opt/sglang/bin/python)``).

    The release the profile targets (``engine.sglang_version``, ``auto`` resolved with the
    profile's own ``engine.python`` and ``[env]``, else a running server's ``/server_info``),
    never a silent default: a release the planner has no arithmetic of is planned in 0.5.23's,
    and the words say that. A simulated fleet's ``--sim-build`` (``sim_build`` among the extra
    flags) is the build its simulator allocates by.

    Raises:
        ReleaseError: ``auto`` could not be resolved (one line naming the field).
    """
    if profile.engine.kind == "sim":
        asked = dict(flags_for(profile, gpu).extra_flags).get("sim_build")
        for build in BUILDS:
            if asked == build:
                return build, f"the simulator's build {build} (--sim-build)"
    try:
        release = profile_release(profile)
    except ReleaseError as exc:
        raise ReleaseError(
            f"engine.sglang_version = {profile.engine.sglang_version!r}: {exc}"
        ) from None
    build = next((b for b in BUILDS if b == release.version), SGLANG_0_5_23)
    words = release.describe()
    if build != release.version:
        words += (
            f", in SGLang {build}'s arithmetic (the planner models {' and '.join(MODELLED)} only)"
        )
    return build, words


MODELLED = (SGLANG_0_5_17, SGLANG_0_5_23)
"""The releases whose arithmetic the planner has (``tui.sglang.builds``)."""


def gpu_total_for(profile: Profile, gpu: int | None = None) -> int | None:
    """Device capacity: a sim profile's simulated kind, else what NVML reports for ``gpu``'s
    card (None when there is no driver to ask)."""
    if profile.engine.kind == "sim" and profile.engine.sim_gpu in SIM_GPU_KINDS:
        return SIM_GPU_KINDS[profile.engine.sim_gpu][1]
    if gpu is None:
        return None
    return gpu_capacity(profile.device_for(gpu) if gpu in profile.gpus else gpu)


def preflight(
    profile: Profile,
    gpu: int,
    *,
    gpu_total_bytes: int | None = None,
    calibration: Calibration | None = None,
    model: ModelSpec | None = None,
    other_resident_bytes: int = 0,
    card_bytes: int | None = None,
    beside: Beside | None = None,
) -> Preflight:
    """Predict what ``profile`` allocates on ``gpu``.

    Args:
        profile: The candidate profile (validated).
        gpu: A GPU of the profile.
        gpu_total_bytes: Device capacity; defaults to the simulated kind's for sim profiles.
        calibration: Sizes measured from a running server's log (see calibration_from_log).
        model: The model; defaults to the one the profile serves.
        other_resident_bytes: Memory other processes will still hold on the GPU at launch.
        card_bytes: The card's capacity where no driver answers (``--card``, ``--card-gb``:
            ``tui.gpu.cards``); the driver's answer wins.
        beside: For a slot sharing its card, what the fleet's other slots there will hold
            (``tui.retune.sharing.beside``): added to ``other_resident_bytes``, and said. The
            calibration's measured free memory is then not used: the old server measured it
            beside whatever its neighbours held at its own start, which is not known.

    Returns:
        The prediction.

    Raises:
        ValueError: the model, the GPU's capacity or the release cannot be known (naming which;
            ``ReleaseError`` for the release).
    """
    spec = model or model_for(profile, gpu)
    build, planned_for = build_for(profile, gpu)
    total = gpu_total_bytes or gpu_total_for(profile, gpu) or card_bytes
    if total is None:
        raise ValueError(
            f"gpu {gpu}: memory capacity unknown (no NVIDIA driver to ask); {CARD_HINT}"
        )
    flags = flags_for(profile, gpu)
    extra = dict(flags.extra_flags)
    if beside is not None:
        other_resident_bytes += beside.resident_bytes
    kwargs: dict[str, object] = {}
    for name, kind in _PASS_THROUGH.items():
        if name in extra and extra[name] is not False:
            kwargs[name.removesuffix("_decode")] = kind(extra[name])
    plan_for = functools.partial(
        plan_memory,
        spec,
        total,
        other_resident_bytes=other_resident_bytes,
        pre_bytes=None
        if beside is not None
        else _measured_pre(calibration, total, other_resident_bytes),
        mem_fraction_static=flags.mem_fraction_static,
        max_running_requests=flags.max_running_requests,
        mamba_full_memory_ratio=(
            flags.mamba_full_memory_ratio
            if flags.mamba_full_memory_ratio is not None
            else load_table().fallback("mamba_full_memory_ratio")  # SGLang's: 0.9
        ),
        speculative_algorithm=flags.speculative_algorithm,
        speculative_num_draft_tokens=flags.speculative_num_draft_tokens,
        mamba_radix_cache_strategy=flags.mamba_radix_cache_strategy or "auto",
        calibration=calibration,
        build=build,
        **kwargs,  # type: ignore[arg-type]
    )
    plan = plan_for(max_mamba_cache_size=flags.max_mamba_cache_size)
    why = None
    if plan.failure is not None:
        explicit = flags.max_mamba_cache_size is not None
        why = f"does not fit: {why_unfit(plan, plan_for, explicit=explicit)}"
    refused = launch_problems(profile, [gpu])
    if refused:
        why = f"does not start: {refused[0]}"
    return Preflight(
        gpu=gpu,
        profile=profile.name,
        fits=plan.ok and not refused,
        mamba_slots=plan.max_mamba_cache_size,
        kv_tokens=plan.max_total_num_tokens,
        max_running_requested=flags.max_running_requests,
        max_running_effective=plan.max_running_requests,
        # A plan that does not fit runs nothing: "does not fit" says it, not "capped".
        capped=plan.ok
        and bool(
            running_capped(
                flags.max_running_requests,
                plan.max_running_requests,
                cap_cause(plan.capped_by_mamba, plan.reduced_by_kv),
            )
        ),
        available_gpu_mem_bytes=plan.available_gpu_mem_bytes,
        calibrated=calibration is not None,
        why_not=why,
        plan=plan,
        planned_for=planned_for,
        beside=beside.describe() if beside is not None else "",
    )


def predict_walk(
    profile: Profile,
    gpus: Sequence[int],
    calibration_of: Callable[[int], Calibration | None],
    card_bytes: int | None = None,
    readings: Readings | None = None,
) -> list[tuple[int, Preflight | None, str]]:
    """Each GPU's prediction in the order a walk relaunches them (``gpus`` as given): a slot
    sharing its card with one relaunched before it is planned beside that one's predicted new
    server, else beside what its neighbours hold now (``tui.retune.sharing``).

    Args:
        profile: The (fitted) profile.
        gpus: Its GPUs, in walk order.
        calibration_of: Each GPU's calibration (its running server's log), or None.
        card_bytes: The card's capacity where no driver answers.
        readings: The driver's readings (default: the profile engine's).

    Returns:
        (gpu, prediction, "") or (gpu, None, why it cannot be predicted), in order.
    """
    planned: dict[int, int] = {}
    out: list[tuple[int, Preflight | None, str]] = []
    for gpu in gpus:
        try:
            near = beside(profile, gpu, planned, readings)
            item = preflight(
                profile,
                gpu,
                calibration=calibration_of(gpu),
                card_bytes=card_bytes,
                beside=near,
            )
        except (ValueError, KeyError) as exc:
            out.append((gpu, None, str(exc.args[0] if exc.args else exc)))
            continue
        if item.fits:
            planned[gpu] = item.plan.resident_bytes
        out.append((gpu, item, ""))
    return out


def crowded(
    profile: Profile,
    gpus: Sequence[int],
    calibration_of: Callable[[int], Calibration | None],
    readings: Readings | None = None,
) -> list[str]:
    """Why a run must not begin: a GPU of ``gpus`` that shares its card with the fleet's other
    slots and is predicted not to fit beside what they hold now, one line each (nothing is
    stopped then). A GPU that cannot be predicted is not refused here (the preflight says why).
    Blocking (the driver, the fleet state, the logs)."""
    refusals = []
    for gpu in gpus:
        if gpu not in profile.gpus:
            continue  # the engine's validation names it
        try:
            near = beside(profile, gpu, None, readings)
            if near is None or not near.held:
                continue
            item = preflight(profile, gpu, calibration=calibration_of(gpu), beside=near)
        except (ValueError, KeyError):
            continue
        if not item.fits and item.why_not and item.why_not.startswith("does not fit"):
            refusals.append(f"GPU {gpu}: {item.why_not}; {item.beside}: nothing was stopped")
    return refusals


def _measured_pre(
    calibration: Calibration | None, total: int, other_resident_bytes: int
) -> int | None:
    """The free memory the running server measured before its weights, as the next launch
    will find it (less what other processes hold now), where it disagrees with the planner's
    own estimate (capacity less a CUDA context fitted on a B200) beyond the log's rounding.

    Seen on a real 0.5.17 server on an H100: it measured 78.50 GB of 79.65 GiB (a context
    near 1.15 GiB, not 0.6): the estimate put 0.6 % more KV tokens in the pool than it got.
    """
    if calibration is None or calibration.pre_bytes is None:
        return None
    estimate = total - CUDA_CONTEXT_BYTES - other_resident_bytes
    measured = max(calibration.pre_bytes - other_resident_bytes, 0)
    if abs(measured - estimate) <= calibration.tolerance_of("pre_bytes"):
        return None
    return measured
