"""Rolling rollout: restart GPUs k at a time, each batch verified, stop at the first failure.

Each batch goes through the retune engine (stop, GPU memory released, launch, ready on
``/health_generate``, verify report); the next batch starts only when every GPU of this one is
ready. At the first failure the rollout stops: the GPUs not yet reached stay on their profile,
and the failed GPU, which the engine left with nothing running, is relaunched with the profile it
ran before (unless ``restore_failed`` is off) so the pipeline gets its capacity back. Rollback is
the same walk, in reverse GPU order, to each GPU's previous profile (from ``running.py``).
The operations core journals every batch and the summary; the summary carries the throughput the
whole rollout cost (``lost_gpu_seconds``) and the fleet's verdict: its throughput before the first
batch against after the last one, with its interval (``tui.rollout.fleet_verdict``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace

from tui.profiles import Profile, profile_to_dict
from tui.retune.events import ApplyResult, MeasureProgress, ThroughputComparison, VerifyReport
from tui.retune.options import ApplyOptions
from tui.rollout.beside import Beside
from tui.rollout.canary import Applier, SamplerFactory
from tui.rollout.cost import CostMeter, RetuneCost
from tui.rollout.fleet_verdict import VerdictMeter, VerdictWindows, fleet_line
from tui.rollout.sampling import Sampler
from tui.state.fleet_state import profile_of, read_fleet, read_running


@dataclass(frozen=True, slots=True)
class RolloutOptions:
    """How a rollout proceeds."""

    batch: int = 1
    """GPUs restarted together."""
    apply: ApplyOptions = field(default_factory=lambda: ApplyOptions(measure=False))
    """Per-GPU timeouts of each batch (the engine's own before/after measurement is off)."""
    restore_failed: bool = True
    """Relaunch a failed GPU with the profile it ran before."""
    measure_cost: bool = True
    """Sample the fleet's counters: the throughput the rollout cost, and its fleet verdict."""
    interval_s: float = 1.0
    """Sampling interval of the counters."""
    baseline_s: float = 5.0
    """Seconds sampled before the first batch at least (the cost's baseline; the verdict's
    'before' window when that is longer)."""
    settle_s: float = 30.0
    """Longest the cost is integrated after the last batch."""
    verdict: VerdictWindows = field(default_factory=VerdictWindows)
    """The fleet verdict's windows (before and after the rollout), when the counters are
    sampled; a 0 s window takes none."""

    def errors(self) -> list[str]:
        """Invalid options, each naming field, value and allowed range."""
        out = [f"apply.{e}" for e in self.apply.errors()] + self.verdict.errors()
        if self.batch < 1:
            out.append(f"batch={self.batch!r}: must be >= 1")
        if not self.interval_s > 0:
            out.append(f"interval_s={self.interval_s!r}: must be > 0")
        for name in ("baseline_s", "settle_s"):
            if getattr(self, name) < 0:
                out.append(f"{name}={getattr(self, name)!r}: must be >= 0")
        return out


@dataclass(frozen=True, slots=True)
class RolloutStep:
    """One batch."""

    index: int
    """0-based batch number."""
    gpus: tuple[int, ...]
    """GPUs restarted in it."""
    profiles: dict[int, str]
    """Profile launched on each."""
    ok: bool
    """Every GPU of the batch reached ready."""
    reports: tuple[VerifyReport, ...]
    """Verify reports, in GPU order."""
    started_at: float
    """time.time() at its start."""
    finished_at: float
    """time.time() at its end."""


@dataclass(frozen=True, slots=True)
class RolloutResult:
    """Everything one rollout (or rollback) did."""

    profile: str
    """Profile rolled out ('' for a rollback: each GPU's previous one)."""
    rollback: bool
    """True for a rollback."""
    planned: tuple[int, ...]
    """GPUs to restart, in order."""
    steps: tuple[RolloutStep, ...]
    """Batches run."""
    done: tuple[int, ...]
    """GPUs now on the new profile."""
    failed: tuple[int, ...]
    """GPUs whose relaunch failed (the rollout stopped there)."""
    stayed: tuple[int, ...]
    """GPUs never restarted: still on their old profile."""
    restored: tuple[int, ...] = ()
    """Failed GPUs relaunched on their old profile."""
    skipped: tuple[int, ...] = ()
    """GPUs already on the profile (not restarted)."""
    failure: str | None = None
    """'GPU 4: OOM: ...' for the first failure."""
    cost: RetuneCost | None = None
    """Throughput the whole rollout cost."""
    started_at: float = 0.0
    """time.time() at start."""
    finished_at: float = 0.0
    """time.time() at the end."""
    refused: tuple[str, ...] = ()
    """Validation errors (nothing was stopped)."""
    verdict: ThroughputComparison | None = None
    """The fleet's throughput before the first batch vs after the last one, with its interval
    (None: the counters were not sampled)."""
    beside: Beside | None = None
    """TTFT p90, ITL p90 and tokens per joule of the fleet, after against before (None: no
    throughput verdict, or a sampler that read neither histograms nor energy)."""

    @property
    def ok(self) -> bool:
        """True when every planned GPU reached ready."""
        return not self.refused and not self.failed and set(self.done) == set(self.planned)

    def describe(self) -> str:
        """A few lines for humans."""
        if self.refused:
            return "refused: " + "; ".join(self.refused)
        what = "rollback" if self.rollback else f"rollout of {self.profile}"
        lines = [f"{what}: {len(self.done)}/{len(self.planned)} GPUs done {list(self.done)}"]
        if self.skipped:
            lines.append(f"already on it: {list(self.skipped)}")
        if self.failure:
            lines.append(f"STOPPED at {self.failure}")
            lines.append(f"stayed on the old profile: {list(self.stayed)}")
            if self.restored:
                lines.append(f"relaunched on the old profile: {list(self.restored)}")
        if self.cost is not None and self.cost.lost_gpu_seconds is not None:
            lines.append(f"cost: {self.cost.lost_gpu_seconds:.1f} GPU-seconds of throughput lost")
        lines.append(fleet_line(self.verdict))
        if self.beside is not None:
            lines.append(f"fleet {self.beside.words()}")
        return "\n".join(lines)


Plan = list[tuple[int, Profile]]
"""(GPU, profile to launch on it), in rollout order."""


class Rollout:
    """Restart ``plan``'s GPUs batch by batch, verified, stopping at the first failure.

    Args:
        plan: (GPU, profile) in order; build it with ``rollout_plan`` or ``rollback_plan``.
        fleet: The profile describing the whole fleet (for the cost's sampler and the name).
        apply: Relaunches and verifies GPUs (the operations core's engine run).
        sampler: Makes the counters sampler for the cost.
        options: Batch size, timeouts, cost measurement.
        rollback: True when walking back (journal wording).
        skipped: GPUs left out because they already run the profile (reported only).
        on_step: Called with every batch once it has settled (the caller journals it).
        on_measure: Called as each window of the fleet verdict starts and fills (before,
            warm-up, after).
    """

    def __init__(
        self,
        plan: Plan,
        fleet: Profile,
        apply: Applier,
        sampler: SamplerFactory,
        options: RolloutOptions | None = None,
        *,
        rollback: bool = False,
        skipped: Sequence[int] = (),
        on_step: Callable[[RolloutStep], None] | None = None,
        on_measure: Callable[[MeasureProgress], None] | None = None,
        refusals: Sequence[str] = (),
    ) -> None:
        self.plan = plan
        self.refusals = tuple(refusals)
        """Why it must not begin although its plan is valid (read by the caller: ports held by
        servers that are not the fleet's): it is refused, nothing stopped."""
        self.fleet = fleet
        self.options = options or RolloutOptions()
        self.rollback = rollback
        self.skipped = tuple(skipped)
        self._apply_profile = apply
        self._sampler = sampler
        self._on_step = on_step
        self._on_measure = on_measure

    async def run(self) -> RolloutResult:
        """Run the rollout (the caller journals the summary; ``on_step`` gets each batch)."""
        started = time.time()
        name = "" if self.rollback else self.fleet.name
        planned = tuple(g for g, _ in self.plan)
        errors = self.options.errors() + ([] if self.plan else ["gpus: nothing to restart"])
        errors += self.refusals
        if errors:
            result = RolloutResult(
                name,
                self.rollback,
                planned,
                (),
                (),
                (),
                planned,
                skipped=self.skipped,
                started_at=started,
                finished_at=time.time(),
                refused=tuple(errors),
            )
            return result
        if not self.options.measure_cost:
            return await self._batches(name, planned, started)
        state = read_fleet()
        running = [g for g in self.fleet.gpus if g in state and state[g].server]
        # Read at least as often as the verdict samples (its intervals pool these readings).
        every = min(self.options.interval_s, self.options.verdict.interval_s)
        sampler = self._sampler(running or list(self.fleet.gpus), every)
        # Histograms and energy once per verdict interval (they are per-interval figures), not
        # every reading: minutes of readings each second would hold seven GPUs' histograms.
        sampler.observe_every_s = self.options.verdict.interval_s
        sampler.start()
        try:
            result = await self._measured(sampler, name, planned, started)
        finally:
            await sampler.stop()
        return replace(result, finished_at=time.time())

    async def _measured(
        self, sampler: Sampler, name: str, planned: tuple[int, ...], started: float
    ) -> RolloutResult:
        """The batches between the fleet's 'before' window and its 'after' one: the cost and
        the fleet verdict from the same readings."""
        verdict = VerdictMeter(sampler, self.options.verdict, self._on_measure)
        await verdict.before(self.options.baseline_s)
        cost = CostMeter(sampler, self.options.settle_s)
        cost.begin()
        result = await self._batches(name, planned, started)
        cost.end()
        if not self.options.verdict.enabled:
            return replace(result, cost=await cost.finish())
        spent, comparison = await asyncio.gather(cost.finish(), verdict.after())
        return replace(result, cost=spent, verdict=comparison, beside=verdict.beside)

    async def _batches(self, name: str, planned: tuple[int, ...], started: float) -> RolloutResult:
        k = self.options.batch
        steps: list[RolloutStep] = []
        done: list[int] = []
        failed: tuple[int, ...] = ()
        stayed: tuple[int, ...] = ()
        restored: tuple[int, ...] = ()
        failure: str | None = None
        for i in range(0, len(self.plan), k):
            batch = self.plan[i : i + k]
            step = await self._run_batch(len(steps), batch)
            steps.append(step)
            if self._on_step is not None:
                self._on_step(step)
            done += [r.gpu for r in step.reports if r.ok]
            if not step.ok:  # the rollout stops at its first failed batch
                failed = tuple(r.gpu for r in step.reports if not r.ok)
                first = next(r for r in step.reports if not r.ok)
                failure = f"GPU {first.gpu}: {first.failure}"
                stayed = tuple(g for g, _ in self.plan[i + k :])
                restored = await self._restore(failed)
                break
        return RolloutResult(
            name,
            self.rollback,
            planned,
            tuple(steps),
            tuple(done),
            failed,
            stayed,
            restored,
            self.skipped,
            failure,
            started_at=started,
            finished_at=time.time(),
        )

    async def _run_batch(self, index: int, batch: Plan) -> RolloutStep:
        started = time.time()
        groups: dict[str, tuple[Profile, list[int]]] = {}
        for gpu, profile in batch:
            key = str(profile_to_dict(profile))
            groups.setdefault(key, (profile, []))[1].append(gpu)
        results = await asyncio.gather(*(self._apply(p, g) for p, g in groups.values()))
        reports = sorted((r for res in results for r in res.reports), key=lambda r: r.gpu)
        ok = bool(reports) and all(r.ok for r in reports) and not any(r.refused for r in results)
        return RolloutStep(
            index,
            tuple(g for g, _ in batch),
            {g: p.name for g, p in batch},
            ok,
            tuple(reports),
            started,
            time.time(),
        )

    async def _apply(self, profile: Profile, gpus: list[int]) -> ApplyResult:
        return await self._apply_profile(profile, gpus)

    async def _restore(self, failed: tuple[int, ...]) -> tuple[int, ...]:
        """Relaunch each failed GPU with the profile it ran before this rollout."""
        if not self.options.restore_failed:
            return ()
        running = read_running()
        restored: list[int] = []
        for gpu in failed:
            old = running[gpu].previous if gpu in running else None
            if old is None:
                continue  # nothing known ran there before: leave it stopped
            result = await self._apply(profile_of(old), [gpu])
            restored += [r.gpu for r in result.reports if r.ok]
        return tuple(restored)


def rollout_plan(profile: Profile, gpus: Sequence[int] | None = None) -> tuple[Plan, list[int]]:
    """The GPUs still to move to ``profile``, in GPU order, and those already on it.

    Args:
        profile: The profile to roll out.
        gpus: Restrict to these GPUs (default: every GPU of the profile).

    Returns:
        (plan, skipped): GPUs whose recorded current profile already equals ``profile`` (the
        canary GPU, a rollout resumed after a failure) are skipped.
    """
    doc = profile_to_dict(profile)
    running = read_running()
    chosen = sorted(set(gpus)) if gpus is not None else list(profile.gpus)
    plan: Plan = []
    skipped: list[int] = []
    for gpu in chosen:
        if gpu in running and running[gpu].current == doc:
            skipped.append(gpu)
        else:
            plan.append((gpu, profile))
    return plan, skipped


def rollback_plan(gpus: Sequence[int] | None = None, within: Collection[int] | None = None) -> Plan:
    """Each GPU's previous profile, in reverse GPU order (the rollout walked back).

    Args:
        gpus: Restrict to these GPUs (default: every GPU with a previous profile recorded).
        within: With ``gpus`` None, only these (the fleet a door serves, not every GPU the
            state remembers: a smaller demo after a larger one leaves the others' records).

    Returns:
        The plan.

    Raises:
        ValueError: a chosen GPU has no previous profile recorded (naming it).
    """
    running = read_running()
    chosen = (
        sorted(set(gpus))
        if gpus is not None
        else sorted(g for g, p in running.items() if p.previous and (within is None or g in within))
    )
    plan: Plan = []
    for gpu in reversed(chosen):
        entry = running.get(gpu)
        if entry is None or entry.previous is None:
            raise ValueError(f"gpus: GPU {gpu} has no previous profile recorded")
        plan.append((gpu, profile_of(entry.previous)))
    return plan
