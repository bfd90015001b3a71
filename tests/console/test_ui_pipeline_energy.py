"""The generation pane shows the job's energy, its tokens per joule and, with a price per kWh,
its cost so far and to the ETA (issue 38 point 5), from the ledger beside the status document;
the figures worked out here from the ledger's own numbers. The console here is a local fleet's
(``LocalFleet``, as ``gpufleet console`` builds it): the line once read an app attribute that no
console set, and showed only in tests that set it."""

from __future__ import annotations

from pathlib import Path

from ui_helpers import FixedPoller, make_app, pipeline_status, settle, seven_gpu_fleet, wait_for

from tui import paths
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps
from tui.pipeline.energy import JobEnergy, ledger_path, write_ledger
from tui.pipeline.status import write_status
from tui.ui.app import FleetApp
from tui.ui.pipeline.energy_line import JobEnergyLine

JOULES, TOKENS, WATTS = 44_640_000.0, 90_123_456, 4_900.0
"""Twelve and a bit kWh over two runs of the job, drawing 4.9 kW lately."""


class _Monitor(FixedPoller):
    """The fleet monitor as a local port uses it, on the seven-GPU snapshot."""

    def mark_stopping(self, gpu: int, stopping: bool = True) -> None:
        """Nothing stops here."""

    def log_paths(self) -> dict[int, str]:
        """No logs."""
        return {}


def _app(tmp_path: Path) -> FleetApp:
    """A local fleet's console whose job's status document has a ledger beside it."""
    status = pipeline_status()
    path = tmp_path / "status.json"
    write_status(path, status)
    ledger = JobEnergy(1, "job-1", JOULES, TOKENS, 2, 7, True, WATTS, status.updated_at)
    write_ledger(ledger_path(path), ledger)
    port = LocalFleet(FleetOps(), _Monitor(seven_gpu_fleet()), status_path=path)
    return FleetApp(port, poll_interval_s=3600.0)


def _energy(app: FleetApp) -> str:
    return str(app.main_screen.query_one(JobEnergyLine).render())


async def test_the_pane_shows_the_jobs_energy_and_its_cost_to_the_eta(tmp_path: Path) -> None:
    settings = paths.settings_file()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text('[energy]\nprice_per_kwh = 0.31\ncurrency = "EUR"\n')
    app = _app(tmp_path)
    eta_s = pipeline_status().eta_s
    assert eta_s is not None
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        await wait_for(pilot, lambda: "job energy" in _energy(app), "the job's energy")
        kwh = JOULES / 3.6e6
        to_eta = WATTS * eta_s / 3.6e6 * 0.31
        assert _energy(app) == (
            f"job energy: {kwh:,.2f} kWh for {TOKENS:,} tokens, {TOKENS / JOULES:.3g} tok/J, "
            f"{kwh * 0.31:,.2f} EUR so far, {to_eta:,.2f} EUR to the ETA (2 runs)"
        )


async def test_without_a_price_no_cost_and_a_bad_price_is_said(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        await wait_for(pilot, lambda: "job energy" in _energy(app), "the job's energy")
        assert "EUR" not in _energy(app) and "so far" not in _energy(app)
    settings = paths.settings_file()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("[energy]\nprice_per_kwh = -1\n")
    app = _app(tmp_path)
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        await wait_for(pilot, lambda: "no cost" in _energy(app), "the price's problem")
        assert "energy.price_per_kwh = -1: must be a number in 0..100" in _energy(app)


async def test_without_a_ledger_the_line_takes_no_room(tmp_path: Path) -> None:
    app = make_app(status=pipeline_status())  # a port without a ledger
    async with app.run_test(size=(120, 45)) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        line = app.main_screen.query_one(JobEnergyLine)

        def read() -> bool:
            reading = [w for w in app.workers if w.group == "energy-read" and not w.is_finished]
            return line._read_at is not None and not reading

        await wait_for(pilot, read, "the ledger's read")
        await pilot.pause()
        assert not line.display and not str(line.render())
