"""Issue 16's acceptance in a real terminal: an apply runs in the background while the operator
reads another GPU's log. ``gpufleet demo`` (7 simulated GPUs, a pipeline) in tmux at 200x50,
driven with the keyboard alone; the screen is polled with deadlines (no sleeps).

Tune GPU 3 and apply; hide the report (Escape) while GPU 3 restarts: the status strip names
the apply; open GPU 1's detail and see its log move; back on the grid, `w` opens the report
again, which ends with GPU 3 ready; quit, stopping the fleet.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from operator_helpers import leftovers

from tui.state.fleet_state import read_records

from .test_e2e_retune import APPLY_S, GPUS, READY, demo, open_form, quit_and_stop

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(180)]


def test_an_apply_runs_in_the_background_while_another_gpus_log_is_read(
    tmp_path: Path, isolated_state: Path
) -> None:
    state = isolated_state
    with demo(tmp_path, state) as (term, base):
        ports = list(range(base, base + GPUS))
        old3 = read_records()[3].pid
        term.send("3")
        open_form(term, "t", "GPU 3")
        term.send("C-t")
        term.wait_for(lambda s: "Is this change for GPU 3 only" in s, 20)  # asked (issue 30)
        term.send("g")
        term.wait_for(lambda s: "Restart GPU 3 (1 server)" in s, 20)
        term.send("y")
        term.wait_for(lambda s: "Escape: hide (the apply goes on" in s, 20)
        term.send("Escape")
        # the grid again, the strip naming the running apply
        strip = term.wait_for(lambda s: "· w: report" in s and "Escape: hide" not in s, 20)
        line = next(x for x in strip.splitlines() if "· w: report" in x)
        assert line.lstrip().startswith("apply ") and "GPU 3" in line, line
        # another GPU's detail: its log moves while GPU 3 restarts
        term.send("1")
        term.send("Enter")
        first = term.wait_for(lambda s: "GPU 1" in s and s.count("Decode batch") >= 2, 30)
        term.wait_for(lambda s: s != first and s.count("Decode batch") >= 2, 30)
        term.send("Escape")
        term.wait_for(lambda s: "· w: report" in s, 20)
        term.send("w")
        report = term.wait_for(lambda s: "1 of 1 GPUs ready" in s, APPLY_S)
        assert "Escape: close" in report
        term.send("Escape")
        grid = term.wait_for(lambda s: len(READY.findall(s)) == GPUS and "w: report" not in s, 30)
        assert str(base + 3) in dict(READY.findall(grid))
        assert read_records()[3].pid != old3
        quit_and_stop(term)
        assert leftovers(state, ports) == []
