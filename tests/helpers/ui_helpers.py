"""Fixed-data builders and fakes for the console's tests (no clocks, no randomness)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from repo_paths import ROOT

from tui import paths
from tui.control.stop_release import StopReleased
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.gpu.snapshot import GpuProcess, GpuSnapshot
from tui.ops.adoption import AdoptError, AdoptPlan
from tui.ops.alerts.engine import AlertFired
from tui.ops.commands import (
    Adopt,
    Apply,
    Canary,
    Kill,
    Kind,
    Op,
    Relaunch,
    Rollback,
    Rollout,
    Saved,
    SaveProfile,
    StopFleet,
)
from tui.ops.events import EventSink, OpEvent
from tui.ops.journal import JournalRead
from tui.ops.marks import OperationMark, Window
from tui.ops.port import Capabilities, Fleet, FleetReads, SearchStatus, Tuning
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus, Rate, ServerShare
from tui.profiles import Problem, Profile, ProfileError, load_profile
from tui.retune.events import (
    ApplyFinished,
    ApplyResult,
    EffectiveValues,
    GpuFailed,
    GpuPhase,
    GpuReady,
    MeasureProgress,
    RequestedValues,
    ThroughputComparison,
    VerifyReport,
)
from tui.retune.preflight import Preflight, preflight
from tui.rollout.beside import Beside, Change, Side
from tui.rollout.canary_result import CanaryResult, look_from
from tui.rollout.cost import RetuneCost
from tui.rollout.rollout import RolloutResult
from tui.rollout.stats import decide, look_level, paired
from tui.state.fleet_state import GpuState

if TYPE_CHECKING:  # the UI's widgets only where a helper drives them (imported there)
    from textual.pilot import Pilot
    from textual.screen import Screen

    from tui.ui.app import FleetApp
    from tui.ui.history.chart import HistoryChart
    from tui.ui.pipeline.generation_pane import GenerationPane

REPO = ROOT
"""The repository root (the shipped profiles live in ``profiles/``)."""


def shipped_profiles() -> dict[str, Profile]:
    """The repository's simulated profiles, by name."""
    return {
        name: load_profile(REPO / "profiles" / f"{name}.toml")
        for name in ("sim-baseline", "sim-aggressive")
    }


GIB = 1024**3
T0 = 1_778_364_000.0
"""A fixed 'now' (2026-05-09) every builder uses instead of the clock."""

ALL_GPUS = (0, 1, 2, 3, 4, 5, 6)
"""The seven GPUs of the fixed fleet."""

ALLOCATION_LINES = (
    "[2026-05-09 22:18:20] Load weight end. type=Qwen3NextForCausalLM, dtype=torch.bfloat16, "
    "avail mem=123.41 GB, mem usage=51.62 GB.",
    "[2026-05-09 22:18:28] Mamba Cache is allocated. max_mamba_cache_size: 200, conv_state size: "
    "0.55GB, ssm_state size: 28.27GB",
    "[2026-05-09 22:18:28] KV Cache is allocated. #tokens: 798080, "
    "K size: 24.36 GB, V size: 24.36 GB",
    "[2026-05-09 22:18:34] max_total_num_tokens=798080, chunked_prefill_size=16384, "
    "max_prefill_tokens=16384, max_running_requests=40, context_len=262144",
)
"""The seed's allocation lines, as a server snapshot carries them."""

OOM_LINE = (
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: mem_fraction_static=0.95"
)
"""The failed server's last error."""

LOG_LINES = (
    "[2026-05-09 22:18:20] Load weight end. mem usage=51.62 GB.",
    "[2026-05-09 22:18:34] max_total_num_tokens=798080, max_running_requests=40",
    "[2026-05-09 22:18:40] The server is fired up and ready to roll!",
    "[2026-05-09 22:19:01] Decode batch. #running-req: 40, #token: 431208, token usage: 0.54, "
    "gen throughput (token/s): 1402.31, #queue-req: 12,",
    "[2026-05-09 22:19:11] Decode batch. #running-req: 40, #token: 440112, token usage: 0.55, "
    "gen throughput (token/s): 1398.77, #queue-req: 9,",
    "[2026-05-09 22:19:20] Prefill batch. #new-seq: 2, #new-token: 8192, #cached-token: 0, "
    "#running-req: 38, #queue-req: 7,",
)
"""A fixed log tail for the detail screen."""


