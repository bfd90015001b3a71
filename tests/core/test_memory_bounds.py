"""Flat memory by design (issue 31): what a long job repeats every second costs a bounded amount.

- Reading a small state file never allocates its bound: ``read(16 MiB + 1)`` allocated the whole
  bound first (CPython sizes the buffer before the read), once a second per state file in the
  console's and the agent's worker threads; the allocator's arenas grew and fragmented with it.
- The agent's read routes compute one answer for every concurrent caller and keep at most
  ``keep`` of them.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc

from tui import paths
from tui.agent.coalesce import Coalesced
from tui.state.fleet_state import read_fleet


def test_reading_a_small_state_file_allocates_about_its_size() -> None:
    path = paths.fleet_state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    server: dict[str, object] = {"gpu": 0, "port": 30000, "pid": 4242, "pgid": 4242}
    server |= {"create_time": 1.0, "cmdline": ["python", "-m", "tui", "sim"]}
    server |= {"log_path": "/tmp/x.log"}
    path.write_text(json.dumps({"version": 2, "gpus": {"0": {"port": 30000, "server": server}}}))
    read_fleet()  # imports and caches warmed outside the measurement
    tracemalloc.start()
    try:
        for _ in range(5):
            assert read_fleet()[0].server is not None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"reading a {path.stat().st_size}-byte state file peaked at {peak:,} B"


def test_concurrent_callers_share_one_computation_and_few_answers_are_kept() -> None:
    calls: list[int] = []

    async def compute(key: int) -> bytes:
        calls.append(key)
        await asyncio.sleep(0)  # the callers below all arrive while it runs
        return b"x" * 1000

    async def main() -> None:
        once: Coalesced[int, bytes] = Coalesced(compute, keep=2)
        answers = await asyncio.gather(*(once.get(7) for _ in range(200)))
        assert len(set(map(id, answers))) == 1 and calls == [7]
        await once.get(7)  # kept: not computed again
        assert calls == [7]
        for key in range(100):
            await once.get(key)
        assert len(once._done) == 2  # bounded whatever the keys
        flight: Coalesced[int, bytes] = Coalesced(compute)
        await asyncio.gather(*(flight.get(1) for _ in range(50)))
        await flight.get(1)
        assert calls.count(1) == 3  # single flight only: nothing kept after it

    asyncio.run(main())
