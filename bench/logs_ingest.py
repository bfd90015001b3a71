"""Throughput of the log ingest path against ``grep -c 'Decode batch'`` and per-line regex.

Usage: ``.venv/bin/python bench/logs_ingest.py [MB]`` (default 200). Writes a synthetic
current-format log to a temporary file (deleted afterwards), warms the page cache, and prints
MB/s for: grep -c, ingest_file, and per-line regex matching in the style of SGLang's
``srt/debug_utils/log_parser.py`` (one decode regex tried on every line).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from logs_helpers import write_synthetic_log

from tui.logs.ingest import ingest_file

PER_LINE_DECODE = re.compile(
    r"\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\s+DP\d+)?(?:\s+TP\d+)?\]\s+"
    r"Decode batch(?: \[\d+\])?,\s+#running-req:\s*(?P<running>\d+),.*?"
    r"gen throughput \(token/s\):\s*(?P<tput>[0-9.]+),\s+#queue-req:\s*(?P<queue>\d+)"
)


def _best(fn: object, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    """Generate, measure, print; returns 0."""
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.log"
        write_synthetic_log(path, megabytes * 1024 * 1024)
        size = path.stat().st_size
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)

        def grep() -> None:
            subprocess.run(["grep", "-c", "Decode batch", str(path)], capture_output=True)

        def per_line() -> None:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    PER_LINE_DECODE.search(line)

        results = {
            "grep -c 'Decode batch'": _best(grep),
            "ingest_file": _best(lambda: ingest_file(path)),
            "per-line regex (log_parser.py style)": _best(per_line, runs=1),
        }
    for name, seconds in results.items():
        print(f"{name:40s} {size / seconds / 1e6:8.0f} MB/s")
    ratio = results["grep -c 'Decode batch'"] / results["ingest_file"]
    print(f"ingest / grep throughput: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
