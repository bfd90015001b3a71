"""The console and ``gpufleet serve`` given no fleet watch the fleet the state records, as
``gpufleet status`` does (issue 30: beside ``gpufleet demo --base-port 25000`` a plain
``gpufleet serve`` showed seven ``absent :30000`` panels), and a console given ``--ports``
marks the journal's operations on the GPUs of those ports (it marked none)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tui import paths
from tui.fleet.monitor import FleetMonitor
from tui.ops.entries import simple_entry
from tui.ops.journal import append
from tui.ops.local import LocalFleet
from tui.state.fleet_state import FleetState, GpuState, update_fleet
from tui.ui import cli as console_cli
from tui.ui.app import FleetApp
from tui.ui.serve import cli as serve_cli
from tui.ui.serve.auth import Token
from tui.ui.serve.server import ConsoleServer

DEMO = tuple(range(25000, 25007))
"""``gpufleet demo --base-port 25000``'s ports, GPUs 0-6. Nothing listens there: no poll runs."""


@pytest.fixture()
def opened(monkeypatch: pytest.MonkeyPatch) -> list[FleetApp]:
    """The consoles ``main`` opens, built but not run (no terminal, no poll)."""
    apps: list[FleetApp] = []
    monkeypatch.setattr(FleetApp, "run", lambda self, *args, **kwargs: apps.append(self))
    return apps


def record(ports: tuple[int, ...], host: str = "127.0.0.1") -> None:
    """The fleet state of a fleet gpufleet launched on ``ports``, GPU 0 first."""

    def change(state: FleetState) -> FleetState:
        return {g: GpuState(g, port=port, host=host) for g, port in enumerate(ports)}

    update_fleet(change)


def watched(app: FleetApp) -> list[tuple[int, int, str]]:
    port = app.port
    assert isinstance(port, LocalFleet) and isinstance(port.monitor, FleetMonitor)
    spec = port.monitor.spec
    return [(s.gpu_index, s.port, s.host) for s in spec.servers]


def test_a_plain_console_watches_the_recorded_fleet(opened: list[FleetApp]) -> None:
    record(DEMO, host="127.0.0.2")
    assert console_cli.main([]) == 0
    assert watched(opened[0]) == [(g, 25000 + g, "127.0.0.2") for g in range(7)]


def test_with_nothing_recorded_or_with_ports_given_the_console_watches_those(
    opened: list[FleetApp],
) -> None:
    assert console_cli.main([]) == 0
    assert watched(opened[0]) == [(g, 30000 + g, "127.0.0.1") for g in range(7)]
    record(DEMO)
    assert console_cli.main(["--ports", "30000-30006"]) == 0
    assert [port for _, port, _ in watched(opened[1])] == list(range(30000, 30007))
    assert console_cli.main(["--ports", "25003,25005"]) == 0  # each port's recorded GPU
    assert watched(opened[2]) == [(3, 25003, "127.0.0.1"), (5, 25005, "127.0.0.1")]


def test_a_damaged_fleet_state_is_named_in_one_line(
    opened: list[FleetApp], capsys: pytest.CaptureFixture[str]
) -> None:
    paths.fleet_state_file().write_text("{not json")
    assert console_cli.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpufleet console: ") and "fleet_state.json" in err
    assert len(err.splitlines()) == 1 and not opened


