"""The GPU panel shows each pool's use, the prefix cache's hit rate, the draft and the energy
(issue 38 points 2, 4, 5), within the full layout's height; checked against the snapshot's own
numbers, worked out here."""

from __future__ import annotations

from dataclasses import replace

from ui_helpers import gpu, ready_server, settled_app

from tui.fleet.energy import GpuEnergy
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerState
from tui.fleet.speculative import SpecDecode
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.grid.layout import FULL_PANEL_HEIGHT

MTP = SpecDecode("NEXTN", accept_length=2.714, accept_rate=0.6789, steps=3, draft_tokens=4)
"""The seed's MTP draft at one moment."""


def observed_fleet() -> FleetSnapshot:
    """GPU 0: SWA, Mamba, a hit rate, the seed's draft, its card alone; GPU 1: no draft, no
    SWA, sharing card 0 with GPU 0 (its joules are the card's); GPU 2 starting (unread)."""
    tokens_0, joules_0 = 41_000.0, 17_500.0  # over the window: tokens per joule worked out
    zero = ready_server(
        0, token_usage=0.543, swa_usage=0.031, mamba_usage=0.876, cache_hit_rate=0.412, spec=MTP
    )
    one = ready_server(1, swa_usage=0.0, cache_hit_rate=0.05, spec=None)
    starting = ready_server(2, state=ServerState.STARTING, running=None, queued=None)
    panels = (
        GpuPanel(
            0,
            gpu(0),
            zero,
            energy=GpuEnergy(9e5, True, 300.0, joules_0 / 300.0, tokens_0 / joules_0),
        ),
        GpuPanel(
            1,
            gpu(0),
            one,
            device=0,
            energy=GpuEnergy(9e5, True, 300.0, 58.3, 0.5, shared_with=(0,)),
        ),
        GpuPanel(2, gpu(2), starting),
    )
    return FleetSnapshot(panels=panels, gpu_source="simulated GPUs (3)", taken_at=0.0)


def _lines(view: GpuPanelView) -> list[str]:
    return [line.plain for line in view.lines()]


async def test_a_full_panel_shows_each_pool_the_hit_rate_the_draft_and_the_energy() -> None:
    async with settled_app(observed_fleet(), size=(200, 50)) as (app, _):
        views = {v.gpu_index: v for v in app.main_screen.query(GpuPanelView)}
        zero = _lines(views[0])
        # each pool on its own, never token_usage alone; the hit rate beside them
        assert (
            f"KV {0.543 * 100:.0f}%  SWA {0.031 * 100:.0f}%  mamba {0.876 * 100:.0f}%  hit 41%"
            in zero
        )
        assert f"spec NEXTN accept {2.714:.2f} · {0.6789:.0%}  steps 3" in zero
        # to two significant digits and 10 W on a panel (the detail keeps three)
        assert f"energy {41_000 / 17_500:.1f} tok/J  avg {round(17_500 / 300 / 10) * 10} W" in zero
        one = _lines(views[1])
        # no SWA layers (0): no SWA gauge; no draft: said, not left out
        assert "KV 54%  mamba 20%  hit 5%" in one and "SWA" not in "\n".join(one)
        assert "spec none" in one
        assert "energy 0.50 tok/J  shared with GPU 0" in one
        # a server whose load is not read yet: its draft is not guessed
        assert not any(line.startswith("spec") for line in _lines(views[2]))


async def test_the_full_layout_keeps_its_height_and_an_error_before_the_energy() -> None:
    rows = FULL_PANEL_HEIGHT - 2
    fleet = observed_fleet()
    server = fleet.panels[0].server
    assert server is not None
    warned = replace(server, last_error="input too long", error_reason="bad", error_fatal=False)
    fleet = replace(fleet, panels=(replace(fleet.panels[0], server=warned), *fleet.panels[1:]))
    async with settled_app(fleet, size=(200, 50)) as (app, _):
        views = {v.gpu_index: v for v in app.main_screen.query(GpuPanelView)}
        from textual.geometry import Size

        least = Size(40, rows)  # the full layout's least room
        plain = [line.plain for line in views[1].lines(least)]
        assert len(plain) == rows and plain[-1].startswith("energy")  # all nine shown
        cut = [line.plain for line in views[0].lines(least)]
        assert "BAD: input too long" in cut and cut[-1].startswith("spec")  # energy cut first


async def test_a_compact_panel_shows_the_pools_without_token_usage_alone() -> None:
    async with settled_app(observed_fleet(), size=(80, 24)) as (app, _):
        view = next(v for v in app.main_screen.query(GpuPanelView) if v.gpu_index == 0)
        text = "\n".join(_lines(view))
        assert "KV 54% SWA 3% m88% hit 41%" in text
        assert "tok 54%" not in text