def gpu(index: int, *, used_gib: float = 120.0, util: float | None = 97.0) -> GpuSnapshot:
    """An H200 reading with plausible numbers that depend only on ``index``."""
    total = 143_771_000_832
    used = int(used_gib * GIB)
    return GpuSnapshot(
        index=index,
        name="NVIDIA H200",
        uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-00000000000{index % 10}",
        memory_total=total,
        memory_used=used,
        memory_free=total - used,
        utilization_gpu=util,
        utilization_memory=61.0,
        temperature_c=58.0 + index,
        power_w=610.0 + 5 * index,
        power_limit_w=700.0,
        sm_clock_mhz=1980,
        mem_clock_mhz=3201,
        processes=(GpuProcess(pid=4200 + index, used_bytes=used - GIB, name="python3"),),
        source="sim",
        taken_at=T0,
    )


def history(index: int, length: int = 40) -> tuple[float, ...]:
    """A deterministic throughput history (a ramp with a dip) for GPU ``index``."""
    return tuple(
        1000.0 + 10 * ((i * (index + 3)) % 37) - (300 if 20 <= i < 24 else 0) for i in range(length)
    )


def ready_server(index: int, **changes: Any) -> ServerSnapshot:
    """A ready, loaded server on GPU ``index``; ``changes`` override fields."""
    server = ServerSnapshot(
        port=30000 + index,
        state=ServerState.READY,
        pid=4200 + index,
        log_path=f"/workspace/logs/sglang_gpu{index}.log",
        kv_tokens=798_080,
        mamba_slots=200,
        max_running_requested=None,
        max_running_effective=64,
        running=40,
        queued=12 - index,
        token_usage=0.54,
        mamba_usage=0.2,
        gen_throughput=1402.3 - index,
        accept_len=2.71,
        throughput_history=history(index),
        allocation_lines=ALLOCATION_LINES,
        ready_at=T0 - 600,
        updated_at=T0,
    )
    return replace(server, **changes)


def seven_gpu_fleet() -> FleetSnapshot:
    """The fixture fleet: capped (0), ready (1, 5), failed with OOM (2), starting (3), stale (4),
    and a ready server whose GPU has no reading (6)."""
    panels = [
        GpuPanel(
            0,
            gpu(0),
            ready_server(0, max_running_requested=64, max_running_effective=40, capped=True),
        ),
        GpuPanel(1, gpu(1), ready_server(1)),
        GpuPanel(
            2,
            gpu(2, used_gib=3.1, util=0.0),
            ready_server(
                2,
                state=ServerState.FAILED,
                pid=None,
                running=None,
                queued=None,
                token_usage=None,
                mamba_usage=None,
                gen_throughput=None,
                throughput_history=(),
                kv_tokens=None,
                mamba_slots=None,
                max_running_effective=None,
                last_error=OOM_LINE,
                error_reason="oom",
            ),
        ),
        GpuPanel(
            3,
            gpu(3, used_gib=52.0, util=12.0),
            ready_server(
                3,
                state=ServerState.STARTING,
                phase="capturing CUDA graphs",
                running=None,
                queued=None,
                token_usage=None,
                mamba_usage=None,
                gen_throughput=None,
                throughput_history=(),
            ),
        ),
        GpuPanel(4, gpu(4), ready_server(4, state=ServerState.STALE)),
        GpuPanel(5, gpu(5), ready_server(5)),
        GpuPanel(6, None, ready_server(6), gpu_note="NVML cannot read GPU 6 (no permission)"),
    ]
    return FleetSnapshot(panels=tuple(panels), gpu_source="simulated GPUs (7)", taken_at=T0)


def fleet_of(count: int) -> FleetSnapshot:
    """``count`` ready GPUs (for the layout tests)."""
    panels = tuple(GpuPanel(i, gpu(i), ready_server(i)) for i in range(count))
    return FleetSnapshot(panels=panels, gpu_source=f"simulated GPUs ({count})", taken_at=T0)


def pipeline_status(
    state: str = "running",
    updated_at: float = T0,
    tok_s: float = 3456.0,
) -> PipelineStatus:
    """A pipeline a third of the way through the seed's job."""
    servers = tuple(
        ServerShare(
            url=f"http://127.0.0.1:{30000 + i}",
            done=43_000 + 1000 * i,
            failed=3 if i == 2 else 0,
            in_flight=0 if i == 2 else 48,
            healthy=i != 2,
            output_tokens=9_000_000 + i,
        )
        for i in range(7)
    )
    return PipelineStatus(
        schema=1,
        state=state,
        pid=9001,
        started_at=T0 - 3 * 3600,
        updated_at=updated_at,
        total=913_786,
        done=322_000,
        failed=12,
        in_flight=288,
        rate_1m=Rate(60.0, 6.1, tok_s),
        rate_10m=Rate(600.0, 5.9, 3300.0),
        eta_s=(913_786 - 322_000) / 6.1,
        servers=servers,
    )


