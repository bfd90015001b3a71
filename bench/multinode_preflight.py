"""``python -m bench.multinode_preflight``: the tuning form's preflight latency per keystroke on a
many-node console, through agents on loopback (issue 18), with one HTTP client for the console's
life against a new client per preflight (the form before), in the same run.

Two agents (``node1``, ``node2``) over a 2-GPU simulated fleet; the console (``FleetApp`` over
``Nodes``, headless, polling the agents) opens the form with ``t`` on node2's GPU 1 and with
``T`` (every node), and each keystroke into the Mamba-slots input is timed from the key event
to the form showing that value's preflight (``TuningFormScreen.PreflightShown``). Prints the
median and range per form and mode; writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench.bench_preflight import FormWatch
from bench.multinode import _env, fleet, process
from bench.simfleet import free_ports
from tui import paths

KEYS = ("backspace", "backspace", "1", "2", "0", "backspace", "6", "backspace", "9", "5") * 2
"""Keystrokes into the Mamba-slots input, each making new values."""


async def latencies(addresses: str, token: str, gpu: int | None, shared: bool) -> list[float]:
    """Seconds from each keystroke to the form showing its values' preflight."""

    from tui.agent.client import parse_agents
    from tui.agent.nodes import Nodes
    from tui.agent.tuning import NodesTuning
    from tui.ui.app import FleetApp

    class PerCall(Nodes):
        """The form before: a new HTTP client for every preflight."""

        def tuning(self, gpu: int | None) -> NodesTuning:
            made = super().tuning(gpu)
            made._shared = None
            return made

    backend = (Nodes if shared else PerCall)(parse_agents(addresses), token)
    watch = FormWatch()
    app = FleetApp(backend, node_groups=True, poll_interval_s=1.0)
    app.close_on_exit = backend.aclose
    async with app.run_test(size=(160, 50), message_hook=watch.hook) as pilot:
        while len(app.main_screen.fleet.panels) < 4:
            await pilot.pause(0.05)
        if gpu is not None:
            app.main_screen.action_select(gpu)
        return await watch.type_keys(app, pilot, "t" if gpu is not None else "T", KEYS)


def main() -> int:
    """Start the fleet and the agents, measure each form both ways, print."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-mnp-") as tmp:
        os.environ[paths.STATE_ENV] = str(Path(tmp) / "console")  # the console's own history
        state = Path(tmp) / "nodes"
        with fleet(state, 2), contextlib.ExitStack() as stack:
            token_file = state / "agent.token"
            addresses = []
            for i in range(2):
                port = free_ports(1)[0]
                argv = [sys.executable, "-m", "tui", "agent", "--profile", "bench-base"]
                argv += ["--port", str(port), "--token-file", str(token_file)]
                argv += ["--node", f"node{i + 1}"]
                url = f"http://127.0.0.1:{port}/metrics"
                stack.enter_context(process(argv, _env(state), url))
                addresses.append(f"127.0.0.1:{port}")
            token = token_file.read_text().strip()
            joined = ",".join(addresses)
            for label, gpu in (("t (node2 GPU 1)", 101), ("T (both nodes)", None)):
                for shared in (False, True):
                    got = asyncio.run(latencies(joined, token, gpu, shared))
                    mode = "one client for the console" if shared else "a client per preflight"
                    ms = [1000 * x for x in got]
                    print(
                        f"{label:16} {mode:28} median {statistics.median(ms):6.1f} ms "
                        f"(min {min(ms):.1f}, max {max(ms):.1f}, n={len(ms)})",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
