"""The autotune form (Pilot, no servers): a bad range or budget is refused with the CLI's own
one-line error and nothing starts; a good form starts a search with exactly its knobs, ranges
and budget (read back through the CLI's parser, the door the started search goes through); and
the search shows in the grid's status strip from its status document."""

from __future__ import annotations

import time
from operator import is_

from textual.pilot import Pilot
from textual.widgets import Input, Label, Static, Switch
from ui_helpers import RecordingFleet, make_app, settle, wait_for

from tui.autotune import cli
from tui.autotune.budget import Budget
from tui.autotune.space import KNOBS, SearchSpace
from tui.autotune.status import read_status, write_status
from tui.ui.app import FleetApp
from tui.ui.autotune.autotune_screen import AutotuneScreen
from tui.ui.autotune.form_screen import AutotuneFormScreen
from tui.ui.confirm import ConfirmScreen
from tui.ui.operation_strip import OperationStrip

from .test_ui_autotune import started, status

VERDICT = "Preflight on GPU 0: 1 of 5 single-knob moves from p predicted not to fit"


async def open_form(
    pilot: Pilot[None], app: FleetApp, asked: list[SearchSpace]
) -> AutotuneFormScreen:
    def predictor(space: SearchSpace) -> str:
        asked.append(space)
        return VERDICT

    screen = AutotuneScreen(app.port, interval_s=3600, predictor=predictor, gpus=(0, 1, 2))
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.doc is None and screen.is_mounted, "the screen")
    await pilot.press("s")
    await wait_for(pilot, lambda: isinstance(app.screen, AutotuneFormScreen), "the form")
    form = app.screen
    assert isinstance(form, AutotuneFormScreen)
    return form


def field(form: AutotuneFormScreen, widget: str) -> Input:
    return form.query_one(f"#{widget}", Input)


def errors(form: AutotuneFormScreen) -> str:
    return str(form.query_one("#autotune-form-errors", Static).render())


async def test_a_bad_range_or_budget_is_refused_with_its_one_line_error_and_nothing_starts() -> (
    None
):
    port = RecordingFleet()
    app = make_app(actions=port)
    async with app.run_test(size=(120, 50)) as pilot:
        form = await open_form(pilot, app, [])
        field(form, "high-mem_fraction_static").value = "1.2"
        field(form, "budget-wall").value = "0"
        field(form, "canary-gpu").value = "5"  # not one of the fleet's GPUs
        await wait_for(pilot, lambda: "canary_gpu" in errors(form), "the error")
        shown = errors(form).splitlines()
        assert shown == [
            "mem_fraction_static.high 1.2: allowed range (0, 1)",
            "wall '0': allowed range (0, 10000000] seconds (or with s, m, h)",
            "canary_gpu '5': allowed blank (the lowest running GPU) or one of the fleet's"
            " GPUs 0, 1, 2",
        ]
        assert form.request is None
        await pilot.press("ctrl+s")
        await pilot.pause()
        # is_(a, b), not "a is b": mypy would narrow form to the declared type of the other side
        assert is_(app.screen, form)  # no confirmation: nothing can start
        # every knob off: refused too, naming what to do
        field(form, "high-mem_fraction_static").value = "0.93"
        field(form, "budget-wall").value = "4h"
        for name in KNOBS:
            form.query_one(f"#on-{name}", Switch).value = False
        await wait_for(pilot, lambda: "knobs: none turned on" in errors(form), "the error")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert is_(app.screen, form)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, AutotuneScreen), "closed")
    assert port.commands == []
    assert read_status() is None  # and no search ran