@dataclass
class FixedPoller:
    """A snapshot source that returns ``snapshot`` (tests may swap it) and counts its polls."""

    snapshot: FleetSnapshot
    polls: int = 0

    async def poll(self) -> FleetSnapshot:
        """Return the current fixed snapshot."""
        self.polls += 1
        return self.snapshot


ScriptedApply = Callable[[str, tuple[int, ...]], list[OpEvent]]
"""Gives the events an apply emits (the last one an ``ApplyFinished``) for (profile, gpus)."""

ScriptedCanary = Callable[[str, int], tuple[list[OpEvent], CanaryResult]]
"""Gives a canary's retune events and looks (in order), and its result, for (profile, gpu)."""

ScriptedRollout = Callable[[str, int], tuple[list[OpEvent], RolloutResult]]
"""Gives a rollout's retune events (in order) and its result, for (profile, batch)."""
ScriptedRollback = Callable[[tuple[int, ...], bool], tuple[list[OpEvent], RolloutResult]]
"""Gives a rollback's events (in order) and its result, for (GPUs, all at once)."""


@dataclass
class RecordingFleet(Fleet, FleetReads, Tuning):
    """A port (``tui.ops.port.Fleet``, its reads and its tuning reads: mypy holds it to each
    protocol) on fixed data that offers ``supported`` and records every command that reaches it,
    in order (``commands``).

    Profiles live in memory (the shipped sim profiles by default); the preflight is the real core
    prediction for those sim profiles; an apply plays ``apply_script``'s events into the sink,
    yielding to the loop between events so the screen shows each one.
    """

    supported: frozenset[Kind] = frozenset(Kind)
    commands: list[Op[Any]] = field(default_factory=list)
    """Every command run, in order."""
    profiles: dict[str, Profile] = field(default_factory=shipped_profiles)
    current: str | None = "sim-baseline"
    apply_script: ScriptedApply | None = None
    saved: list[Profile] = field(default_factory=list)
    gates: dict[int, asyncio.Event] = field(default_factory=dict)
    """An apply waits on ``gates[i]`` (when present) before emitting its event number i."""
    rollback_script: ScriptedRollback | None = None
    """Events and result of a rollback (default: ``scripted_rollback()``, every GPU back to
    sim-baseline one at a time, the fleet 'better')."""
    canary_script: ScriptedCanary | None = None
    """Events, looks and result of a canary (default: ``scripted_canary()``, 'better')."""
    rollout_script: ScriptedRollout | None = None
    """Events and result of a rollout (default: ``scripted_rollout()``, GPU 4 failing)."""
    stop_events: list[OpEvent] = field(default_factory=list)
    """What stopping the fleet reports (drain progress) before it waits on ``stop_gate``."""
    stop_gate: asyncio.Event | None = None
    """Stopping the fleet lasts until this is set (None: it ends at once)."""
    stop_errors: list[Exception] = field(default_factory=list)
    """Stopping the fleet raises the first of these (then the next, ...): servers it left."""
    starts_fresh_job: bool = False
    """A start after the job finished starts it afresh (the demo's port)."""
    stops_pipeline_with_fleet: bool = False
    """Stopping the fleet stops the pipeline too."""
    controls: tuple[int, ...] | None = None
    """The control GPUs the port picks for a canary (None: every other GPU)."""
    kill_outcomes: Sequence[StopReleased] = ()
    """What a stop returns (each GPU's outcome)."""
    relaunch_results: tuple[ApplyResult, ...] = ()
    """What a relaunch returns (each run's result)."""
    poller: FixedPoller = field(default_factory=lambda: FixedPoller(seven_gpu_fleet()))
    """The snapshots (the seven-GPU fleet by default)."""
    status: PipelineStatus | None = None
    """The job's status document."""
    energy: JobEnergy | None = None
    """The job's energy ledger."""
    nodes_firing: tuple[AlertFired, ...] | None = None
    """The nodes' alerts it carries (None: none, the console runs its own, as on one node)."""
    marks_read: tuple[OperationMark, ...] = ()
    """The journal's markers."""
    journal_read: JournalRead = field(default_factory=lambda: JournalRead((), 0))
    """The journal."""
    running_read: dict[int, GpuState] = field(default_factory=dict)
    """Each GPU's current and previous profile."""
    tail: Callable[[Path, int], list[str]] = field(default=lambda path, n: list(LOG_LINES)[-n:])
    """A log's newest lines."""
    follows_autotune: bool = True
    """It reads the autotune search's status: the state directory's, as a local port does
    (the tests write it); False: none (as on many nodes)."""

    # --- the port ---------------------------------------------------------------------------

    @property
    def reads(self) -> RecordingFleet:
        return self

    def capabilities(self) -> Capabilities:
        return Capabilities(
            frozenset(self.supported),
            starts_fresh_job=self.starts_fresh_job,
            stops_pipeline_with_fleet=self.stops_pipeline_with_fleet,
            picks_controls=self.controls is not None,
            follows_autotune=self.follows_autotune,
        )

    async def snapshot(self) -> FleetSnapshot:
        return await self.poller.poll()

    async def run(self, command: Op[Any], sink: EventSink | None = None) -> Any:
        self.commands.append(command)
        match command:
            case Kill():
                return tuple(self.kill_outcomes)
            case Relaunch():
                return self.relaunch_results
            case Apply(_, gpus):
                script = self.apply_script or scripted_apply()
                return await self._play(script(command.name, gpus or ()), sink)
            case Rollback(gpus, _, all_at_once):
                script_b = self.rollback_script or scripted_rollback()
                items, result = script_b(gpus or ALL_GPUS, all_at_once)
                await self._feed(items, sink)
                return result
            case Canary(_, gpu):
                items, canary = (self.canary_script or scripted_canary())(command.name, gpu)
                await self._feed(items, sink)
                return canary
            case Rollout(_, batch):
                items, result = (self.rollout_script or scripted_rollout())(command.name, batch)
                await self._feed(items, sink)
                return result
            case StopFleet():
                return await self._stop_fleet(sink)
            case SaveProfile(profile):
                self.saved.append(profile)
                self.profiles[profile.name] = profile
                return Saved((f"/profiles/{profile.name}.toml",))
            case Adopt(plan):
                return plan
        return None

    async def _stop_fleet(self, sink: EventSink | None) -> tuple[StopReleased, ...]:
        for event in self.stop_events:
            if sink is not None:
                sink(event)
            await asyncio.sleep(0)
        if self.stop_gate is not None:
            await self.stop_gate.wait()
        if self.stop_errors:
            raise self.stop_errors.pop(0)
        return ()

    async def _play(self, events: list[OpEvent], sink: EventSink | None) -> ApplyResult:
        for index, event in enumerate(events):
            if index in self.gates:
                await self.gates[index].wait()
            if sink is not None:
                sink(event)
            await asyncio.sleep(0)
        final = events[-1]
        assert isinstance(final, ApplyFinished)
        return final.result

    async def _feed(self, items: list[OpEvent], sink: EventSink | None) -> None:
        """Play ``items`` (gated like an apply; ``gates[len(items)]`` holds back the result)."""
        for index, item in enumerate(items):
            if index in self.gates:
                await self.gates[index].wait()
            if sink is not None:
                sink(item)
            await asyncio.sleep(0)
        if len(items) in self.gates:
            await self.gates[len(items)].wait()

    # --- the reads --------------------------------------------------------------------------

    def profile_names(self) -> list[str]:
        return sorted(self.profiles)

    def current_profile(self) -> str | None:
        return self.current

    def load_profile(self, name: str) -> Profile:
        if name not in self.profiles:  # as the console's port says it (not a KeyError)
            raise ProfileError([Problem("file", name, f"no profile named {name!r}")], name)
        return self.profiles[name]

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        return [preflight(profile, gpu) for gpu in gpus]

    def targets(self, gpus: tuple[int, ...]) -> tuple[int, ...]:
        return gpus

    def gpu_label(self, gpu: int) -> str:
        return f"gpu{gpu}"

    def tuning(self, gpu: int | None) -> RecordingFleet:
        return self

    def running(self) -> dict[int, GpuState]:
        return dict(self.running_read)

    def journal(self) -> JournalRead:
        return self.journal_read

    def marks(self) -> list[OperationMark]:
        return list(self.marks_read)

    def pipeline_status(self) -> PipelineStatus | None:
        return self.status

    def job_energy(self) -> JobEnergy | None:
        return self.energy

    def node_alerts(self) -> tuple[AlertFired, ...] | None:
        return self.nodes_firing

    def log_tail(self, path: Path, max_lines: int) -> list[str]:
        return self.tail(path, max_lines)

    def canary_controls(self, gpu: int) -> tuple[int, ...] | None:
        return self.controls

    def autotune_status(self) -> SearchStatus | None:
        from tui.console_wiring import DetachedAutotune

        return DetachedAutotune().status() if self.follows_autotune else None

    async def plan_adoption(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptPlan:
        raise AdoptError("this recorder adopts nothing")

    # --- what the tests read ----------------------------------------------------------------

    def apply_script_events(
        self, name: str = "x", gpus: tuple[int, ...] = (0,) * 7
    ) -> list[OpEvent]:
        """The events the apply would emit for (name, gpus), to place gates by index."""
        return (self.apply_script or scripted_apply())(name, gpus)

    def applied(self) -> list[tuple[str, tuple[int, ...] | None]]:
        """The (profile name, GPUs) of every apply, in order."""
        return [(c.name, c.gpus) for c in self.commands if isinstance(c, Apply)]

    def applied_profiles(self) -> list[Profile]:
        """The profiles every apply carried itself (the tuning form's), in order."""
        applies = [c for c in self.commands if isinstance(c, Apply)]
        return [c.profile for c in applies if not isinstance(c.profile, str)]


STARTUP_PHASES = (
    "stopping",
    "memory released",
    "launching",
    "loading weights",
    "allocating KV cache",
    "capturing CUDA graphs",
)
"""The phases every scripted GPU goes through."""

APPLY_OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 5 has a total "
    "capacity of 178.35 GiB of which 1.02 GiB is free."
)
"""GPU 5's failure line in the scripted apply."""


