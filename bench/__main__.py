"""``python -m bench [NAME ...] [--quick]``: run the benchmarks, print a table, write results.md."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench.harness import RESULTS, Context, Row, print_table, render, unwind_on_sigterm


def discover() -> list[str]:
    """Benchmark modules: bench/bench_*.py, in name order."""
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    unwind_on_sigterm()
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--no-write", action="store_true", help="do not write results.md")
    args = parser.parse_args(argv)
    names = args.names or discover()
    rows: list[Row] = []
    start = time.monotonic()
    failed = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as scratch:
        ctx = Context(Path(scratch), quick=args.quick)
        for name in names:
            module_name = name if name.startswith("bench_") else f"bench_{name}"
            print(f"== {module_name}", flush=True)
            t0 = time.monotonic()
            try:
                module = importlib.import_module(f"bench.{module_name}")
                new_rows = module.run(ctx)
            except Exception:
                traceback.print_exc()
                failed.append(module_name)
                ctx.notes.append(f"{module_name} failed to run: see the console output")
                continue
            print_table(new_rows)
            print(f"   ({time.monotonic() - t0:.0f} s)", flush=True)
            rows.extend(new_rows)
    elapsed = time.monotonic() - start
    if not args.no_write:
        RESULTS.write_text(render(rows, ctx.notes, elapsed))
        print(f"wrote {RESULTS}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
