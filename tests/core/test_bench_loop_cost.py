"""``bench/loop_cost``: a program started with it charges its loop callbacks' and wrapped
functions' thread CPU to them, and ``profile_console`` reports a window between two documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from repo_paths import ROOT

from bench.profile_console import loop_cost_report

PROGRAM = textwrap.dedent(
    """
    import asyncio, json, os, time

    def burn(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    def spin():
        burn(0.02)

    async def main():
        loop = asyncio.get_running_loop()
        for _ in range(10):
            loop.call_soon(spin)
            await asyncio.sleep(0.01)
        burn(0.01)  # a step of main's task
        path = os.environ["LOOP_COST_OUT"] + f".{os.getpid()}.json"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the hook writes once a second
            try:
                document = json.loads(open(path).read())
            except (OSError, ValueError):
                document = {}
            if document.get("handles", {}).get("spin", [0])[0] >= 10:
                break
            await asyncio.sleep(0.05)

    asyncio.run(main())
    """
)


def test_a_hooked_program_charges_its_callbacks_and_a_window_is_reported(tmp_path: Path) -> None:
    out = tmp_path / "cost"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "bench" / "loop_cost"), str(ROOT)]),
        "LOOP_COST_OUT": str(out),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    (found,) = tmp_path.glob("cost.*.json")
    document = json.loads(found.read_text())
    count, spent = document["handles"]["spin"]
    assert count >= 10
    assert spent >= 10 * 0.02 * 0.9  # each call's thread CPU, not the loop's waiting
    assert document["handles"]["task main"][1] >= 0.01 * 0.9  # a task's steps, by coroutine
    before = {"at": 0.0, "process_cpu": 0.0, "handles": {}, "messages": {}, "functions": {}}
    after = {**document, "at": 2.0, "process_cpu": 0.5}
    report = loop_cost_report(before, after)
    assert report[0] == "window 2.0 s, process CPU 250.00 ms/s"
    (line,) = [text for text in report if text.endswith("  spin")]
    assert float(line.split()[0]) >= 90.0  # ms/s: >= 0.18 s over the 2 s window


def test_no_window_no_report() -> None:
    same = {"at": 5.0, "process_cpu": 1.0, "handles": {}, "messages": {}, "functions": {}}
    assert loop_cost_report(same, same) == ["loop cost: no window between the two documents"]
