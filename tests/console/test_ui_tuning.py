"""The tuning form through Pilot: pre-fill, validation as typed, preflight, save, apply, scope."""

from __future__ import annotations

from dataclasses import replace

from repo_paths import FIXTURES
from textual.pilot import Pilot
from textual.widgets import Input, Label, TextArea
from tuning_helpers import tuning_form, type_into, type_into_field
from ui_helpers import RecordingFleet, press_until, shipped_profiles, wait_for

from tui.logs.events import MAMBA_CACHE
from tui.logs.parser import parse_line
from tui.profiles import GpuOverride, diff, profile_to_dict
from tui.state.fleet_state import GpuState
from tui.ui.confirm import ConfirmScreen
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.tuning.candidate import FormValues, build_candidate, parse_extra_flags
from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.preflight_panel import PreflightPanel
from tui.ui.tuning.scope import ScopeScreen

ALL = (0, 1, 2, 3, 4, 5, 6)


def error_text(form: TuningFormScreen, key: str) -> str:
    label = form.query_one(f"#error-{key}", Label)
    return str(label.render()) if label.display else ""


async def preflight_text(pilot: Pilot[None], form: TuningFormScreen) -> str:
    await wait_for(pilot, lambda: form.preflight is not None, "the preflight")
    return str(form.query_one(PreflightPanel).render())


async def test_t_opens_the_form_on_the_selected_gpu_prefilled_from_the_running_profile() -> None:
    async with tuning_form(RecordingFleet(), "3", "t") as (app, pilot, form):
        assert form.gpu == 3 and form.running.name == "sim-baseline"
        values = {k: v for k, v in form.values().knobs}
        assert values == {
            "mem_fraction_static": "0.88",
            "max_mamba_cache_size": "80",
            "mamba_full_memory_ratio": "0.4",
            "max_running_requests": "",
        }
        assert form.query_one("#profile-name", Input).value == "sim-baseline-gpu3"
        await pilot.press("escape")
        assert not isinstance(app.screen, TuningFormScreen)


async def test_invalid_values_are_named_as_typed_and_nothing_is_applied() -> None:
    actions = RecordingFleet()
    async with tuning_form(actions, "T") as (app, pilot, form):
        await type_into(pilot, form, "mem_fraction_static", "1.5")
        assert "server.mem_fraction_static = 1.5: must be in (0, 1)" in error_text(
            form, "mem_fraction_static"
        )
        await type_into(pilot, form, "max_running_requests", "6x")
        assert "max_running_requests = '6x': must be an integer" in error_text(
            form, "max_running_requests"
        )
        area = form.query_one("#extra-flags", TextArea)
        area.focus()
        area.text = ""
        await pilot.press(*"--tokenizer-path $(rm")
        await pilot.pause()
        assert "shell metacharacters" in error_text(form, "extra_flags")
        assert "tokenizer-path" in error_text(form, "extra_flags")
        assert form.query_one("#knob-mem_fraction_static", Input).has_class("-invalid")
        assert "waiting for valid values" in str(form.query_one(PreflightPanel).render())
        await pilot.press("ctrl+t")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, TuningFormScreen)  # no confirm: nothing to confirm
        assert actions.commands == [] and actions.saved == []
        assert any("Nothing done" in str(n.message) for n in app._notifications)
        await type_into(pilot, form, "mem_fraction_static", "0.9")
        assert error_text(form, "mem_fraction_static") == ""


async def test_preflight_shows_each_gpu_and_says_plainly_when_it_does_not_fit() -> None:
    async with tuning_form(RecordingFleet(), "T") as (_app, pilot, form):
        text = await preflight_text(pilot, form)
        assert "KV tokens" in text and "Mamba slots" in text
        assert all(f"\n{gpu} " in text for gpu in ALL), text
        assert "auto -> 16 (capped)" in text  # the seed: 80 slots // 5 per request
        await type_into(pilot, form, "max_mamba_cache_size", "200")
        await type_into(pilot, form, "max_running_requests", "64")
        text = await preflight_text(pilot, form)
        assert "64 -> 40 (capped)" in text
        assert form.preflight is not None and all(p.fits for p in form.preflight)
        await type_into(pilot, form, "max_mamba_cache_size", "5000")
        text = await preflight_text(pilot, form)
        assert "GPUs 0-6 do not fit:" in text  # one line for the seven, its verb agreeing
        assert form.query_one(PreflightPanel).has_class("-unfit")