def verify_report(gpu: int, profile: str, *, failed: bool = False) -> VerifyReport:
    """The seed's aggressive numbers on ``gpu`` (64 asked, 40 effective); or an OOM failure."""
    requested = RequestedValues(0.93, 200, 0.6, 64)
    if failed:
        return VerifyReport(
            gpu=gpu,
            ok=False,
            profile=profile,
            requested=requested,
            effective=EffectiveValues(),
            failure="OOM while allocating the Mamba cache",
            error_line=APPLY_OOM_LINE,
            error_reason="oom",
            phases=tuple((p, 5.0 * i) for i, p in enumerate(STARTUP_PHASES)),
        )
    return VerifyReport(
        gpu=gpu,
        ok=True,
        profile=profile,
        requested=requested,
        effective=EffectiveValues(40, 200, 798_080 - 1000 * gpu, 12.5, "capped to 40"),
        time_to_ready_s=61.0 + gpu,
        free_memory_bytes=int((11.0 + 0.1 * gpu) * GIB),
        phases=tuple((p, 5.0 * i) for i, p in enumerate(STARTUP_PHASES)),
    )


def scripted_apply(failing: tuple[int, ...] = ()) -> ScriptedApply:
    """An apply where every GPU goes through the phases, ``failing`` ones fail with an OOM line,
    then the throughput is measured ('better', +21%)."""

    def script(name: str, gpus: tuple[int, ...]) -> list[OpEvent]:
        events: list[OpEvent] = []
        for step, phase in enumerate(STARTUP_PHASES):
            events += [GpuPhase(g, phase, 5.0 * step) for g in gpus]
        reports = tuple(verify_report(g, name, failed=g in failing) for g in gpus)
        events += [GpuFailed(r.gpu, r) if not r.ok else GpuReady(r.gpu, r) for r in reports]
        events += [MeasureProgress("before", 6, 30.0), MeasureProgress("warm-up", 0, 10.0)]
        events += [MeasureProgress("after", n, 30.0) for n in (1, 3, 6)]
        throughput = ThroughputComparison(
            before=(13_000.0, 13_400.0, 13_200.0, 13_600.0, 13_100.0, 13_500.0),
            after=(16_000.0, 16_300.0, 15_900.0, 16_400.0, 16_100.0, 16_200.0),
            verdict="better",
            relative_change=0.2134,
            ci_low=0.1872,
            ci_high=0.2396,
            sureness=0.9999,
        )
        result = ApplyResult(
            profile=name,
            previous_profiles={g: "sim-baseline" for g in gpus},
            gpus=gpus,
            reports=reports,
            throughput=throughput,
            started_at=T0,
            finished_at=T0 + 142.0,
            diff=("server.max_mamba_cache_size: 80 -> 200",),
        )
        events.append(ApplyFinished(result))
        return events

    return script


