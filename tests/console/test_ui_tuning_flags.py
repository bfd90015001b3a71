"""The tuning form refuses, as typed, the extra flags SGLang 0.5.23 would refuse (Pilot).

Each refusal shows its one line under the extra-flags input; Apply (key and button) and Save do
nothing but say why; fixing the line clears it and the preflight runs again.
"""

from __future__ import annotations

from operator import is_

import pytest
from textual.widgets import Button, Label, TextArea
from ui_helpers import RecordingFleet, make_app, press_until, settle, wait_for

from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.preflight_panel import PreflightPanel

V = "SGLang 0.5.23"

CASES = {
    "--cuda-graph-max-bs 256": (
        "server.extra_flags.cuda_graph_max_bs = 256: --cuda-graph-max-bs is ambiguous in "
        f"{V} (it exits 2): could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    ),
    "--speculative-algorithm MTP": (
        "server.extra_flags.speculative-algorithm = 'MTP': not allowed in extra_flags: set "
        "server.speculative_algorithm (it is first-class)"
    ),
    "--mamba-scheduler-strategy extra_buffer": (
        "server.extra_flags.mamba-scheduler-strategy = 'extra_buffer': not allowed in "
        "extra_flags: SGLang renamed it --mamba-radix-cache-strategy (an alias up to 0.5.19, "
        "refused from 0.5.20); set server.mamba_radix_cache_strategy"
    ),
    "--max-running-request 64": (
        "server.extra_flags.max_running_request = 64: --max-running-request is an abbreviation "
        f"of --max-running-requests: {V} expands it, but a new flag can make it ambiguous (as "
        "--cuda-graph-max-bs became); did you mean --max-running-requests?"
    ),
    "--mamba-ssm-dtype fp8": (
        f"server.extra_flags.mamba_ssm_dtype = 'fp8': {V} refuses --mamba-ssm-dtype 'fp8' (it "
        "exits 2: invalid choice); allowed: one of float32, bfloat16, float16"
    ),
    "--chunked-prefill-size big": (
        f"server.extra_flags.chunked_prefill_size = 'big': {V} refuses --chunked-prefill-size "
        "'big' (it exits 2: invalid int value: 'big'); allowed: an integer"
    ),
}


def _error(form: TuningFormScreen) -> str:
    label = form.query_one("#error-extra_flags", Label)
    return str(label.render()).replace("\n", " ") if label.display else ""


@pytest.mark.parametrize("line", sorted(CASES))
async def test_form_shows_sglang_refusal_and_apply_is_refused(line: str) -> None:
    actions = RecordingFleet()
    app = make_app(actions=actions)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("T",), TuningFormScreen)
        form = app.screen
        assert isinstance(form, TuningFormScreen)
        area = form.query_one("#extra-flags", TextArea)
        area.focus()
        area.text = f"--enable-metrics\n{line}"
        await wait_for(pilot, lambda: _error(form) != "", "the refusal under the input")
        # The label wraps at its width: compare the words, not the line breaks.
        assert " ".join(_error(form).split()) == " ".join(CASES[line].split())
        assert area.has_class("-invalid") and form.candidate.profile is None
        assert "waiting for valid values" in str(form.query_one(PreflightPanel).render())
        await pilot.press("ctrl+t")
        await pilot.click("#tune-apply")
        await pilot.press("ctrl+s")
        await pilot.pause()
        # is_(a, b), not "a is b": mypy would narrow form to the declared type of the other side
        assert is_(app.screen, form)  # no confirmation: nothing would be restarted
        assert actions.commands == [] and actions.saved == []
        said = [str(n.message) for n in app._notifications]
        assert any(m.startswith("Nothing done. server.extra_flags.") for m in said), said
        area.text = "--enable-metrics\n--cuda-graph-max-bs-decode 256"
        await wait_for(pilot, lambda: form.candidate.profile is not None, "the fixed flags")
        assert _error(form) == ""
        assert form.query_one("#tune-apply", Button).display