async def test_apply_to_all_sends_the_candidate_itself_and_restarts_every_gpu() -> None:
    """The port gets the profile the form shows, not a name to read back from a file the form
    wrote first (issue 37): nothing is saved unless the operator saves."""
    actions = RecordingFleet()
    async with tuning_form(actions, "T") as (app, pilot, form):
        await type_into(pilot, form, "max_mamba_cache_size", "200")
        await type_into(pilot, form, "max_running_requests", "64")
        await preflight_text(pilot, form)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == (
            "Restart GPUs 0-6 (7 servers) with profile sim-baseline-tuned?"
        )
        assert "server.max_mamba_cache_size: 80 -> 200" in confirm.affected
        assert actions.commands == []  # nothing before the answer
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply screen")
        assert actions.applied()[0] == ("sim-baseline-tuned", ALL)
        assert actions.saved == [] and "sim-baseline-tuned" not in actions.profiles
        saved = actions.applied_profiles()[0]
        assert saved.name == "sim-baseline-tuned"
        assert saved.server.max_mamba_cache_size == 200
        assert saved.server.max_running_requests == 64
        changes = {c.field for c in diff(actions.profiles["sim-baseline"], saved)}
        assert changes == {"server.max_mamba_cache_size", "server.max_running_requests"}


async def test_opened_on_one_gpu_the_change_is_an_override_applied_to_that_gpu_only() -> None:
    actions = RecordingFleet()
    async with tuning_form(actions, "5", "t") as (app, pilot, form):
        await type_into(pilot, form, "mem_fraction_static", "0.95")
        await pilot.press("ctrl+t")
        # Whom the change is for is asked, not assumed (issue 30): GPU 5 only.
        await wait_for(pilot, lambda: isinstance(app.screen, ScopeScreen), "the scope question")
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text.startswith("Restart GPU 5 (1 server) with profile")
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(actions.applied()), "the apply")
        assert actions.applied() == [("sim-baseline-gpu5", (5,))]
        assert actions.saved == []
        saved = actions.applied_profiles()[0]
        assert saved.overrides == (GpuOverride(5, (("mem_fraction_static", 0.95),)),)
        assert saved.server == actions.profiles["sim-baseline"].server


async def test_the_toggle_switches_between_one_gpu_and_all() -> None:
    async with tuning_form(RecordingFleet(), "2", "t") as (_app, pilot, form):
        assert form.target_gpus == (2,) and form.scope is None  # shown for GPU 2, not chosen
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert form.gpu is None and form.target_gpus == ALL and form.scope == "all"
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert form.target_gpus == (2,) and form.scope == "one"


async def test_save_as_new_profile_and_an_existing_name_needs_confirmation() -> None:
    actions = RecordingFleet()
    async with tuning_form(actions, "T") as (app, pilot, form):
        await type_into(pilot, form, "max_mamba_cache_size", "120")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(actions.saved), "the save")
        assert actions.saved[0].name == "sim-baseline-tuned"
        assert actions.saved[0].server.max_mamba_cache_size == 120
        await type_into_field(pilot, form, "#profile-name", "sim-aggressive")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the overwrite ask")
        await pilot.press("escape")
        await pilot.pause()
        assert len(actions.saved) == 1  # refused
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the overwrite ask")
        await pilot.press("y")
        await wait_for(pilot, lambda: len(actions.saved) == 2, "the overwrite")
        assert actions.saved[1].name == "sim-aggressive"
        assert actions.applied() == []  # saving restarts nothing


def test_extra_flag_lines_accept_three_spellings_and_name_a_bad_line() -> None:
    flags, problems = parse_extra_flags(
        "--enable-metrics\n--chunked-prefill-size 8192\nfoo=bar\n?!"
    )
    assert flags == [("enable-metrics", True), ("chunked-prefill-size", 8192), ("foo", "bar")]
    assert problems == [
        "extra_flags line 4 = '?!': expected '--flag value', '--flag' or 'key=value'"
    ]