CONTROL_TOKENS = (1380.0, 1402.0, 1365.0, 1391.0, 1377.0, 1398.0, 1384.0, 1370.0)
"""Mean control output tokens/s per interval of the scripted canaries."""
CONTROL_REQUESTS = (0.47, 0.48, 0.46, 0.47, 0.47, 0.48, 0.47, 0.46)
"""Mean control requests/s per interval."""
NOISE = (-5.0, 4.0, -2.0, 6.0, -3.0, 1.0, 0.0, -4.0)
"""A fixed per-interval wobble of the canary GPU."""


def scripted_canary(verdict: str = "better", lost: float = 6.3) -> ScriptedCanary:
    """A canary whose GPU restarts through the phases, then looks at 5, 6, ... intervals of 5 s
    (the core's own ``decide``) until a look is final or 8 intervals were measured.

    ``verdict`` 'better': the canary makes 10% more with a wide wobble (final at the third
    look); otherwise the same as the control, undecided at the end of the window.
    """
    gain, wobble = (1.10, 25.0) if verdict == "better" else (1.0, 10.0)
    canary = [k * gain + wobble * e for k, e in zip(CONTROL_TOKENS, NOISE, strict=True)]
    requests = [k * gain + e / 1000 for k, e in zip(CONTROL_REQUESTS, NOISE, strict=True)]
    level = look_level(0.95, 4)

    def script(name: str, gpu: int) -> tuple[list[OpEvent], CanaryResult]:
        events: list[OpEvent] = [GpuPhase(gpu, p, 5.0 * i) for i, p in enumerate(STARTUP_PHASES)]
        report = verify_report(gpu, name)
        events.append(GpuReady(gpu, report))
        for n in range(5, 9):
            est = paired(canary[:n], CONTROL_TOKENS[:n], level)
            decision = decide(est, 0.03)
            look = look_from(gpu, n, decision, 5.0)
            events.append(replace(look, estimate=est))
            if decision.final:
                break
        assert est is not None
        result = CanaryResult(
            name,
            gpu,
            tuple(g for g in ALL_GPUS if g != gpu),
            "sim-baseline",
            decision.verdict,
            decision.reason if decision.final else "window 40 s ended; no verdict in reach",
            est,
            paired(requests[:n], CONTROL_REQUESTS[:n], level),
            per_gpu_tokens={g: 1380.0 for g in ALL_GPUS},
            more_s_to_exclude_zero=look.more_s_to_exclude_zero,
            more_s_to_bound=look.more_s_to_bound,
            looks=n - 4,
            look_level=level,
            stopped_early=decision.final,
            window_s=5.0 * n,
            report=report,
            cost=RetuneCost(lost, lost, lost, 9660.0, 1380.0, 7, 30.0, True),
            started_at=T0,
            finished_at=T0 + 110.0,
            beside=SCRIPTED_BESIDE,
        )
        return events, result

    return script