async def test_a_good_form_starts_a_search_with_exactly_its_knobs_ranges_and_budget() -> None:
    port = RecordingFleet()
    asked: list[SearchSpace] = []
    app = make_app(actions=port)
    async with app.run_test(size=(120, 50)) as pilot:
        form = await open_form(pilot, app, asked)
        for name in KNOBS:
            if name not in ("mem_fraction_static", "max_running_requests"):
                form.query_one(f"#on-{name}", Switch).value = False
        field(form, "low-mem_fraction_static").value = "0.85"
        field(form, "high-mem_fraction_static").value = "0.91"
        field(form, "step-mem_fraction_static").value = "0.03"
        field(form, "low-max_running_requests").value = "16"
        field(form, "high-max_running_requests").value = "40"
        field(form, "step-max_running_requests").value = "8"
        field(form, "budget-wall").value = "30m"
        field(form, "budget-explore").value = "300"
        field(form, "budget-regression").value = "10%"
        field(form, "canary-gpu").value = "2"
        expected = SearchSpace(
            (
                ("mem_fraction_static", (0.85, 0.88, 0.91)),
                ("max_running_requests", (16, 24, 32, 40)),
            )
        )
        # the preflight's verdict of the range, as typed (of the newest space)
        await wait_for(pilot, lambda: bool(asked) and asked[-1] == expected, "the preflight")
        panel = form.query_one("#autotune-form-preflight", Static)
        await wait_for(pilot, lambda: str(panel.render()) == VERDICT, "the verdict shown")
        assert errors(form) == ""
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        said = str(app.screen.query_one("#confirm-affected", Label).render())
        for words in (
            "runs on GPU 2 as a canary against the other GPUs",
            "rolled back",
            "rolled out",
            VERDICT,
        ):
            assert words in " ".join(said.split()), words
        await pilot.press("y")
        await wait_for(pilot, lambda: len(started(port)) == 1, "the start")
    args = cli.build_parser().parse_args(["start", *started(port)[0]])
    options, _ = cli.options_from(args)
    assert options.space == expected
    assert options.budget == Budget(1800.0, 300.0, 0.1)
    assert options.gpu == 2  # the canary GPU the form named


async def test_the_search_shows_in_the_grids_status_strip_from_its_status_document() -> None:
    doc = status("canary")
    doc["current"] = {"index": 4, "key": "max_mamba_cache_size=200"}
    doc["waiting_for"] = "apply sim-x to GPUs [1] (pid 7)"
    write_status(doc)  # as a search started by the CLI writes it: this console started nothing
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, app)
        strip = app.main_screen.query_one(OperationStrip)
        await strip.read_autotune()
        line = str(strip.content)
        assert strip.display
        assert line.startswith("autotune canary · waiting for apply sim-x to GPUs [1]")
        assert "#4 max_mamba_cache_size=200 on GPU 0 (measuring, 6 intervals: better)" in line
        assert "1m 00s of 1h 00m, 21.5/1800 GPU-s, 3 canaries · a: autotune" in line
        write_status(status("canary", alive=False))
        await strip.read_autotune()
        assert "STALE: the search process died" in str(strip.content)
        ended = status("finished")
        ended["reason"] = "no untried neighbour fits"
        write_status(ended)
        await strip.read_autotune()
        assert str(strip.content).startswith("autotune finished · no untried neighbour fits")
        # long after the end it leaves the strip
        from tui.ui.autotune.strip_line import ENDED_SHOWN_S, autotune_line

        assert autotune_line(read_status(), False, time.time() + ENDED_SHOWN_S + 5) is None


async def test_a_burst_of_keys_lands_each_in_the_field_focused_when_it_was_typed() -> None:
    """Typed at any speed (here: one burst, no waiting for the app between keys, as a terminal
    delivers a paste), the low, high and step of a knob each get their own text: the keys after
    a Tab reached the field it was leaving."""
    from .test_ui_tuning_typeahead import post_keys, typed

    app = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        form = await open_form(pilot, app, [])
        low = field(form, "low-mem_fraction_static")
        form.set_focus(low)
        await wait_for(pilot, lambda: form.focused is low, "the low field")
        post_keys(app, typed("^U0.85\t0.91\t0.03"))  # select-on-focus: typing replaces
        want = {"low": "0.85", "high": "0.91", "step": "0.03"}
        await wait_for(
            pilot,
            lambda: {k: field(form, f"{k}-mem_fraction_static").value for k in want} == want,
            "each key in its field",
        )
        await wait_for(
            pilot,
            lambda: (
                form.request is not None
                and dict(form.request.space.values)["mem_fraction_static"] == (0.85, 0.88, 0.91)
            ),
            "the form validated them",
        )
