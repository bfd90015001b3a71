"""The console over two nodes' agents in a real terminal (tmux): every node's panels ready under
its heading; one agent killed: its node shown unreachable (dimmed, time since its last answer)
while the other stays live; then a relaunch on the other node through its agent, by keys."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import pytest
from node_helpers import ROOT, nodes, server_pid
from tmux_helpers import require_tmux, tmux_session

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(180)]

READY = re.compile(r"ready\s+:(\d+) pid (\d+)")


def test_console_over_two_agents_survives_a_lost_node(tmp_path: Path) -> None:
    require_tmux()
    with nodes(tmp_path, count=2, gpus=2) as (n1, n2):
        argv = [sys.executable, "-m", "tui", "console", "--agents"]
        argv += [f"{n1.agent_address},{n2.agent_address}", "--token-file", str(n1.token_file)]
        with tmux_session(argv, 200, 50, n1.env | {"PYTHONPATH": str(ROOT)}) as term:
            screen = term.wait_for(
                lambda s: len(READY.findall(s)) == 4 and s.count("· live") == 2, 60
            )
            assert f"n1 · {n1.agent_address} · 2 GPUs · live" in screen
            assert f"n2 · {n2.agent_address} · 2 GPUs · live" in screen
            assert "n2 GPU 1" in screen and "n1 GPU 0" in screen
            ports = {int(p) for p, _ in READY.findall(screen)}
            assert ports == set(n1.ports + n2.ports)

            n2.stop_agent(signal.SIGKILL)
            screen = term.wait_for(lambda s: "unreachable, last answer" in s, 30)
            assert re.search(rf"n2 · {n2.agent_address} · 2 GPUs · unreachable", screen)
            assert f"n1 · {n1.agent_address} · 2 GPUs · live" in screen
            # Its last panels stay on screen (dimmed), the live node's keep updating.
            assert len(READY.findall(screen)) == 4

            before = server_pid(n1, 0)
            term.send("0")  # n1's GPU 0 (console GPU 0)
            term.send("r")
            term.wait_for(lambda s: "with which profile?" in s, 20)
            term.send("Enter")
            term.wait_for(lambda s: "Restart GPU 0" in s, 20)
            term.send("y")
            screen = term.wait_for(lambda s: "relaunched GPU 0" in s, 90)
            after = server_pid(n1, 0)
            assert after != before
            term.wait_for(lambda s: f"pid {after}" in s and "· live" in s, 30)
            # The journal of the node says who relaunched it: its agent, for the console.
            journal = (n1.root / "state" / "journal.jsonl").read_text().splitlines()
            last = json.loads(journal[-1])
            assert last["type"] == "relaunch" and last["by"] == "agent:n1" and last["ok"]