SCRIPTED_BESIDE = Beside(
    Side("canary", (3,), (T0 + 70.0, T0 + 110.0), 0.84, 412, 0.021, 30210, 61000.0, 42500.0, 1.435),
    Side("control", (0, 1, 2, 4, 5, 6), (T0 + 70.0, T0 + 110.0), 0.35, 2390, 0.02, 172200, 331000.0,
         252000.0, 1.3135),
    Change(1.4, 0.98, 1.9, 0.95),
    Change(None, note="both p90s in the 0.02 .. 0.025 s bucket: no finer reading"),
    Change(0.0925, 0.061, 0.124, 0.95),
    8,
)  # fmt: skip
"""The scripted canary's figures beside throughput: TTFT p90 up, tokens per joule up."""


def scripted_rollout(failing: int | None = 4, skipped: tuple[int, ...] = (3,)) -> ScriptedRollout:
    """A rollout one batch per GPU (GPU order, ``skipped`` left out), stopping at ``failing``:
    its OOM, the later GPUs stay, the failed one is relaunched on its old profile."""

    def script(name: str, batch: int) -> tuple[list[OpEvent], RolloutResult]:
        planned = tuple(g for g in ALL_GPUS if g not in skipped)
        events: list[OpEvent] = []
        done: list[int] = []
        for gpu in planned:
            events += [GpuPhase(gpu, p, 5.0 * i) for i, p in enumerate(STARTUP_PHASES)]
            report = verify_report(gpu, name, failed=gpu == failing)
            events.append(GpuReady(gpu, report) if report.ok else GpuFailed(gpu, report))
            events.append(ApplyFinished(_batch_result(name, report)))
            if gpu == failing:
                break
            done.append(gpu)
        stopped = failing in planned
        result = RolloutResult(
            name,
            False,
            planned,
            (),
            tuple(done),
            (failing,) if stopped and failing is not None else (),
            tuple(g for g in planned if failing is not None and g > failing) if stopped else (),
            (failing,) if stopped and failing is not None else (),
            skipped,
            f"GPU {failing}: OOM while allocating the Mamba cache" if stopped else None,
            RetuneCost(71.4, 70.2, 80.0, 9660.0, 1380.0, 7, 300.0, True),
            T0,
            T0 + 251.0,
        )
        return events, result

    return script


FLEET_BETTER = ThroughputComparison(
    (9500.0, 9650.0, 9580.0, 9610.0),
    (11900.0, 12010.0, 11950.0, 11880.0),
    "better",
    0.2443,
    0.2350,
    0.2536,
    0.95,
    0.9999,
)
"""A fleet verdict: +24.4% (95% CI +23.5% .. +25.4%), ~9,585 -> ~11,935 tok/s."""


