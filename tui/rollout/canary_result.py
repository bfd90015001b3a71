"""A canary's result and its looks: what the sequential test saw at each look, and what the
canary ended with (verdict, interval, controls, cost), as the console, the CLI and the journal
show it (``tui.rollout.canary`` runs the canary)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.retune.events import VerifyReport
from tui.rollout.beside import Beside
from tui.rollout.cost import RetuneCost
from tui.rollout.load import LoadChange, LoadSeen
from tui.rollout.stats import Decision, PairedEstimate
from tui.words import counted


@dataclass(frozen=True, slots=True)
class CanaryLook:
    """One look of a canary's window, as a console shows it."""

    gpu: int
    """The canary GPU."""
    intervals: int
    """Paired intervals measured so far (after the warm-up)."""
    interval_s: float
    """Seconds per interval."""
    verdict: str
    """better / worse / no measurable difference / not measured, at this look."""
    final: bool
    """True when this look ends the window."""
    reason: str
    """Why, in words."""
    estimate: PairedEstimate | None = None
    """Output tokens/s canary vs control at the look's level."""
    more_s_to_exclude_zero: float | None = None
    """Further seconds for the interval to exclude 0 at the observed effect."""
    more_s_to_bound: float | None = None
    """Further seconds for the interval to lie within +/- margin."""

    @property
    def window_s(self) -> float:
        """Seconds measured so far."""
        return self.intervals * self.interval_s


def look_from(gpu: int, intervals: int, decision: Decision, interval_s: float) -> CanaryLook:
    """A look of the canary on ``gpu`` after ``intervals`` paired samples."""

    def secs(k: int | None) -> float | None:
        return None if k is None else k * interval_s

    return CanaryLook(
        gpu,
        intervals,
        interval_s,
        decision.verdict,
        decision.final,
        decision.reason,
        decision.estimate,
        secs(decision.more_intervals_to_exclude_zero),
        secs(decision.more_intervals_to_bound),
    )


