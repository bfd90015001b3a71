"""Log ingestion: ``ingest_file`` against ``grep -c`` and per-line regex; attach to a huge log.

The log is written with the simulator's own formatter (``tui.sim.logfmt``): the startup lines of
a real launch, then steady traffic (mostly ``Decode batch`` lines, some ``Prefill batch`` and
HTTP access lines) with a rare event now and then. A few MB of distinct formatted blocks are
built once and cycled to reach the size, so generating 1 GB takes seconds, not minutes.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from pathlib import Path

from bench.harness import Context, Row, Stat, repeat, timed
from bench.simfleet import seed_aggressive_plan
from tui.logs.ingest import ingest_file
from tui.logs.tailer import LogTailer
from tui.sglang.models import get_model
from tui.sglang.plan_types import MemoryPlan
from tui.sim import logfmt

BENCH = "log ingestion"
_T0 = 1_778_400_000.0
"""Log time of the first line (May 2026)."""

# SGLang's srt/debug_utils/log_parser.py matches `... #queue-req: (\d+),` with a trailing comma,
# which no 0.5.23 decode line has (#queue-req is last there). This is the same per-line approach
# with the comma optional, so it matches every current line.
PER_LINE_DECODE = re.compile(
    r"\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\s+DP\d+)?(?:\s+TP\d+)?\]\s+"
    r"Decode batch(?: \[\d+\])?[.,]\s+#running-req:\s*(?P<running>\d+),.*?"
    r"gen throughput \(token/s\):\s*(?P<tput>[0-9.]+),\s+#queue-req:\s*(?P<queue>\d+),?"
)


def startup_lines(plan: MemoryPlan, when: float) -> list[str]:
    """A launch's startup section, formatted as the simulator writes it."""
    model = get_model("qwen3.6-27b")
    messages = [
        logfmt.server_args_line({"model_path": "Qwen/Qwen3.6-27B-FP8", "port": 30000}),
        logfmt.memory_baseline_line(2 * 1024**3),
        logfmt.load_weight_begin_line(plan.pre_bytes),
        logfmt.load_weight_end_line(model, 12.3, plan.pre_bytes // 2, plan.weight_bytes),
        logfmt.mamba_line(plan),
        logfmt.kv_line(plan.max_total_num_tokens, plan.k_bytes, plan.v_bytes),
        logfmt.memory_pool_end_line(plan.available_after_pools_bytes),
        logfmt.summary_line(plan),
        logfmt.READY_LINE,
    ]
    return [logfmt.stamp(m, when + i) for i, m in enumerate(messages)]


def steady_block(plan: MemoryPlan, lines: int, seed: int, when: float) -> bytes:
    """``lines`` steady-state lines: ~75% decode, ~12% prefill, ~13% HTTP access."""
    rng = random.Random(seed)
    out = []
    for i in range(lines):
        roll = rng.random()
        running = rng.randint(20, 40)
        if roll < 0.75:
            text = logfmt.decode_line(
                plan,
                running=running,
                tokens=rng.randint(10_000, 90_000),
                token_usage=rng.random(),
                mamba_num=running * 5,
                mamba_usage=rng.random(),
                accept_len=rng.uniform(2, 4),
                gen_throughput=rng.uniform(500, 2500),
                queued=rng.randint(0, 48),
            )
        elif roll < 0.87:
            text = logfmt.prefill_line(
                plan,
                new_seq=1,
                new_token=rng.randint(100, 8192),
                cached_token=rng.randint(0, 4096),
                token_usage=rng.random(),
                mamba_usage=rng.random(),
                running=running,
                queued=rng.randint(0, 48),
                input_throughput=rng.uniform(1000, 9000),
            )
        else:
            client = f"127.0.0.1:{rng.randint(30000, 60000)}"
            text = logfmt.access_line(client, "POST", "/v1/chat/completions", 200)
        out.append(logfmt.stamp(text, when + i / 4))
    return ("\n".join(out) + "\n").encode()


def write_log(path: Path, target_bytes: int, blocks: int = 6) -> None:
    """Write a current-format log of about ``target_bytes`` (startup, then cycled blocks)."""
    plan = seed_aggressive_plan()
    parts = [steady_block(plan, 16_000, seed, _T0 + 60 + seed * 4000) for seed in range(blocks)]
    rare = logfmt.stamp(
        "Not enough space for mamba cache, try to increase --mamba-full-memory-ratio "
        "or --max-mamba-cache-size.",
        _T0 + 50_000,
    )
    with open(path, "wb") as handle:
        written = handle.write(("\n".join(startup_lines(plan, _T0)) + "\n").encode())
        n = 0
        while written < target_bytes:
            written += handle.write(parts[n % blocks])
            n += 1
            if n % 64 == 0:
                written += handle.write(rare.encode() + b"\n")


def _warm(path: Path) -> None:
    """Read the file once so every contender starts from the page cache."""
    with open(path, "rb") as handle:
        while handle.read(16 << 20):
            pass


def _grep(path: Path) -> int:
    env = {**os.environ, "LC_ALL": "C"}
    done = subprocess.run(
        ["grep", "-c", "Decode batch", str(path)], capture_output=True, env=env, check=True
    )
    return int(done.stdout)


def _per_line(path: Path, limit: int) -> int:
    """Match every line of the first ``limit`` bytes in Python, as log_parser.py does."""
    matched = seen = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            seen += len(line)
            if PER_LINE_DECODE.search(line):
                matched += 1
            if seen >= limit:
                break
    return matched


def _attach_time(path: Path) -> float:
    tailer = LogTailer(path)
    try:
        return timed(tailer.read_new)
    finally:
        tailer.close()


def _attach_rows(ctx: Context, tail: bytes) -> list[Row]:
    big, small = ctx.scratch / "huge.log", ctx.scratch / "small.log"
    size = (1 if ctx.quick else 10) * 1024**3
    with open(big, "wb") as handle:
        handle.truncate(size)  # sparse: the size of a long run, none of its disk
        handle.seek(size)
        handle.write(tail)
    with open(small, "wb") as handle:
        while handle.tell() < 10 * 1024**2:
            handle.write(tail)
    runs = 3 if ctx.quick else 7
    ours = repeat(lambda: _attach_time(big), runs)
    peer = repeat(lambda: _attach_time(small), runs)
    big.unlink()
    small.unlink()
    return [
        Row(
            BENCH,
            f"attach to a {size // 1024**3} GB log: first read_new() (s)",
            ours,
            "attach to a 10 MB log",
            peer,
            "< 0.2 s, not growing with the file",
            ours.median < 0.2 and ours.median < 3 * peer.median + 0.01,
            note="sparse file plus a real tail; the tailer reads only the last 4 MiB",
            fmt="{:.4f}",
        )
    ]


def run(ctx: Context) -> list[Row]:
    """Generate the log, measure the three readers and the attach; return the rows."""
    size = (128 if ctx.quick else 1024) * 1024**2
    per_line_limit = (32 if ctx.quick else 128) * 1024**2
    runs = 3 if ctx.quick else 5
    path = ctx.scratch / "ingest.log"
    t0 = time.perf_counter()
    write_log(path, size)
    ctx.notes.append(
        f"log ingestion: wrote {path.stat().st_size / 1e6:.0f} MB with tui.sim.logfmt "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    try:
        _warm(path)
        nbytes = path.stat().st_size
        summary = ingest_file(path)
        lines = summary.lines
        if _grep(path) != summary.decode_lines:
            raise RuntimeError("grep and ingest_file disagree on the decode line count")
        grep_s = repeat(lambda: timed(lambda: _grep(path)), runs)
        ours_s = repeat(lambda: timed(lambda: ingest_file(path)), runs)
        per_line_s = repeat(lambda: timed(lambda: _per_line(path, per_line_limit)), 3)
        with open(path, "rb") as handle:
            tail = handle.read(4 * 1024**2)
    finally:
        path.unlink(missing_ok=True)

    def rate(stat: Stat, amount: float) -> Stat:
        # The fastest run has the highest rate: min and max swap.
        return Stat(amount / stat.median, amount / stat.high, amount / stat.low, stat.runs)

    mb = nbytes / 1e6
    ours_mb, grep_mb = rate(ours_s, mb), rate(grep_s, mb)
    per_line_mb = rate(per_line_s, per_line_limit / 1e6)
    ratio = ours_mb.median / grep_mb.median
    rows = [
        Row(
            BENCH,
            f"ingest_file MB/s ({mb:.0f} MB, current format)",
            ours_mb,
            "grep -c 'Decode batch' (LC_ALL=C)",
            grep_mb,
            ">= 1/3 of grep",
            ratio >= 1 / 3,
            higher_is_better=True,
            fmt="{:.0f}",
            note=GREP_NOTE,
        ),
        Row(
            BENCH,
            "ingest_file lines/s (millions)",
            rate(ours_s, lines / 1e6),
            "grep -c 'Decode batch' (LC_ALL=C)",
            rate(grep_s, lines / 1e6),
            ">= 1/3 of grep",
            ratio >= 1 / 3,
            higher_is_better=True,
            fmt="{:.2f}",
        ),
        Row(
            BENCH,
            "ingest_file MB/s vs per-line regex",
            ours_mb,
            "per-line regex (log_parser.py style)",
            per_line_mb,
            "faster than per-line Python",
            ours_mb.median > per_line_mb.median,
            note=(
                f"per-line timed on the first {per_line_limit // 1024**2} MiB; SGLang's own "
                "pattern requires '#queue-req: N,' and matches no 0.5.23 line, so the trailing "
                "comma is made optional"
            ),
            higher_is_better=True,
            fmt="{:.0f}",
        ),
    ]
    return rows + _attach_rows(ctx, tail)


GREP_NOTE = (
    "what stands in the way of 1/3 of grep: no line is parsed in a quiet stretch, but proving "
    "a stretch quiet takes four C passes over it (bytes.count of newlines, 'Decode batch', "
    "'fill batch' and ' HTTP/': the marker counts must add up to the line count), and "
    "CPython's counting loops run ~1-2.4 GB/s each where grep's vectorised search runs "
    "~3.9 GB/s once; fewer passes would mean guessing what a rare line looks like, and "
    "missing an error line is worse than a slower first read (the console reads at most the "
    "last 4 MiB of a log on attach, then only what is new)"
)
"""Why the ingest misses 1/3 of grep (the note of its row)."""
