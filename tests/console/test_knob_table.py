"""The knob table (``tui.sglang.knobs``): every reader of a knob's range is generated from its row.

The profile parser's problem, the tuning form's label and validation, autotune's space and the
simulator's usage error all say the row's range; a change to the row changes all of them.
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import replace
from typing import Any

import pytest

from tui.autotune.options import OptionsError, knob_range, knob_values
from tui.autotune.space import KNOBS as SEARCHED
from tui.profiles import KNOBS, Profile, ProfileError, profile_from_dict
from tui.sglang.flags import out_of_range
from tui.sglang.knobs import KNOB_TABLE, TUNED, Knob, Range
from tui.ui.tuning.candidate import FormValues, build_candidate
from tui.ui.tuning.form_layout import knob_label

DOC: dict[str, Any] = {
    "name": "t",
    "engine": {"kind": "sglang", "python": "python3"},
    "fleet": {"gpus": [0, 1], "base_port": 31000},
    "server": {"model_path": "Qwen/Qwen3.6-27B-FP8", "mem_fraction_static": 0.7},
}


def _parser_problems(name: str, value: float) -> list[str]:
    doc = copy.deepcopy(DOC)
    doc["server"][name] = value
    with pytest.raises(ProfileError) as err:
        profile_from_dict(doc, "t")
    return [str(p) for p in err.value.problems]


def _form_problems(name: str, value: float) -> tuple[str, ...]:
    running: Profile = profile_from_dict(DOC, "t")
    values = FormValues(((name, str(value)),), "", "t2", None)
    return build_candidate(running, values).problems.get(name, ())


def _below(allowed: Range) -> float:
    """A value just under the range's bottom."""
    assert allowed.low is not None
    if allowed.kind is int:
        return int(allowed.low) - 1
    return float(allowed.low) if allowed.low_open else float(allowed.low) - 0.5


def _readers_agree(knob: Knob, outside: float) -> None:
    """The parser, the form, autotune and the simulator all refuse ``outside`` in the row's
    words."""
    name = knob.name
    problem = f"server.{name} = {outside!r}: {knob.rule()}"
    assert _parser_problems(name, outside) == [problem]
    assert _form_problems(name, outside) == (problem,)
    assert knob.help() in knob_label(name)
    if name in SEARCHED:
        with pytest.raises(OptionsError, match=f"allowed range {_re(knob.searched().span())}$"):
            knob_values(name, [outside])
    reason = out_of_range(argparse.Namespace(**{name: outside}))
    assert (
        reason == f"argument {knob.flag}: {outside} is out of range {knob.simulated().interval()}"
    )


def _re(text: str) -> str:
    return "".join("\\" + c if c in "()[]." else c for c in text)


def test_the_tuned_knobs_are_the_profiles_and_every_coupling_names_a_row() -> None:
    assert KNOBS == TUNED and set(TUNED) <= set(KNOB_TABLE)
    assert set(SEARCHED) <= set(KNOB_TABLE)
    for knob in KNOB_TABLE.values():
        assert set(knob.couples) <= set(KNOB_TABLE) - {knob.name}, knob.name
        assert knob.releases() == (
            "0.5.17",
            "0.5.18",
            "0.5.19",
            "0.5.20",
            "0.5.21",
            "0.5.22",
            "0.5.23",
        ), knob.name  # every release gpufleet knows has them
    assert KNOB_TABLE["mamba_full_memory_ratio"].default("0.5.17") == 0.9  # SGLang's own
    assert KNOB_TABLE["mem_fraction_static"].default() is None  # SGLang sizes it


@pytest.mark.parametrize("name", TUNED)
def test_every_reader_says_the_rows_range(name: str) -> None:
    knob = KNOB_TABLE[name]
    _readers_agree(knob, _below(knob.range))


def test_the_words_tests_and_operators_know_are_the_rows() -> None:
    assert [KNOB_TABLE[n].rule() for n in TUNED] == [
        "must be in (0, 1)",
        "must be an integer >= 1",
        "must be in (0, 10]",
        "must be an integer >= 1",
    ]
    assert knob_label("mem_fraction_static").endswith(
        "(0, 1): share of free memory for the pools[/]"
    )
    assert [SEARCHED[n].allowed() for n in TUNED] == ["(0, 1)", "1..100000", "(0, 10]", "1..4096"]


def test_a_change_to_a_row_changes_every_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    fraction = KNOB_TABLE["mem_fraction_static"]
    narrower = replace(fraction, range=Range(float, 0.5, 0.8))
    monkeypatch.setitem(KNOB_TABLE, "mem_fraction_static", narrower)
    _readers_agree(narrower, 0.9)  # 0.9 was inside the old row
    assert "[0.5, 0.8]: share of free memory" in knob_label("mem_fraction_static")
    assert knob_range("mem_fraction_static", 0.5, 0.8, 0.3) == (0.5, 0.8)  # 0.5 was not inside

    running = KNOB_TABLE["max_running_requests"]
    capped = replace(running, range=Range(int, 1, 64))
    monkeypatch.setitem(KNOB_TABLE, "max_running_requests", capped)
    assert capped.rule() == "must be an integer in 1..64"
    _readers_agree(capped, 65)
    assert SEARCHED["max_running_requests"].allowed() == "1..64"  # below the search's own top