def scripted_rollback(
    failing: int | None = None, verdict: ThroughputComparison | None = FLEET_BETTER
) -> ScriptedRollback:
    """A rollback to sim-baseline in reverse GPU order (one batch per GPU, or one batch when all
    at once), the verdict's windows reported, stopping at ``failing``; ends with ``verdict``."""

    def script(gpus: tuple[int, ...], all_at_once: bool) -> tuple[list[OpEvent], RolloutResult]:
        planned = tuple(sorted(gpus, reverse=True))
        events: list[OpEvent] = [MeasureProgress("before", 0, 30.0)]
        done: list[int] = []
        for gpu in planned:
            events += [GpuPhase(gpu, p, 5.0 * i) for i, p in enumerate(STARTUP_PHASES)]
            report = verify_report(gpu, "sim-baseline", failed=gpu == failing)
            events.append(GpuReady(gpu, report) if report.ok else GpuFailed(gpu, report))
            if gpu == failing and not all_at_once:
                break
            if report.ok:
                done.append(gpu)
        events += [MeasureProgress("warm-up", 0, 10.0), MeasureProgress("after", 0, 30.0)]
        failed = (failing,) if failing in planned else ()
        stayed = planned[planned.index(failing) + 1 :] if failed and not all_at_once else ()
        result = RolloutResult(
            "",
            True,
            planned,
            (),
            tuple(done),
            failed,
            stayed,
            failed,
            (),
            f"GPU {failing}: OOM while allocating the Mamba cache" if failed else None,
            RetuneCost(12.5, 12.0, 14.0, 9585.0, 1369.0, 7, 120.0, True),
            T0,
            T0 + 180.0,
            verdict=verdict,
        )
        return events, result

    return script


def _batch_result(name: str, report: VerifyReport) -> ApplyResult:
    """One batch's apply result (the rollout's screen must not end on it)."""
    return ApplyResult(
        name,
        {report.gpu: "sim-baseline"},
        (report.gpu,),
        (report,),
        ThroughputComparison((), (), "not measured"),
        T0,
        T0 + 60.0,
    )


def fixed_log_tail(path: Path, max_lines: int) -> list[str]:
    """A LogTail returning ``LOG_LINES`` whatever the path."""
    return list(LOG_LINES)[-max_lines:]


def make_app(
    fleet: FleetSnapshot | None = None,
    *,
    actions: RecordingFleet | None = None,
    status: PipelineStatus | None = None,
    marks: tuple[OperationMark, ...] = (),
    profile: str | None = None,
    poll_interval_s: float = 3600.0,
    journal: JournalRead | None = None,
    running: dict[int, GpuState] | None = None,
    readonly: bool = False,
    node_groups: bool = False,
    log_tail: Callable[[Path, int], list[str]] = fixed_log_tail,
) -> FleetApp:
    """A FleetApp on a recording port with fixed data. A long poll interval keeps each test to
    its first reading."""
    from tui.ui.app import FleetApp

    port = actions if actions is not None else RecordingFleet()
    port.poller.snapshot = fleet if fleet is not None else seven_gpu_fleet()
    port.status, port.marks_read, port.tail = status, marks, log_tail
    port.journal_read = journal if journal is not None else JournalRead((), 0)
    port.running_read = dict(running or {})
    return FleetApp(
        port,
        profile=profile,
        poll_interval_s=poll_interval_s,
        readonly=readonly,
        node_groups=node_groups,
    )


@contextlib.asynccontextmanager
async def settled_app(
    fleet: FleetSnapshot | None = None, *, size: tuple[int, int] = (120, 40), **kwargs: Any
) -> AsyncIterator[tuple[FleetApp, Pilot[None]]]:
    """``make_app(fleet, **kwargs)`` run at ``size`` and settled; yields the app and its pilot."""
    app = make_app(fleet, **kwargs)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        yield app, pilot