def test_a_reserved_flag_in_extra_flags_is_refused_naming_it() -> None:
    actions = RecordingFleet()
    running = actions.profiles["sim-baseline"]
    knobs = tuple(
        (k, "")
        for k in (
            "mem_fraction_static",
            "max_mamba_cache_size",
            "mamba_full_memory_ratio",
            "max_running_requests",
        )
    )
    candidate = build_candidate(running, FormValues(knobs, "--port 31000", "x", None))
    assert candidate.profile is None
    assert "server.extra_flags.port" in candidate.problems["extra_flags"][0]


async def test_t_on_a_gpu_running_another_profile_starts_from_that_gpus_profile() -> None:
    # A canary left GPU 0 on sim-aggressive while the fleet runs sim-baseline: the form named
    # and filled in sim-baseline, so its diff compared against what GPU 0 did not run.
    aggressive = {"name": "sim-aggressive"}
    running = {0: GpuState(0, current=aggressive), 3: GpuState(3, current={"name": "sim-baseline"})}
    async with tuning_form(RecordingFleet(), "0", "t", running=running) as (app, pilot, form):
        assert form.gpu == 0 and form.running.name == "sim-aggressive"
        values = dict(form.values().knobs)
        assert values["mem_fraction_static"] == "0.93"
        assert values["max_mamba_cache_size"] == "200"
        assert "running profile: sim-aggressive" in str(form.query_one("#tune-title").render())
        assert form.query_one("#profile-name", Input).value == "sim-aggressive-gpu0"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, TuningFormScreen), "closed")
        await press_until(pilot, ("3", "t"), TuningFormScreen)
        other = app.screen
        assert isinstance(other, TuningFormScreen)
        await wait_for(pilot, lambda: other.setup is not None, "the second form's setup")
        assert other.gpu == 3 and other.running.name == "sim-baseline"


async def test_a_gpu_whose_profile_is_no_longer_saved_starts_from_its_recorded_document() -> None:
    doc = profile_to_dict(replace(shipped_profiles()["sim-aggressive"], name="gone-tuned"))
    running = {2: GpuState(2, current=doc)}
    async with tuning_form(RecordingFleet(), "2", "t", running=running) as (_, _, form):
        assert form.running.name == "gone-tuned"
        assert dict(form.values().knobs)["max_mamba_cache_size"] == "200"


SEED_LINES = FIXTURES / "logs" / "seed-lines.txt"


async def test_the_mamba_gb_column_is_the_pool_the_log_line_totals() -> None:
    """The seed's 200 slots on the seed's build: its log line says conv 0.55 + ssm 28.27 +
    intermediate ssm 23.06 + intermediate conv 0.45 GB; the column said 28.8 (conv and ssm
    alone), now their sum, 52.3."""
    events = (parse_line(line.rstrip("\n")) for line in SEED_LINES.read_text().splitlines())
    mamba = next(e for e in events if e is not None and e.kind == MAMBA_CACHE)
    names = ("conv_gb", "ssm_gb", "intermediate_ssm_gb", "intermediate_conv_gb")
    logged = sum(float(mamba.fields[name]) for name in names)
    async with tuning_form(RecordingFleet(), "T") as (_app, pilot, form):
        for knob, value in (
            ("mem_fraction_static", "0.93"),
            ("max_mamba_cache_size", "200"),
            ("mamba_full_memory_ratio", "0.6"),
            ("max_running_requests", "64"),
        ):
            await type_into(pilot, form, knob, value)
        area = form.query_one("#extra-flags", TextArea)
        area.text = area.text + "\n--sim-build seed"  # the build the seed's servers ran
        await wait_for(
            pilot,
            lambda: form.preflight is not None and form.preflight[0].plan.build == "seed",
            "the seed build's preflight",
        )
        text = str(form.query_one(PreflightPanel).render())
    assert f"{logged:.1f}" == "52.3"
    rows = [line.split() for line in text.splitlines() if line.split()[:1] in (["0"], ["6"])]
    assert [row[:4] for row in rows] == [["0", "yes", "200", "52.3"], ["6", "yes", "200", "52.3"]]
    assert "planned for the simulator's build seed (--sim-build)" in text
