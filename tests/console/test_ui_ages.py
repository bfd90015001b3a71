"""The age of every number on a panel, the profile each panel names, and one meaning of
"asked": Pilot tests on fixed data, and an SVG snapshot of a fleet with stale panels."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.content import Content
from textual.pilot import Pilot
from ui_helpers import gpu, make_app, pipeline_status, ready_server, settle

from tui.fleet.running_profiles import RunningProfile
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerState
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.pipeline.generation_pane import summary_lines

T0 = 1_778_364_000.0
BASE = RunningProfile(
    "sim-baseline",
    (
        ("max_running_requests", "auto"),
        ("max_mamba_cache_size", "80"),
        ("mem_fraction_static", "0.88"),
    ),
)
AGGRESSIVE = RunningProfile(
    "sim-aggressive",
    (
        ("max_running_requests", "64"),
        ("max_mamba_cache_size", "200"),
        ("mem_fraction_static", "0.93"),
    ),
    differs=(
        ("max_running_requests", "64"),
        ("max_mamba_cache_size", "200"),
        ("mem_fraction_static", "0.93"),
    ),
)


def aged_fleet() -> FleetSnapshot:
    """GPU 0 fresh; 1 a capped other profile; 2 read 12 s ago (dim); 3 read 45 s ago (blank);
    4 decaying, its last Decode line 12 s ago; 5 auto, SGLang's own 48 capped to 16."""
    servers = [
        ready_server(0, profile=BASE, load_age_s=0.4, throughput_age_s=0.5),
        ready_server(
            1,
            profile=AGGRESSIVE,
            max_running_requested=64,
            max_running_effective=40,
            capped=True,
            load_age_s=0.4,
            throughput_age_s=0.5,
        ),
        ready_server(2, profile=BASE, load_age_s=12.0, throughput_age_s=12.0),
        ready_server(3, profile=BASE, load_age_s=45.0, throughput_age_s=45.0),
        ready_server(4, profile=BASE, load_age_s=0.3, throughput_age_s=12.0, running=0, queued=0),
        ready_server(
            5,
            profile=BASE,
            max_running_requested=48,
            max_running_effective=16,
            capped=True,
            load_age_s=0.3,
            throughput_age_s=0.5,
        ),
    ]
    panels = tuple(GpuPanel(i, gpu(i), s) for i, s in enumerate(servers))
    return FleetSnapshot(panels=panels, gpu_source="simulated GPUs (6)", taken_at=T0)


def _app() -> FleetApp:
    app = make_app(aged_fleet(), status=pipeline_status())
    app.animation_level = "none"
    return app


def _text(app: FleetApp, gpu: int) -> str:
    view = app.main_screen.query_one(f"#gpu-{gpu}", GpuPanelView)
    return "\n".join(line.plain for line in view.lines())


async def test_stale_values_are_dimmed_with_their_age_then_blanked() -> None:
    app = _app()
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        fresh, dim, blank, decaying = (_text(app, g) for g in (0, 2, 3, 4))
        assert "  queued 12" in fresh and "running 40/" in fresh and "·" not in fresh
        assert "running 40/" in dim and "  queued 10 · 12s" in dim
        assert "KV 54%  mamba 20% · 12s" in dim
        assert "running –/" in blank and "  queued – · 45s" in blank and "gen – tok/s" in blank
        assert "1,398" not in blank  # the stale rate is not on screen
        assert "running 0/" in decaying and "  queued 0" in decaying and "· 12s" in decaying
        # the dimmed lines are drawn dim
        view = app.main_screen.query_one("#gpu-2", GpuPanelView)
        line = next(line for line in view.lines() if line.plain.startswith("running"))
        assert any("dim" in str(span.style) for span in line.spans)


async def test_each_panel_names_its_profile_and_asked_means_the_profiles_value() -> None:
    app = _app()
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        views = {v.gpu_index: v for v in app.main_screen.query(GpuPanelView)}
        assert views[0].border_subtitle == "sim-baseline"
        assert views[1].border_subtitle == "sim-aggressive (mrr 64, mamba 200, mfs 0.93)"
        assert "running 40/40 (asked 64)" in _text(app, 1)
        # the profile left it auto: SGLang's 48 is shown apart, never as "asked"
        five = _text(app, 5)
        assert "/16 (auto, sglang 48)" in five and "asked" not in five
    small = _app()
    async with small.run_test(size=(80, 24)) as pilot:
        await settle(pilot, small)
        assert "/40 (asked 64)" in _text(small, 1)


def test_stale_panels_snapshot(snap_compare: Any) -> None:
    async def run(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, FleetApp)
        await settle(pilot, app)
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(200, 50), run_before=run)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"state": "finished", "eta_s": None}, "job finished"),
        ({"state": "stopped"}, "pipeline stopped"),
        ({"state": "failed"}, "pipeline failed"),
        ({"no_server_since": T0 - 8.0, "updated_at": T0}, "no server healthy for 8s"),
    ],
)
def test_the_generation_panes_rates_and_eta_stop_and_say_why(
    changes: dict[str, Any], why: str
) -> None:
    status = replace(pipeline_status(), **changes)
    text = summary_lines(status).plain
    assert f"ETA – ({why})" in text and f"req/s –  out tok/s –  ({why})" in text
    assert "156" not in text and "(1m)" not in text  # the last rates are not on screen


def test_a_running_job_shows_its_rates_and_eta() -> None:
    text = summary_lines(pipeline_status()).plain
    assert "(1m)" in text and "ETA –" not in text


@pytest.mark.parametrize("state", [ServerState.STOPPED, ServerState.CRASHED, ServerState.FAILED])
@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_stopped_or_failed_panel_blanks_its_servers_numbers(
    state: ServerState, size: tuple[int, int]
) -> None:
    """What the last launch read (KV tokens, Mamba slots, max running, the load and the tok/s
    readings) is not shown once its server does not run; the GPU's own readings stay."""
    kept = ready_server(1, state=state, max_running_requested=64, capped=True)
    fleet = FleetSnapshot((GpuPanel(0, gpu(0), ready_server(0)), GpuPanel(1, gpu(1), kept)))
    app = make_app(fleet)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        text = "\n".join(line.plain for line in panel_text(app, 1))
        for gone in ("798", "40", "1,401", "1401", "54%", "200", "asked"):
            assert gone not in text, (gone, text)
        assert "97%" in text  # the GPU's utilisation, read this poll
        assert "798" in "\n".join(line.plain for line in panel_text(app, 0))  # a ready one


def panel_text(app: FleetApp, index: int) -> list[Content]:
    """The lines of GPU ``index``'s panel."""
    return app.screen.query_one(f"#gpu-{index}", GpuPanelView).lines()
