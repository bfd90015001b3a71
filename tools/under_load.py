"""Run a command while every core is kept busy: the operator's machine always is.

    python tools/under_load.py [--burners N] [--max-seconds S] -- make test

Starts N burner processes (default: one per core), each spinning in pure Python until the
command ends or ``--max-seconds`` pass (bounded in time either way: a burner stops itself at its
deadline even if this script is killed), runs the command, stops the burners and exits with the
command's exit status. It prints the command's wall time and the load average it ran under, so
a run's numbers can be quoted (issue 31: ``make test`` three times in a row with both cores busy).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

BURN = (
    "import time\n"
    "deadline = time.monotonic() + {seconds}\n"
    "while time.monotonic() < deadline:\n"
    "    sum(range(10_000))\n"
)
"""One burner: busy in the interpreter, stopping itself at its deadline."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: give the command to run after --")
    if not 1 <= args.burners <= 64:
        parser.error(f"--burners: {args.burners} is outside 1..64")
    code = BURN.format(seconds=args.max_seconds)
    burners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(args.burners)]
    start = time.monotonic()
    try:
        status = subprocess.call(command)
    finally:
        for burner in burners:  # our own children: their Popen handles are the identity
            if burner.poll() is None:
                burner.send_signal(signal.SIGTERM)
        for burner in burners:
            burner.wait(timeout=10)
    wall = time.monotonic() - start
    load = os.getloadavg()
    print(
        f"under_load: {' '.join(command)} exited {status} after {wall:.0f} s "
        f"with {args.burners} burners; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}",
        flush=True,
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