def test_serve_says_which_fleet_its_consoles_watch(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve_cli._check_console_args([]) == (
        None,
        "ports 30000-30006 (GPUs 0-6), the default: the fleet state records none",
    )
    record(DEMO)
    problem, watching = serve_cli._check_console_args([])
    assert (problem, watching) == (None, "the fleet state's ports 25000-25006 (GPUs 0-6)")
    assert serve_cli._check_console_args(["--ports", "1-3", "--gpus", "0"])[0] == (
        "--ports gives 3 ports but --gpus gives 1 GPUs; give one port per GPU"
    )
    server = ConsoleServer(
        ["true"],
        host="127.0.0.1",
        port=8000,
        token=Token("t" * 32, False, "test"),
        title="t",
        watching=watching,
    )
    asyncio.run(server.on_startup(None))  # type: ignore[arg-type]  # no aiohttp app: it reads none
    out = capsys.readouterr().out
    assert "gpufleet serve: and watches the fleet state's ports 25000-25006 (GPUs 0-6)" in out


def test_status_and_the_console_read_the_fleet_through_one_door() -> None:
    from tui.fleet.recorded import default_fleet, fleet_words, spans
    from tui.ops.cli.status import fleet_spec

    record((25000, 25001), host="127.0.0.2")
    assert fleet_spec(None, None) == default_fleet()[0]
    assert fleet_words(default_fleet()[0]) == "ports 25000,25001 on 127.0.0.2 (GPUs 0,1)"
    assert spans([5, 1, 2, 3, 9]) == "1-3,5,9"


def test_a_console_given_ports_marks_the_operations_on_their_gpus(
    opened: list[FleetApp],
) -> None:
    record(DEMO)
    append(simple_entry("kill", 100.0, 105.0, True, (3,), "console", "stopped"))
    append(simple_entry("kill", 200.0, 205.0, True, (5,), "console", "stopped"))
    assert console_cli.main(["--ports", "25000-25006", "--gpus", "0-6"]) == 0
    assert [m.label for m in opened[0].port.reads.marks()] == ["kill GPU 3", "kill GPU 5"]
    # One port, labelled GPU 0 by --gpus: the fleet state says it is GPU 3's.
    assert console_cli.main(["--ports", "25003", "--gpus", "0"]) == 0
    assert [m.label for m in opened[1].port.reads.marks()] == ["kill GPU 3"]
    assert console_cli.main([]) == 0  # the recorded fleet: every operation of it
    assert len(opened[2].port.reads.marks()) == 2


def test_a_profile_console_watches_the_fleets_ports_whatever_profile_runs(
    opened: list[FleetApp],
) -> None:
    """A demo on --base-port 25000 after an apply of sim-aggressive: '--profile sim-baseline'
    (what docs/console.md names for 'gpufleet serve --writable') watched 30000-30006."""
    from tui.ops.demo import demo_profile
    from tui.ops.simfleet import sim_profile
    from tui.profiles import profile_to_dict

    running = profile_to_dict(demo_profile(sim_profile("sim-aggressive"), None, 40.0, 25000))

    def change(state: FleetState) -> FleetState:
        return {g: GpuState(g, port=25000 + g, current=running) for g in range(7)}

    update_fleet(change)
    assert console_cli.main(["--profile", "sim-baseline"]) == 0
    assert [port for _, port, _ in watched(opened[0])] == list(DEMO)
    assert opened[0].profile == "sim-baseline"  # its flags, on the fleet's ports


async def test_devices_says_two_watched_ports_share_a_card_before_any_adopt(
    opened: list[FleetApp], tmp_path: Path
) -> None:
    """Two servers a script started on card 0: ``--devices 0,0`` and GPU 1's panel reads card 0
    (it read card 1, a card they do not run on, until ``A`` adopted them); the logs are kept."""
    from fleet_helpers import poll_until

    args = ["--ports", "25000,25001", "--gpus", "0,1", "--devices", "0,0"]
    assert console_cli.main([*args, "--log-dir", str(tmp_path)]) == 0
    port = opened[0].port
    assert isinstance(port, LocalFleet) and isinstance(port.monitor, FleetMonitor)
    monitor = port.monitor
    spec = monitor.spec
    assert [(s.gpu_index, s.device_index, s.log_path) for s in spec.servers] == [
        (0, 0, str(tmp_path / "sglang_gpu0.log")),
        (1, 0, str(tmp_path / "sglang_gpu1.log")),
    ]
    try:
        snap = await poll_until(monitor, lambda s: len(s.panels) >= 2, 20)
    finally:
        await monitor.aclose()
    assert [(p.gpu_index, p.device) for p in snap.panels][:2] == [(0, None), (1, 0)]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["--ports", "25000,25001", "--gpus", "0,1", "--devices", "0,x"],
            "--devices: '0,x' is not a list like",
        ),
        (
            ["--ports", "25000,25001", "--gpus", "0,1", "--devices", "0"],
            "--devices: '0' names 1 cards for 2 ports",
        ),
        (
            ["--ports", "25000,25001", "--gpus", "0,1", "--devices", "0,300"],
            "--devices: '0,300': allowed range 0..255",
        ),
        (["--profile", "sim-baseline", "--devices", "0,0"], "--devices is for --ports"),
    ],
)
def test_a_bad_devices_is_one_line_and_opens_nothing(
    opened: list[FleetApp], capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert console_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert opened == []