async def settle(pilot: Pilot[Any], app: FleetApp) -> None:
    """Wait (bounded) until the first fleet snapshot and pipeline reading reached the screen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    screen = app.main_screen
    while not screen.fleet.panels or not screen.query("GpuPanelView"):
        assert loop.time() < deadline, "no fleet snapshot reached the screen"
        await pilot.pause(0.01)
    await pilot.pause()


async def finish_actions(pilot: Pilot[Any], app: FleetApp) -> None:
    """Let every backend call the app started complete."""
    from tui.ui.app import ACTIONS
    from tui.ui.retune.apply_screen import APPLY
    from tui.ui.rollout.canary_screen import CANARY
    from tui.ui.rollout.rollout_screen import ROLLOUT

    await pilot.pause()
    # the apply, canary and rollout screens run their operation in their own workers
    groups = (ACTIONS, APPLY, CANARY, ROLLOUT)
    started = [w for w in app.workers if w.group in groups]
    if started:  # an empty list would wait for every worker, the polls' too (they never end)
        await app.workers.wait_for_complete(started)
    await pilot.pause()


RETUNE_TIMES = (T0 - 2400.0, T0 - 900.0)
"""When two operations changed servers inside the last hour of the pipeline history."""

RETUNE_MARKS = (
    OperationMark(RETUNE_TIMES[0], "canary", "canary sim-aggressive GPU 2", True),
    OperationMark(
        RETUNE_TIMES[1],
        "apply",
        "apply sim-aggressive GPUs 0-6",
        True,
        (Window("before", T0 - 1200, T0 - 900), Window("after", T0 - 780, T0 - 480)),
    ),
)
"""The journal's markers of those two: a canary, then an apply that measured its windows."""


def pipeline_history_statuses() -> list[PipelineStatus]:
    """An hour of status documents a minute apart: steady, a dip at each retune, then recovery."""
    statuses = []
    for minute in range(61):
        t = T0 - 3600 + 60 * minute
        dip = any(0 <= t - mark < 180 for mark in RETUNE_TIMES)
        rate = 1200.0 if dip else 3300.0 + 4 * minute
        statuses.append(pipeline_status(updated_at=t, tok_s=rate))
    return statuses


def recorded_hour(app: FleetApp) -> None:
    """An hour of status documents a minute apart (two retune dips), written to the app's
    history (as an earlier console did: older than the document the app has just read)."""
    from tui.history.samples import pipeline_samples

    for status in pipeline_history_statuses():
        app.history.add(pipeline_samples(status))
    app.history.flush()


async def show_chart(pilot: Pilot[Any], app: FleetApp) -> tuple[GenerationPane, HistoryChart]:
    """``recorded_hour``, then the generation pane shown at ``T0`` (``g``) and its chart read.

    Returns:
        The pane and its chart (with data).
    """
    from tui.ui.history.chart import HistoryChart
    from tui.ui.pipeline.generation_pane import GenerationPane

    recorded_hour(app)
    pane = app.screen.query_one(GenerationPane)
    pane.clock = lambda: T0
    await pilot.press("g")
    chart = pane.query_one(HistoryChart)
    await wait_for(pilot, lambda: chart.data is not None, "the chart")
    await pilot.pause()
    return pane, chart


async def wait_for(
    pilot: Pilot[Any], condition: Callable[[], bool], what: str = "condition", timeout: float = 10
) -> None:
    """Pause the pilot until ``condition()`` holds (bounded: ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.01)


async def press_until(
    pilot: Pilot[Any], keys: tuple[str, ...], screen_type: type[Screen[Any]]
) -> None:
    """Press ``keys`` one by one, each after the screens the previous one opened (workers read
    the backend before a modal appears), and wait until the top screen is a ``screen_type``."""
    app = pilot.app
    for key in keys:
        before = len(app.screen_stack)

        def opened(before: int = before) -> bool:
            return len(app.screen_stack) > before

        await pilot.press(key)
        await pilot.pause()
        if key in ("r", "R", "t", "T", "b", "j", "c", "o"):  # these open a screen from a worker
            await wait_for(pilot, opened, f"a screen after {key!r}")
    await wait_for(pilot, lambda: isinstance(app.screen, screen_type), screen_type.__name__)
    from tui.ui.tuning.form_screen import TuningFormScreen

    form = app.screen
    if isinstance(form, TuningFormScreen):  # it opens at once and reads its profile meanwhile
        await wait_for(pilot, lambda: form.type_ahead.ready, "the tuning form's inputs")


def graphs_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid's own history reads no longer reach the panels: the test hands each panel its
    graphs itself. Why: the grid reads the history in a thread at start-up and whenever a cell
    completes; under load such a read lands between a test's steps and replaces its graphs."""
    from tui.ui.grid.gpu_grid import GpuGrid

    monkeypatch.setattr(GpuGrid, "_take_graphs", lambda self, series: None)


def write_settings(text: str) -> None:
    """Write the test's ``settings.toml`` (its own config directory, ``conftest.py``)."""
    settings = paths.settings_file()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(text)


def count_bells(app: object, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The times ``app`` rings the terminal bell from now on (it rings nothing)."""
    rung: list[float] = []
    monkeypatch.setattr(app, "bell", lambda: rung.append(time.monotonic()))
    return rung
