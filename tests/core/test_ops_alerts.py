"""Alerts: the rules as configured (one line naming a bad key), the engine's hysteresis (fire
after ``for_s`` without a break, clear after ``clear_s``), each rule's condition, the server
rules held while an operation changes the fleet, the journal and a webhook served on loopback."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
from webhook_helpers import webhook

from tui import paths
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.gpu.snapshot import GpuSnapshot
from tui.ops.alerts.engine import AlertCleared, AlertEngine, AlertFired
from tui.ops.alerts.rules import (
    KINDS,
    AlertConfig,
    AlertConfigError,
    Rule,
    default_config,
    load_alert_config,
    rule_of,
)
from tui.ops.alerts.runner import AlertRunner, journal_entry
from tui.ops.alerts.webhook import ATTEMPTS, RETRY_S, WebhookPoster
from tui.ops.cli.journal import format_entry
from tui.ops.cli.journal import main as journal_main
from tui.ops.journal import read_journal
from tui.pipeline.status import PipelineStatus, Rate

READY = ServerState.READY


def fleet(*servers: ServerSnapshot | None, gpus: tuple[GpuSnapshot, ...] = ()) -> FleetSnapshot:
    by_index = {g.index: g for g in gpus}
    return FleetSnapshot(
        tuple(GpuPanel(i, by_index.get(i), s) for i, s in enumerate(servers)), taken_at=0.0
    )


def server(state: ServerState = READY, /, **fields: Any) -> ServerSnapshot:
    return ServerSnapshot(30000, state, **fields)


def engine(*names: str, **overrides: float) -> AlertEngine:
    rules = [rule_of(k) for k in KINDS if k.name in names]
    return AlertEngine(
        [
            Rule(
                r.name,
                overrides.get("for_s", r.for_s),
                overrides.get("clear_s", r.clear_s),
                overrides.get("threshold", r.threshold),
            )
            for r in rules
        ]
    )


def test_defaults_and_overrides_come_from_the_settings(tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"
    assert load_alert_config(settings) == default_config()
    assert {r.name for r in default_config().rules} == {k.name for k in KINDS} - {"capped"}
    settings.write_text(
        '[alerts]\nwebhook = "http://127.0.0.1:9/h"\n'
        "[alerts.throughput_low]\nbelow_percent = 60\nfor_s = 120\n"
        "[alerts.gpu_hot]\nenabled = false\n"
    )
    config = load_alert_config(settings)
    low = next(r for r in config.rules if r.name == "throughput_low")
    assert (low.threshold, low.for_s, low.clear_s) == (60.0, 120.0, 120.0)
    assert "gpu_hot" not in {r.name for r in config.rules}
    assert config.webhook == "http://127.0.0.1:9/h" and config.webhook_timeout_s == 5.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[alerts.melt]\n", "alerts.melt is not a setting"),
        ("[alerts.stuck]\nabove_c = 3\n", "alerts.stuck.above_c is not a setting"),
        ("[alerts.gpu_hot]\nabove_c = 500\n", "alerts.gpu_hot.above_c = 500: must be a number in"),
        ("[alerts.crashed]\nfor_s = -1\n", "alerts.crashed.for_s = -1"),
        ("[alerts.crashed]\nenabled = 1\n", "alerts.crashed.enabled = 1: must be true or false"),
        ('[alerts]\nwebhook = "ftp://x"\n', "alerts.webhook = 'ftp://x': must be an http(s) URL"),
        ("[alerts]\nwebhook_timeout_s = 0\n", "alerts.webhook_timeout_s = 0"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(tmp_path: Path, text: str, words: str) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text(text)
    with pytest.raises(AlertConfigError) as error:
        load_alert_config(settings)
    assert words in str(error.value) and str(settings) in str(error.value)
    assert "\n" not in str(error.value)


def test_hysteresis_fires_after_for_s_and_clears_after_clear_s() -> None:
    alerts = engine("gpu_hot", for_s=60, clear_s=30)
    hot = fleet(None, gpus=(gpu(0, temp=90.0),))
    cool = fleet(None, gpus=(gpu(0, temp=60.0),))
    assert alerts.feed(hot, None, 0.0) == ()
    assert alerts.feed(cool, None, 30.0) == ()  # a break: the count starts again
    assert alerts.feed(hot, None, 40.0) == ()
    assert alerts.feed(hot, None, 99.0) == ()
    (fired,) = alerts.feed(hot, None, 100.0)
    assert isinstance(fired, AlertFired) and (fired.since, fired.at) == (40.0, 100.0)
    assert fired.subject == "GPU 0" and fired.message == "GPU 0 at 90 °C (limit 85 °C)"
    assert alerts.active == (fired,)
    assert alerts.feed(cool, None, 110.0) == ()
    assert alerts.feed(hot, None, 120.0) == ()  # back within clear_s: still firing, no new one
    assert alerts.feed(cool, None, 130.0) == ()
    (cleared,) = alerts.feed(cool, None, 160.0)
    assert isinstance(cleared, AlertCleared) and cleared.fired_at == 100.0
    assert alerts.active == ()


def gpu(index: int, temp: float = 50.0, watts: float = 300.0) -> GpuSnapshot:
    return GpuSnapshot(index, "GPU", "u", 1, 0, 1, None, None, temp, watts, 700.0, None, None)


def test_a_crash_is_a_server_gone_down_by_itself() -> None:
    alerts = engine("crashed", clear_s=0)
    assert alerts.feed(fleet(server()), None, 0.0) == ()
    (fired,) = alerts.feed(fleet(server(ServerState.STOPPED)), None, 1.0)
    assert fired.rule == "crashed" and fired.message == "GPU 0 server on :30000 is stopped"
    (cleared,) = alerts.feed(fleet(server()), None, 2.0)
    assert isinstance(cleared, AlertCleared)
    # A drain someone began (STOPPING) is no crash; nor a stopped server at the first look.
    assert alerts.feed(fleet(server(ServerState.STOPPING)), None, 3.0) == ()
    assert alerts.feed(fleet(server(ServerState.STOPPED)), None, 4.0) == ()
    assert engine("crashed").feed(fleet(server(ServerState.STOPPED)), None, 0.0) == ()
    failed = engine("crashed").feed(
        fleet(server(ServerState.FAILED, last_error="CUDA out of memory")), None, 0.0
    )
    assert failed[0].message == "GPU 0 server on :30000 failed: CUDA out of memory"


def test_a_server_the_monitor_calls_crashed_fires_at_the_first_look_with_how_it_ended() -> None:
    """The monitor's own word (``crashed``: it died and nothing of gpufleet's stopped it) is a
    crash, seen first or not; its alert said nothing, as the rule knew only stopped and failed."""
    crashed = server(ServerState.CRASHED, exit_status="killed by SIGKILL")
    (fired,) = engine("crashed").feed(fleet(crashed), None, 0.0)
    assert fired.message == "GPU 0 server on :30000 crashed: killed by SIGKILL"
    alerts = engine("crashed", clear_s=0)
    assert alerts.feed(fleet(server()), None, 0.0) == ()
    (again,) = alerts.feed(fleet(server(ServerState.CRASHED)), None, 1.0)
    assert again.message == "GPU 0 server on :30000 crashed: exit status unknown"


def test_an_operation_holds_the_server_rules() -> None:
    alerts = engine("crashed", "gpu_hot", for_s=0)
    alerts.feed(fleet(server(), gpus=(gpu(0),)), None, 0.0)
    stopped = fleet(server(ServerState.STOPPED), gpus=(gpu(0, temp=99.0),))
    events = alerts.feed(stopped, None, 1.0, operation=True)  # an apply stops it
    assert [e.rule for e in events] == ["gpu_hot"]  # the GPU rules still run
    assert alerts.feed(stopped, None, 2.0) == ()  # stopped by the operation: no crash after it


def test_throughput_below_its_own_hour_median_while_busy() -> None:
    alerts = engine("throughput_low", for_s=600, threshold=50)
    busy = {"running": 30, "queued": 0}
    t = 0.0
    while t < 1800:  # half an hour at 1,000 tok/s
        assert alerts.feed(fleet(server(gen_throughput=1000.0, **busy)), None, t) == ()
        t += 10
    slow = fleet(server(gen_throughput=400.0, **busy))
    start = t
    while t < start + 600:
        assert alerts.feed(slow, None, t) == ()
        t += 10
    (fired,) = alerts.feed(slow, None, t)
    assert fired.message == "GPU 0 tok/s 400, 40% of its 1-hour median 1,000"
    # Idle (no requests) is not slow.
    idle = engine("throughput_low", for_s=0, threshold=50)
    for step in range(0, 900, 10):
        idle.feed(fleet(server(gen_throughput=1000.0, **busy)), None, float(step))
    assert idle.feed(fleet(server(gen_throughput=0.0, running=0, queued=0)), None, 900.0) == ()


def test_a_queue_growing_capped_concurrency_and_power() -> None:
    alerts = engine("queue_growing", "capped", "gpu_power", for_s=0)
    alerts.feed(fleet(server(queued=5)), None, 0.0)
    (grown,) = alerts.feed(fleet(server(queued=40)), None, 61.0)
    assert grown.message == "GPU 0 queue 40, +35 in a minute"
    capped = server(capped=True, max_running_effective=60, max_running_requested=128)
    (cap,) = alerts.feed(fleet(capped), None, 62.0)
    assert cap.message == "GPU 0 max running requests capped to 60 (asked 128)"
    drawing = fleet(None, gpus=(gpu(0, watts=690.0),))
    (power,) = [e for e in alerts.feed(drawing, None, 63.0) if e.rule == "gpu_power"]
    assert power.message == "GPU 0 draws 690 W, 99% of its 700 W limit"


def job(done: int, updated_at: float, state: str = "running") -> PipelineStatus:
    rate = Rate(60, 0.0, 0.0)
    return PipelineStatus(1, state, 1, 0.0, updated_at, 100, done, 0, 8, rate, rate, None)


def test_a_job_that_completes_nothing_stalls() -> None:
    alerts = engine("job_stalled", for_s=300)
    empty = fleet()
    assert alerts.feed(empty, job(10, 0.0), 0.0) == ()
    assert alerts.feed(empty, job(11, 100.0), 100.0) == ()  # progress
    assert alerts.feed(empty, job(11, 350.0), 350.0) == ()
    (fired,) = alerts.feed(empty, job(11, 401.0), 401.0)
    assert fired.subject == "job" and fired.message.startswith("job stalled: 11/100 done")
    (cleared,) = alerts.feed(empty, job(11, 402.0, state="finished"), 402.0)
    assert isinstance(cleared, AlertCleared)


def test_the_webhook_gets_a_json_body_and_a_failed_post_is_tried_again() -> None:
    fired = AlertFired("crashed", "GPU 3", 3, "GPU 3 server on :30003 is stopped", 10.0, 9.0)
    with webhook(failures=1) as (url, hook):
        poster = WebhookPoster(url, timeout_s=2.0, node="n1")
        poster.post(fired)
        assert hook.received.wait(10)
        poster.close()
    assert hook.bodies == [
        {"source": "gpufleet", "node": "n1", "state": "firing", "rule": "crashed",
         "subject": "GPU 3", "gpu": 3, "message": "GPU 3 server on :30003 is stopped",
         "at": 10.0, "since": 9.0}
    ]  # fmt: skip
    assert (poster.sent, poster.failed) == (1, 0)


def test_a_webhook_that_never_answers_costs_its_timeout_not_the_poll() -> None:
    """A listener that takes the connection and never answers: each try ends at the timeout,
    the alert is given up after its tries, and the poll that posted it never waited."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        poster = WebhookPoster(f"http://127.0.0.1:{listener.getsockname()[1]}/h", 0.5, "n")
        started = time.monotonic()
        poster.post(AlertFired("stuck", "GPU 0", 0, "m", 1.0, 1.0))
        # Queued, never waited on: one try that waited would take its whole 0.5 s timeout.
        assert time.monotonic() - started < 0.5
        poster.close(wait_s=20)
        took = time.monotonic() - started
    assert poster.failed == 1 and "ReadTimeout" in poster.last_error
    assert took < ATTEMPTS * 0.5 + (ATTEMPTS - 1) * RETRY_S + 5  # bounded by its timeout