@dataclass(frozen=True, slots=True)
class CanaryResult:
    """Everything one canary did and measured (also its journal entry)."""

    profile: str
    """Candidate profile."""
    gpu: int
    """Canary GPU."""
    controls: tuple[int, ...]
    """Control GPUs (still on their profile)."""
    previous_profile: str | None
    """What the canary GPU ran before."""
    verdict: str
    """better / worse / no measurable difference / not measured."""
    reason: str
    """Why the window ended."""
    tokens: PairedEstimate | None
    """Output tokens/s per GPU: canary vs mean control, at the last look's level."""
    requests: PairedEstimate | None
    """Finished requests/s per GPU, same intervals and level."""
    canary_tokens: tuple[float, ...] = ()
    """Canary output tokens/s per interval (after warm-up)."""
    control_tokens: tuple[float, ...] = ()
    """Mean control output tokens/s per interval."""
    per_gpu_tokens: dict[int, float] = field(default_factory=dict)
    """Mean output tokens/s of every GPU over the window."""
    pre_relative: float | None = None
    """Canary GPU vs controls before the change (relative): the GPUs' own spread."""
    more_s_to_exclude_zero: float | None = None
    """Further seconds for the interval to exclude 0 at the observed effect."""
    more_s_to_bound: float | None = None
    """Further seconds for the interval to lie within +/- margin."""
    margin: float = 0.03
    """The margin used."""
    looks: int = 0
    """Looks taken."""
    look_level: float = 0.95
    """Per-look (Bonferroni) level."""
    family_level: float = 0.95
    """Family-wise level asked for."""
    stopped_early: bool = False
    """True when the answer was clear before ``window_s``."""
    window_s: float = 0.0
    """Seconds actually measured (after warm-up)."""
    report: VerifyReport | None = None
    """The canary GPU's verify report."""
    diff: tuple[str, ...] = ()
    """Previous vs candidate profile."""
    cost: RetuneCost | None = None
    """Throughput the canary's restart cost the fleet."""
    started_at: float = 0.0
    """time.time() at start."""
    finished_at: float = 0.0
    """time.time() at the end."""
    refused: tuple[str, ...] = ()
    """Validation errors (nothing was stopped)."""
    dropped_controls: tuple[int, ...] = ()
    """Control GPUs left out of the verdict because their readings stopped (a many-node
    canary: their node stopped answering); ``controls`` are those that stayed."""
    baseline_window: tuple[float, float] | None = None
    """time.time() at the start and end of the baseline taken before the change (None: not
    taken); the generation pane shades it under the output-rate chart."""
    measure_window: tuple[float, float] | None = None
    """time.time() at the start and end of the window measured after it (None: none)."""
    load: LoadSeen | None = None
    """The load each side was offered over the window (None: no window measured)."""
    load_change: LoadChange | None = None
    """Why no verdict was taken: the load changed (None: it did not, or was not known)."""
    remeasured: str = ""
    """Why the window started again once (the controls' load changed and settled), or ''."""
    beside: Beside | None = None
    """TTFT p90, ITL p90 and tokens per joule, canary against control over the same window
    (None: no verdict, or a sampler that read neither histograms nor energy)."""

    def beside_line(self) -> str:
        """The figures beside throughput in one line ('' without a throughput verdict)."""
        if self.tokens is None:
            return ""
        if self.beside is None:
            return "TTFT p90, ITL p90, tokens/J: not read (this canary's sampler reads counters)"
        return self.beside.words()

    @property
    def controls_idle(self) -> bool:
        """The window was measured and the control GPUs made no tokens in any interval of it
        (no job sending requests): nothing a canary can measure on this fleet now."""
        return self.tokens is None and bool(self.control_tokens) and not any(self.control_tokens)

    @property
    def ok(self) -> bool:
        """True when the canary was not refused and its GPU came up (its verdict may still be
        'not measured': the controls idle, the load changed)."""
        return not self.refused and self.report is not None and self.report.ok

    def describe(self) -> str:
        """One paragraph for humans."""
        if self.refused:
            return "refused: " + "; ".join(self.refused)
        if self.report is not None and not self.report.ok:
            return f"canary GPU {self.gpu} failed: {self.report.failure}"
        t = self.tokens
        if t is None and self.load_change is not None:
            # 'not measured: the load changed (...)': the one wording of a load-changed window
            lines = [f"{self.verdict}: {self.load_change.words()}"]
            if self.load is not None:
                lines.append(self.load.describe())
            if self.remeasured:
                lines.append(self.remeasured)
            return "\n".join(lines)
        if t is None:
            return f"{self.verdict} ({self.reason})"
        lines = [
            f"{self.verdict}: canary GPU {self.gpu} {t.canary_mean:,.0f} tok/s vs control mean "
            f"{t.control_mean:,.0f} tok/s per GPU: {t.relative:+.1%} "
            f"({t.abs_diff:+,.0f} tok/s/GPU), {t.level:.2%} CI "
            f"{t.rel_low:+.1%} .. {t.rel_high:+.1%}"
            f" (family {self.family_level:.0%} over {counted(self.looks, 'look')}, "
            f"sure {t.sureness:.1%})",
        ]
        lines.append(self.beside_line())
        if self.requests is not None:
            r = self.requests
            lines.append(
                f"requests/s per GPU: {r.canary_mean:.2f} vs {r.control_mean:.2f} "
                f"({r.relative:+.1%}, CI {r.rel_low:+.1%} .. {r.rel_high:+.1%})"
            )
        lines.append(f"window {self.window_s:.1f} s, {t.n} intervals; {self.reason}")
        if self.load is not None:
            lines.append(self.load.describe())
        if self.remeasured:
            lines.append(self.remeasured)
        if self.verdict == "no measurable difference":
            if self.more_s_to_exclude_zero:
                lines.append(
                    f"to tell {t.relative:+.1%} from 0: about "
                    f"{self.more_s_to_exclude_zero:.0f} s more"
                )
            if self.more_s_to_bound:
                lines.append(
                    f"to bound within +/-{self.margin:.0%}: about {self.more_s_to_bound:.0f} s more"
                )
        if self.cost is not None and self.cost.lost_gpu_seconds is not None:
            lines.append(f"cost: {self.cost.lost_gpu_seconds:.1f} GPU-seconds of throughput lost")
        return "\n".join(lines)
