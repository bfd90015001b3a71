"""Two of issue 16's small fixes: the quit dialog says what Stop fleet does to the pipeline,
and ``--help`` shows the command's docstring without RST markup."""

from __future__ import annotations

import pytest
from textual.widgets import Label
from ui_helpers import RecordingFleet, make_app, settle, wait_for

from tui.cli_args import plain_text
from tui.ui.quit_screen import QuitScreen


@pytest.mark.parametrize(
    ("actions", "says", "never"),
    [
        (
            RecordingFleet(stops_pipeline_with_fleet=True),
            "stops 7 servers and the pipeline first",
            "waits",
        ),
        (RecordingFleet(), "the pipeline then waits for them", "pipeline first"),
    ],
)
async def test_the_quit_dialog_says_what_stop_fleet_does_to_the_pipeline(
    actions: RecordingFleet, says: str, never: str
) -> None:
    app = make_app(actions=actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit dialog")
        text = " ".join(str(label.render()) for label in app.screen.query(Label))
        assert says in text and never not in text


@pytest.mark.parametrize(
    "module",
    [
        "tui.ops.cli.journal",
        "tui.ops.cli.status",
        "tui.ops.cli.apply",
        "tui.ops.cli.canary",
        "tui.retune.plan_cli",
    ],
)
def test_help_has_no_rst_markup(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    with pytest.raises(SystemExit) as exited:
        importlib.import_module(module).main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "``" not in out and ":class:`" not in out


def test_plain_text_keeps_the_words() -> None:
    assert plain_text("run ``gpufleet status`` (:class:`~tui.fleet.X`)") == (
        "run gpufleet status (tui.fleet.X)"
    )
    assert plain_text(None) is None
