"""The autotune screen's chart of each candidate's throughput beside its control's, with axes
(pure lines, no app): the value ticks, each group's number and verdict, the newest kept when
they do not all fit, and a size that reads at 80x24, 200x50 and in a browser (two colours,
bars well below the top: one candidate drew a 6-column white square, 46x57 px)."""

from __future__ import annotations

from tui.ui.autotune.candidate_chart import (
    CANARY_STYLE,
    CONTROL_STYLE,
    EMPTY,
    ChartPoint,
    chart_lines,
    points_of,
)


def plain(width: int, height: int, points: list[ChartPoint]) -> list[str]:
    return [line.plain for line in chart_lines(points, width, height)]


ONE = [ChartPoint(16, 26_200.0, 13_100.0, "+")]


def test_one_candidate_is_two_bars_on_a_round_scale_with_its_number_and_verdict() -> None:
    lines = plain(76, 10, ONE)
    assert len(lines) == 10 and all(len(line) <= 76 for line in lines)
    assert lines[0].startswith("█ canary  █ control (incumbent), tok/s per GPU")
    plot, axis, numbers, marks = lines[1:7], lines[7], lines[8], lines[9]
    # a round top above the data (30k), ticks on the left, 0 on the axis line
    assert plot[0].lstrip().startswith("30k") and axis.lstrip().startswith("0 ")
    # two bars, the canary's higher than the control's, under a round top: not a white square
    assert "█" not in plot[0] and plot[-1].count("█") == 8
    assert plot[1].count("█") == 4  # only the canary's reaches there
    assert "#16" in numbers and marks.strip() == "+"
    assert "┬" in axis


def test_the_two_bars_have_their_own_colours() -> None:
    (row,) = [line for line in chart_lines(ONE, 76, 10)[1:7] if "█" in line.plain][-1:]
    styles = {str(span.style) for span in row.spans}
    assert CANARY_STYLE in styles and CONTROL_STYLE in styles


def test_many_candidates_keep_the_newest_that_fit() -> None:
    points = [ChartPoint(i, 1000.0 + i, 1000.0, "=") for i in range(1, 41)]
    lines = plain(60, 8, points)
    assert "#40" in lines[-2] and "#1 " not in lines[-2]
    wide = plain(200, 12, points)
    assert wide[-2].count("#") > plain(60, 8, points)[-2].count("#")


def test_nothing_measured_yet_says_so_and_the_live_look_is_drawn() -> None:
    assert plain(80, 10, []) == [EMPTY]
    assert plain(80, 10, [ChartPoint(3, None, None, "?")]) == [EMPTY]
    doc = {
        "history": [
            {
                "index": 1,
                "canary_tokens_per_s": 2.0,
                "control_tokens_per_s": 1.0,
                "verdict": "better",
            },
            {"index": 2, "canary_tokens_per_s": None, "verdict": "not measured"},
        ],
        "current": {"index": 3},
        "look": {"canary_tokens_per_s": 3.0, "control_tokens_per_s": 2.0},
    }
    assert points_of(doc) == [
        ChartPoint(1, 2.0, 1.0, "+"),
        ChartPoint(2, None, None, "?"),
        ChartPoint(3, 3.0, 2.0, "…"),
    ]
