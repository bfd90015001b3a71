"""One decision of "capped" (``tui.sglang.caps.running_capped``): the planner's preflight, the
verify report and the console's server snapshot all ask it, with SGLang's cause when it said one."""

from __future__ import annotations

import pytest
from repo_paths import FIXTURES

from tui.logs.parser import parse_line
from tui.logs.state import LogState
from tui.retune.events import EffectiveValues, RequestedValues, VerifyReport
from tui.sglang.caps import BELOW_ASKED, KV_CACHE, MAMBA, WARNED, cap_cause, running_capped

CAP_LINE = (
    "[2026-05-09 22:18:27] max_running_requests is capped to 40 by the mamba state cache "
    "(max_mamba_cache_size=200, 5 state slots per request). To raise it: increase "
    "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
    "--mamba-ssm-dtype bfloat16."
)
FIXTURE = FIXTURES / "retune" / "aggressive_gpu0.log"


@pytest.mark.parametrize(
    ("asked", "effective", "cause", "expected"),
    [
        (64, 40, None, BELOW_ASKED),  # the numbers alone say it
        (64, 64, None, None),
        (None, 40, None, None),  # an automatic value SGLang sized: nothing was asked
        (None, 40, MAMBA, MAMBA),  # ... unless SGLang warned it capped its own
        (64, None, None, None),  # not known yet
        (64, 40, KV_CACHE, KV_CACHE),  # SGLang's cause wins over the numbers
    ],
)
def test_capped_is_said_or_below_the_asked(
    asked: int | None, effective: int | None, cause: str | None, expected: str | None
) -> None:
    capped = running_capped(asked, effective, cause)
    assert capped.cause == expected and bool(capped) is (expected is not None)


def test_the_plan_warns_of_the_mamba_cap_before_the_kv() -> None:
    assert cap_cause(True, True) == MAMBA and cap_cause(False, True) == KV_CACHE
    assert cap_cause(False, False) is None


def test_the_log_keeps_sglangs_cause_and_the_report_follows_the_same_decision() -> None:
    state = LogState()
    assert FIXTURE.read_text().count("capped to 40 by the mamba state cache") == 1
    for number, text in enumerate(FIXTURE.read_text().splitlines(), start=1):
        if (event := parse_line(text, number)) is not None:
            state.apply(event)
    view = state.view()
    assert view.cap_cause == MAMBA and view.capped and view.max_running_effective == 40

    asked = RequestedValues(max_running_requests=64)
    numbers = VerifyReport(0, True, "p", asked, EffectiveValues(max_running_requests=40))
    said = VerifyReport(0, True, "p", RequestedValues(), EffectiveValues(cap_line=CAP_LINE))
    fine = VerifyReport(0, True, "p", asked, EffectiveValues(max_running_requests=64))
    assert numbers.capped and said.capped and not fine.capped
    assert running_capped(None, None, WARNED)  # the report's cap line, its cause not kept
