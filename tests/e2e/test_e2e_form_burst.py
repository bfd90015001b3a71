"""The tuning form keeps every key at any typing speed, in a real terminal: ``gpufleet demo``
(two simulated GPUs, no pipeline) in tmux, the four knobs typed in ONE ``send-keys`` (no delay
between keys: a terminal's paste, or key-repeat). The keys after a Tab reached the field it was
leaving ('0.6' became '.6'; one burst gave '0.880.93200'); the older tmux tests retype a value
until it shows. The screen is polled with deadlines (no sleeps)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from operator_helpers import cleaned, free_port_run
from repo_paths import ROOT
from tmux_helpers import tmux_session

from tui import paths

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(150)]

GPUS = 2


def knob_values(screen: str) -> dict[str, str]:
    """The four knobs' values as the form shows them (``test_e2e_retune``'s reading)."""
    from .test_e2e_retune import knob_values as values

    return values(screen)


def test_the_four_knobs_typed_in_one_burst_each_land_in_their_field(
    tmp_path: Path, isolated_state: Path
) -> None:
    base = free_port_run(GPUS)
    ports = list(range(base, base + GPUS))
    argv = [sys.executable, "-m", "tui", "demo", "--speed", "50", "--base-port", str(base)]
    argv += ["--gpus", str(GPUS), "--no-pipeline"]
    profiles = tmp_path / "profiles"
    shutil.copytree(ROOT / "profiles", profiles)  # the form saves its candidate here
    env = {paths.STATE_ENV: str(isolated_state), paths.PROFILES_ENV: str(profiles)}
    with cleaned(isolated_state, ports), tmux_session(argv, 200, 50, env) as term:
        term.wait_for(lambda s: s.count("ready  :") >= GPUS, 90)
        term.send("T")
        term.wait_for(lambda s: "Tune all" in s and "fits" in s, 30)
        assert knob_values(term.screen())["mem_fraction_static"] == "0.88"
        # one send-keys: every key of the four values, the Tabs between them, no waiting
        term.send(*("C-u", "0.93", "Tab", "C-u", "200", "Tab", "C-u", "0.6", "Tab", "C-u", "64"))
        want = {
            "mem_fraction_static": "0.93",
            "max_mamba_cache_size": "200",
            "mamba_full_memory_ratio": "0.6",
            "running": "64",
        }
        shown = term.wait_for(lambda s: knob_values(s) == want, 20)
        assert "0.880.93" not in shown
        term.send("Escape")
        term.wait_for(lambda s: "running profile:" not in s, 20)
        term.send("q")
        term.wait_for(lambda s: "Quit the console?" in s, 20)
        term.send("s")
        assert term.wait_exit(120), f"the console did not exit:\n{term.screen()}"
