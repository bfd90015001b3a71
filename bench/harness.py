"""Shared machinery for the benchmarks: repeated measurement, result rows, the results file."""

from __future__ import annotations

import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.md"
GPU_RESULTS = Path(__file__).resolve().parent / "results-gpu.md"


@dataclass(frozen=True, slots=True)
class Stat:
    """Median, min and max of repeated measurements."""

    median: float
    """Median of the runs."""
    low: float
    """Smallest run."""
    high: float
    """Largest run."""
    runs: int
    """How many runs."""

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        """Summarise a non-empty list of measurements."""
        if not values:
            raise ValueError("no measurements")
        return cls(statistics.median(values), min(values), max(values), len(values))

    @classmethod
    def paired(cls, values: list[float], peers: list[float]) -> Stat | None:
        """Each run's value over the peer's run beside it (alternating runs), summarised.

        Why: the machine's speed drifts between runs (a VM's neighbours): the ratio of the two
        medians mixes that drift into the comparison, a run over its neighbour run does not.
        None when a peer run measured nothing (a zero) or the lists do not pair up.
        """
        if not values or len(values) != len(peers) or not all(peers):
            return None
        return cls.of([value / peer for value, peer in zip(values, peers, strict=True)])

    def text(self, fmt: str = "{:.3g}") -> str:
        """'median (min-max, n runs)'."""
        if self.runs == 1:
            return fmt.format(self.median)
        low, high = fmt.format(self.low), fmt.format(self.high)
        return f"{fmt.format(self.median)} ({low}–{high}, n={self.runs})"


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the results table."""

    bench: str
    """Benchmark name (e.g. 'console overhead')."""
    metric: str
    """What was measured, with its unit."""
    ours: Stat
    """gpufleet's value."""
    peer_name: str
    """The peer or floor it is compared with."""
    peer: Stat | None
    """The peer's value measured in the same run (None for an absolute target)."""
    target: str
    """The target in words, e.g. 'ratio <= 3'."""
    met: bool | None
    """Whether the target is met (None when it does not apply)."""
    note: str = ""
    """Anything a reader needs to interpret the row."""
    higher_is_better: bool = False
    """Direction, for the ratio's wording."""
    fmt: str = "{:.3g}"
    """Number format."""

    @property
    def ratio(self) -> float | None:
        """ours / peer."""
        if self.peer is None or self.peer.median == 0:
            return None
        return self.ours.median / self.peer.median


@dataclass
class Context:
    """What a benchmark gets: a scratch directory and the quick flag."""

    scratch: Path
    """A temporary directory for this run."""
    quick: bool = False
    """Smaller sizes, fewer runs (for a smoke run)."""
    notes: list[str] = field(default_factory=list)
    """Free-form notes collected for the results file."""


def gpufleet_argv(base: Path | None, *args: str) -> list[str]:
    """``gpufleet ARGS`` from this checkout, or from ``base``'s code (an earlier checkout, to
    compare against) when given."""
    if base is None:
        return [sys.executable, "-m", "tui", *args]
    # -c puts the working directory first on sys.path: the earlier checkout goes before it.
    code = (
        f"import sys, runpy; sys.path.insert(0, {str(base.resolve())!r}); "
        "runpy.run_module('tui', run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-c", code, *args]


def repeat(fn: Callable[[], float], runs: int) -> Stat:
    """Call fn runs times and summarise what it returns."""
    return Stat.of([fn() for _ in range(runs)])


def timed(fn: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def machine() -> str:
    """One line describing this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024**2:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.node()}: {os.cpu_count()} cores ({cpu}){mem}, {platform.platform()}"


def versions() -> str:
    """Versions of the pieces that matter."""
    parts = [f"Python {platform.python_version()}"]
    for name in ("textual", "httpx", "uvicorn", "boto3"):
        try:
            module = __import__(name)
            parts.append(f"{name} {getattr(module, '__version__', '?')}")
        except ImportError:
            pass
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if rev:
            parts.append(f"gpufleet {rev}")
    except OSError:
        pass
    return ", ".join(parts)


def render(rows: list[Row], notes: list[str], elapsed: float) -> str:
    """The results file's Markdown."""
    out = [
        "# gpufleet benchmark results",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"- Machine: {machine()}",
        f"- Versions: {versions()}",
        f"- Command: `make bench` ({sys.executable} -m bench), {elapsed:.0f} s in all",
        "- Each value is the median of the runs, with (min–max, n) when repeated; every ratio is",
        "  ours / peer, both measured in this same run on this machine.",
        "",
        "| benchmark | metric | gpufleet | peer / floor | peer value | ratio | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = f"{row.ratio:.3g}" if row.ratio is not None else "–"
        peer = row.peer.text(row.fmt) if row.peer else "–"
        met = {True: "yes", False: "**no**", None: "–"}[row.met]
        out.append(
            f"| {row.bench} | {row.metric} | {row.ours.text(row.fmt)} | {row.peer_name} | "
            f"{peer} | {ratio} | {row.target} | {met} |"
        )
    notes_all = [n for row in rows if row.note for n in [f"{row.bench} / {row.metric}: {row.note}"]]
    notes_all += notes
    if notes_all:
        out += ["", "## Notes", ""] + [f"- {n}" for n in notes_all]
    if GPU_RESULTS.exists():
        out += ["", GPU_RESULTS.read_text().strip()]
    return "\n".join(out) + "\n"


def print_table(rows: list[Row]) -> None:
    """A plain table on stdout."""
    for row in rows:
        ratio = f"{row.ratio:.3g}" if row.ratio is not None else "-"
        peer = row.peer.text(row.fmt) if row.peer else "-"
        print(
            f"{row.bench:<22} {row.metric:<40} {row.ours.text(row.fmt):<28} "
            f"{row.peer_name:<28} {peer:<28} ratio {ratio:<8} {row.target} "
            f"[{'met' if row.met else 'MISSED' if row.met is False else '-'}]"
        )


def _stopped(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def unwind_on_sigterm() -> None:
    """Make SIGTERM unwind the benchmark like Ctrl-C. Why: SIGTERM's default ends the process
    without unwinding, and the benchmarks' fleets (servers started in sessions of their own)
    would outlive it, unwatched; as an exception, every fleet's ``with`` stops its servers on
    the way out. Every benchmark entry point calls it first."""
    signal.signal(signal.SIGTERM, _stopped)
