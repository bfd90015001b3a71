"""``gpufleet demo`` in a real terminal (tmux): the fleet comes up, quits stop or keep it.

Each test runs ``python -m tui demo`` with its own state directory, a fast simulator and free
ports, reads the screen until every panel says ready (deadline-bounded polling, no sleeps),
quits through the keyboard and checks with psutil that nothing of it is left running.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from operator_helpers import cleaned, free_port_run, leftovers, pid_alive
from repo_paths import ROOT
from tmux_helpers import TmuxSession, require_tmux, tmux_session

from tui import paths
from tui.state.fleet_state import read_records

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(180)]

GPUS = 7
READY_S = 90.0
"""Deadline for all seven panels to say ready (a few seconds on an idle machine)."""
READY = re.compile(r"ready\s+:(\d+) pid (\d+)")


def demo_argv(base_port: int) -> list[str]:
    return [sys.executable, "-m", "tui", "demo", "--speed", "200", "--base-port", str(base_port)]


def demo_env(state: Path) -> dict[str, str]:
    return {paths.STATE_ENV: str(state), paths.PROFILES_ENV: str(ROOT / "profiles")}


def ready_ports(screen: str) -> dict[int, int]:
    """Port -> pid of every panel that says ready."""
    return {int(port): int(pid) for port, pid in READY.findall(screen)}


def wait_all_ready(term: TmuxSession, base_port: int) -> dict[int, int]:
    wanted = set(range(base_port, base_port + GPUS))
    screen = term.wait_for(lambda s: set(ready_ports(s)) >= wanted, READY_S)
    return ready_ports(screen)


FULL_UTIL = re.compile(r"util (\d+)%  \d+°C  \d+/\d+ W\s*$")
COMPACT_UTIL = re.compile(r"\d+/\d+G (\d+)% \d+°C \d+W\s*$")
BOX = re.compile(r"[│┃]")


def util_cells(screen: str) -> list[str]:
    """Each panel's GPU line as the terminal shows it (cells between the panel borders)."""
    cells = [cell for line in screen.splitlines() for cell in BOX.split(line)]
    gpu_lines = [c for c in cells if c.startswith("util ") or re.match(r"\d+/\d+G ", c)]
    # not the utilisation graph's label line under it ("util 21%   max 60% · 10m"; a wider
    # panel keeps more history and says "· 20m" or "· 30m")
    return [c for c in gpu_lines if not re.search(r" · \d+[smh]$", c.rstrip())]


class BusySeen:
    """A screen predicate: true once each of the seven GPU lines has shown a busy GPU.

    The lines need not be busy on the same screen: at the demo's speed a GPU's requests finish
    within a poll, and on a loaded 2-core machine one of seven is often idle at any instant.
    Every screen's lines must be whole (see ``whole``) whatever they say.
    """

    def __init__(self) -> None:
        self.busy: set[int] = set()
        self.screens: list[str] = []

    def __call__(self, screen: str) -> bool:
        cells = util_cells(screen)
        if len(cells) != GPUS:
            return False
        self.screens.append(screen)
        for index, cell in enumerate(cells):
            found = re.match(r"(?:util |\d+/\d+G )(\d+)%", cell)
            if found is not None and int(found.group(1)) > 0:
                self.busy.add(index)
        return len(self.busy) == GPUS


def quit_with(term: TmuxSession, key: str) -> None:
    term.send("q")
    term.wait_for(lambda s: "Quit the console?" in s, 20)
    term.send(key)
    # A drain ends when the server's last request does (SGLang 0.5.23); past the stop's 60 s drain
    # deadline it escalates to the group: the console exits within that, plus the kill and release.
    assert term.wait_exit(150), f"the console did not exit:\n{term.screen()}"


@pytest.mark.parametrize(("width", "height"), [(80, 24), (200, 50)])
def test_demo_comes_up_ready_and_stop_leaves_nothing(
    width: int, height: int, isolated_state: Path
) -> None:
    require_tmux()
    base = free_port_run(GPUS)
    ports = list(range(base, base + GPUS))
    with cleaned(isolated_state, ports):
        with tmux_session(demo_argv(base), width, height, demo_env(isolated_state)) as term:
            shown = wait_all_ready(term, base)
            # The header says the fleet is simulated, and how fast (the demo's --speed 200).
            header = term.wait_for(lambda s: "simulated x200: " in s.splitlines()[0], 10)
            assert header.splitlines()[0].index("simulated x200") < width - 20
            records = read_records()
            assert sorted(r.port for r in records.values()) == ports
            assert {records[g].pid for g in records} == {shown[p] for p in ports}
            assert (isolated_state / "demo" / "prompts.jsonl").is_file()
            # Every GPU went from idle to busy, each cell repainted only where its text
            # changed: what the terminal shows must still be each line's text, whole (a
            # partial repaint once left '8431000 W' of '97/1000 W' -> '843/1000 W').
            busy = BusySeen()
            term.wait_for(busy, 60)
            for screen in busy.screens:
                for cell in util_cells(screen):
                    assert FULL_UTIL.match(cell) or COMPACT_UTIL.match(cell), (cell, screen)
            quit_with(term, "s")
        assert read_records() == {}
        assert not any(pid_alive(r.pid) for r in records.values())
        assert leftovers(isolated_state, ports) == []


def test_keep_then_reopen_reattaches_to_the_same_fleet(isolated_state: Path) -> None:
    require_tmux()
    base = free_port_run(GPUS)
    ports = list(range(base, base + GPUS))
    env = demo_env(isolated_state)
    with cleaned(isolated_state, ports):
        with tmux_session(demo_argv(base), 200, 50, env) as term:
            first = wait_all_ready(term, base)
            quit_with(term, "k")
        assert all(pid_alive(pid) for pid in first.values())  # kept running
        pipelines = [line for line in leftovers(isolated_state, ports) if "generate" in line]
        assert len(pipelines) == 1

        with tmux_session(demo_argv(base), 200, 50, env) as term:
            again = wait_all_ready(term, base)
            assert again == first  # the same processes, re-attached, not restarted
            # ... and the same pipeline: the demo does not start a second one.
            assert [x for x in leftovers(isolated_state, ports) if "generate" in x] == pipelines
            quit_with(term, "s")
        assert leftovers(isolated_state, ports) == []
        assert not any(pid_alive(pid) for pid in first.values())
