"""Text that does not fit: confirm dialogs wrap (at every size), numbers are never cut."""

from __future__ import annotations

import pytest
from textual.content import Content
from textual.widgets import Label
from ui_helpers import make_app, press_until, settle, wait_for

from tui.ui.confirm import ConfirmScreen
from tui.ui.format import fit
from tui.ui.retune.profile_picker import ProfilePickerScreen


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (30, "ready  :30000 pid 7437"),
        (22, "ready  :30000 pid 7437"),
        (21, "ready  :30000 pid …"),
        (17, "ready  :30000 …"),  # never "ready  :30000 pid" nor "pid 743"
        (14, "ready …"),
        (3, "re…"),
    ],
)
def test_a_line_too_long_loses_whole_words_never_part_of_a_number(
    width: int, expected: str
) -> None:
    line = Content.assemble(("ready", "$success"), "  :30000 pid 7437")
    shown = fit(line, width)
    assert shown.plain == expected and len(shown.plain) <= width
    assert shown.spans[0].style == "$success"  # the styles stay on their words


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (120, 40)])
async def test_the_canary_confirm_wraps_and_names_the_right_profile_whole(
    size: tuple[int, int],
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("3", "c"), ProfilePickerScreen)
        await pilot.press("enter")  # sim-aggressive: the other profile, preselected
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        await pilot.pause()
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        dialog = confirm.query_one("VerticalScroll").content_region
        for label_id, text in (
            ("#confirm-title", confirm.title_text),
            ("#confirm-affected", confirm.affected),
        ):
            label = confirm.query_one(label_id, Label)
            assert label.region.width <= dialog.width
            lines = sum(-(-len(line) // label.content_region.width) for line in text.splitlines())
            assert label.content_region.height >= lines >= 2  # wrapped, nothing cut
        assert "sim-aggressive on GPU 3" in confirm.title_text