def test_one_process_publishes_into_the_journal() -> None:
    config = AlertConfig((Rule("crashed", 0.0, 0.0),))
    first = AlertRunner(config, by="agent")
    second = AlertRunner(config, by="console")
    try:
        assert first.publishing and not second.publishing
        for runner in (first, second):
            runner.feed(fleet(server()), None, 0.0)
            runner.feed(fleet(server(ServerState.STOPPED)), None, 1.0)
        (fired,) = first.active
        assert second.active == (fired,)  # it shows the same alert, unjournalled
    finally:
        first.close()
        second.close()
    assert read_journal().entries == ()  # the operations' journal: alerts are not operations
    (entry,) = read_journal(paths.alerts_journal_file()).entries
    assert entry == journal_entry(fired, "agent")
    assert (entry.type, entry.verdict, entry.gpus, entry.by) == ("alert", "firing", (0,), "agent")
    assert format_entry(entry)[0].endswith(" alert on GPUs 0: firing in 0 s (agent)")
    third = AlertRunner(config, by="cli")
    assert third.publishing  # the lock went with its holder
    third.close()


def test_gpufleet_journal_alerts_reads_the_alerts_journal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runner = AlertRunner(AlertConfig((Rule("gpu_hot", 0.0, 0.0, 85.0),)), by="cli")
    try:
        runner.feed(fleet(None, gpus=(gpu(0, temp=91.0),)), None, 100.0)
    finally:
        runner.close()
    assert journal_main(["--alerts"]) == 0
    out = capsys.readouterr().out
    assert " alert on GPUs 0: firing in 0 s (cli)" in out
    assert "gpu_hot firing: GPU 0 at 91 °C (limit 85 °C)" in out
    assert journal_main([]) == 0 and "journal is empty" in capsys.readouterr().out


def test_capped_is_off_unless_the_settings_turn_it_on(tmp_path: Path) -> None:
    """A cap is how the fleet was launched (the demo's is by design): not an alert at every
    start unless asked for."""
    settings = tmp_path / "settings.toml"
    assert "capped" not in {r.name for r in load_alert_config(settings).rules}
    settings.write_text("[alerts.capped]\nfor_s = 5\n")  # a setting alone does not turn it on
    assert "capped" not in {r.name for r in load_alert_config(settings).rules}
    settings.write_text("[alerts.capped]\nenabled = true\nfor_s = 5\n")
    (capped,) = (r for r in load_alert_config(settings).rules if r.name == "capped")
    assert capped.for_s == 5.0
