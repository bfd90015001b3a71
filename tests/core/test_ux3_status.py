"""``gpufleet status`` as a script and an operator read it (issue 30, point 8): ``--json`` gives
the requested values as the profile types them (it gave ``"80"`` and ``"0.88"``), and the table
never cuts a profile (it read ``ux-m120-all (max_runni``), at 80 and at 200 columns."""

from __future__ import annotations

import json
from dataclasses import replace

from ui_helpers import T0, seven_gpu_fleet, shipped_profiles

from tui.fleet.running_profiles import running_profiles
from tui.ops.fleet_status import SCHEMA, format_text, status_document
from tui.profiles import profile_to_dict
from tui.state.fleet_state import GpuState


def fleet_with_profiles() -> dict:
    """The seven-GPU fleet: GPUs 0-5 on sim-baseline, GPU 6 on a long-named variant of it."""
    base = profile_to_dict(shipped_profiles()["sim-baseline"])
    variant = {
        **base,
        "name": "ux-m120-all-gpus-long-name",
        "server": {**base["server"], "max_running_requests": 120, "max_mamba_cache_size": 120},
    }
    state = {g: GpuState(g, current=base if g < 6 else variant) for g in range(7)}
    profiles = running_profiles(state)
    fleet = seven_gpu_fleet()
    panels = tuple(
        replace(p, server=replace(p.server, profile=profiles[p.gpu_index]))
        if p.server is not None
        else p
        for p in fleet.panels
    )
    return status_document(replace(fleet, panels=panels), None, T0)


def test_requested_values_are_typed_in_the_json() -> None:
    doc = json.loads(json.dumps(fleet_with_profiles()))  # as a script reads it
    assert doc["schema"] == SCHEMA == 2
    gpu0, gpu6 = doc["gpus"][0], doc["gpus"][6]
    assert gpu0["requested"]["mem_fraction_static"] == 0.88
    assert gpu0["requested"]["max_mamba_cache_size"] == 80
    assert isinstance(gpu0["requested"]["max_mamba_cache_size"], int)
    assert gpu0["requested"]["max_running_requests"] is None  # auto: SGLang chooses
    assert gpu6["profile_differs"] == {"max_running_requests": 120, "max_mamba_cache_size": 120}
    flags = [v for v in gpu0["requested"].values() if isinstance(v, bool)]
    assert all(isinstance(v, bool) for v in flags)  # bools stay bools (none is a string)
    assert not any(
        isinstance(v, str) and v.replace(".", "").isdigit() for v in gpu0["requested"].values()
    )


def test_the_table_widens_the_profile_column_at_200_columns() -> None:
    lines = format_text(fleet_with_profiles(), 200)
    row6 = next(line for line in lines if line.lstrip().startswith("6 "))
    assert "ux-m120-all-gpus-long-name (max_running_requests 120, max_mamba_cache_size 120)" in row6
    assert all(len(line) <= 200 for line in lines)


def test_the_table_puts_the_knobs_on_a_line_of_their_own_at_80_columns() -> None:
    lines = format_text(fleet_with_profiles(), 80)
    row6 = next(i for i, line in enumerate(lines) if line.lstrip().startswith("6 "))
    assert "ux-m120-all-gpus-long-name " in lines[row6]  # the whole name, in its column
    knobs = " ".join(line.strip() for line in lines[row6 + 1 : row6 + 3])
    assert knobs.startswith("(max_running_requests 120, max_mamba_cache_size 120)")
    rows = [line for line in lines if line[:3].strip().isdigit() or line.startswith("GPU")]
    assert all(len(line) == 67 + 26 for line in rows)  # 67 columns around the 26-letter name
    assert all(len(line) <= 80 for line in lines if line not in rows)  # the rest wraps
