"""The autotune screen: follows the detached search through its status document.

The search runs in its own process (``gpufleet autotune start --detach``), so closing this
screen or quitting the console leaves it running and reopening the screen re-attaches: the
screen reads the search's status through the console's port (every second,
``FleetReads.autotune_status``) and sends the operator's requests to it as commands
(``StartAutotune``, ``SteerAutotune``), which the port runs where it can (a local port: the
detached process and its control file, ``tui.console_wiring.DetachedAutotune``) and refuses,
saying why, where it cannot (read-only; many nodes: a search tunes one node's GPUs). Keys: ``s``
opens the form of the knobs, ranges and budget (``tui.ui.autotune.form_screen``) and starts the
search it confirms (as ``gpufleet autotune start`` with the same options, detached), ``p`` /
``u`` pause and resume it (between steps), ``x`` stops it (a running canary is cancelled and its
GPU put back on the incumbent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from tui.autotune_view import (
    FINAL_PHASES,
    RangePreview,
    SearchRequest,
    SearchSpace,
    candidate_line,
    request_argv,
)
from tui.ops.commands import Kind, StartAutotune, SteerAutotune
from tui.ops.port import Fleet
from tui.ops.types import StateFileError
from tui.ui.autotune.candidate_chart import CandidateChart, points_of
from tui.ui.autotune.form_screen import AutotuneFormScreen, Predictor
from tui.ui.footer import FleetFooter
from tui.ui.gate import ReadOnlyGate
from tui.ui.messages import OperationRequested
from tui.words import counted

STEP_WORDS = {
    "adopting": "Adopting #{index} {key}: rolling it out to every GPU, one at a time",
    "rolling back": "Rolling back after #{index} {key}: the incumbent relaunched",
}
"""What the search does in the phases that follow a canary (``current`` is still its
candidate then)."""

CONTROLS = ("start", "pause", "resume", "stop")
"""The screen's actions that send the search a command (``Kind.AUTOTUNE``)."""


def describe(doc: dict[str, Any] | None, alive: bool, start_off: str = "") -> str:
    """The summary lines: phase, incumbent, current candidate and its look, budget spent.

    Args:
        doc: The status document (None: no search has run here).
        alive: Whether its process runs.
        start_off: Why this console cannot start a search ('' : s starts one).
    """
    if doc is None:
        start = f"Starting one is off here: {start_off}." if start_off else "s starts one."
        return f"No autotune search has run on this fleet. {start}"
    phase = str(doc.get("phase"))
    if phase not in FINAL_PHASES and not alive:
        phase += " (STALE: the search process died; the fleet state says what runs)"
    inc = doc.get("incumbent") or {}
    spent, budget = doc.get("spent") or {}, doc.get("budget") or {}
    waiting = alive and doc.get("waiting_for") and str(doc.get("phase")) not in FINAL_PHASES
    lines = [
        f"Search: {phase}" + (f": {doc['reason']}" if doc.get("reason") else ""),
        f"Incumbent: {inc.get('profile')}  {_knobs(inc.get('knobs') or {})}",
        *([f"Waiting for {doc['waiting_for']} (the fleet's lock)"] if waiting else []),
        f"Spent: {float(spent.get('wall_s', 0)):.0f} / {float(budget.get('wall_s', 0)):.0f} s, "
        f"{float(spent.get('explore_gpu_s', 0)):.1f} / {float(budget.get('explore_gpu_s', 0)):.0f}"
        f" GPU-s exploring, {counted(spent.get('canaries', 0), 'canary')}",
    ]
    current = doc.get("current")
    step = STEP_WORDS.get(str(doc.get("phase")))
    if isinstance(current, dict) and step is not None:
        # Not 'Canary on GPU 0 ... (starting)': the canary is over, the fleet is moving.
        lines.append(step.format(index=current.get("index"), key=current.get("key")))
    elif isinstance(current, dict):
        look = doc.get("look") or {}
        state = "measuring" if doc.get("canary_up") else "starting"
        seen = (
            f", {look.get('intervals')} intervals: {look.get('verdict')}"
            if look.get("intervals")
            else ""
        )
        lines.append(f"Canary on GPU {doc.get('gpu')}: {current.get('key')} ({state}{seen})")
    return "\n".join(lines)


def _knobs(knobs: dict[str, Any]) -> str:
    return " ".join(f"{k}={'auto' if v is None else v}" for k, v in knobs.items())


def candidates_text(doc: dict[str, Any] | None, last: int = 12) -> str:
    """The last candidates (decision, measured effect, why), then the one being measured."""
    rows = [c for c in (doc or {}).get("candidates", []) if isinstance(c, dict)]
    current = (doc or {}).get("current")
    measuring = isinstance(current, dict) and str((doc or {}).get("phase")) not in STEP_WORDS
    lines = [candidate_line(c) for c in rows[-max(1, last - measuring) :]]
    if measuring and isinstance(current, dict):
        look = (doc or {}).get("look") or {}
        seen = (
            f", {look.get('intervals')} intervals: {look.get('verdict')} so far"
            if look.get("intervals")
            else ""
        )
        state = "measuring" if (doc or {}).get("canary_up") else "starting"
        lines.append(
            f"#{current.get('index')} {current.get('key')}: {state} on GPU "
            f"{(doc or {}).get('gpu')}{seen}"
        )
    return "\n".join(lines) or "No candidate yet."


class AutotuneScreen(ReadOnlyGate[None]):
    """Follow, start, pause, resume and stop the autotune search, through the console's port.

    Args:
        port: The console's port: the search's status is read through it, its capabilities say
            whether this console starts and steers a search (``Kind.AUTOTUNE``), and the
            commands go to it (posted to the app as ``OperationRequested``).
        start_argv: ``start`` options added to the form's (e.g. the canary's timings).
        interval_s: How often the status document is read.
        predictor: The preflight's verdict of a space for the form (default: against the
            running fleet, ``tui.autotune.preview``).
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="autotune.close"),
        Binding("s", "start", "Start search", id="autotune.start"),
        Binding("p", "pause", "Pause search", id="autotune.pause"),
        Binding("u", "resume", "Resume search", id="autotune.resume"),
        Binding("x", "stop", "Stop search", id="autotune.stop"),
    ]

    def __init__(
        self,
        port: Fleet,
        start_argv: Sequence[str] = (),
        interval_s: float = 1.0,
        predictor: Predictor | None = None,
        gpus: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.predictor = predictor or _preview()
        self.gpus = tuple(gpus) if gpus is not None else None
        """The fleet's GPUs (the form's canary GPU is one of them; None: not checked here)."""
        self.port = port
        self.start_argv = tuple(start_argv)
        self.interval_s = interval_s
        self.doc: dict[str, Any] | None = None
        """The last status document read (None: no search ever ran)."""
        self.alive = False
        """Whether the process the status names runs."""

    DEFAULT_CSS = """
    AutotuneScreen #autotune-summary { height: auto; }
    AutotuneScreen #autotune-plot { margin: 1 0 0 0; }
    AutotuneScreen #autotune-candidates { height: auto; margin: 1 0 0 0; }
    """
    """The chart takes the room the summary and the candidates leave (6 to 16 rows)."""

    def compose(self) -> ComposeResult:
        """Summary, chart, candidates, keys."""
        yield Static(id="autotune-summary")
        yield CandidateChart(id="autotune-plot")
        yield Static(id="autotune-candidates")
        yield FleetFooter()

    async def on_mount(self) -> None:
        """Read the status now and every ``interval_s``."""
        await self.reload()
        self.set_interval(self.interval_s, self.reload)

    async def reload(self) -> None:
        """Read the search's status through the port (in a thread) and redraw."""
        capabilities = self.port.capabilities()
        if capabilities.follows_autotune:
            try:
                read = await asyncio.to_thread(self.port.reads.autotune_status)
            except StateFileError as exc:
                self.query_one("#autotune-summary", Static).update(f"Status unreadable: {exc}")
                return
        else:
            read = None
        self.doc, self.alive = (read.doc, read.alive) if read is not None else (None, False)
        if read is None:  # a many-node console: the search, if any, runs on one node
            why = capabilities.reason(Kind.AUTOTUNE)
            summary = f"This console follows no autotune search: {why}."
        else:
            summary = describe(self.doc, self.alive, capabilities.reason(Kind.AUTOTUNE))
        # The candidates get what the summary, the chart's least rows and the keys leave.
        room = (self.size.height or 24) - summary.count("\n") - 1 - 1 - 7 - 1 - 1
        self.query_one("#autotune-summary", Static).update(summary)
        self.query_one(CandidateChart).points = tuple(points_of(self.doc))
        self.query_one("#autotune-candidates", Static).update(
            candidates_text(self.doc, last=max(3, min(12, room)))
        )
        self.refresh_bindings()

    @property
    def running(self) -> bool:
        """Whether a search is running now."""
        return self.alive and self.doc is not None and self.doc.get("phase") not in FINAL_PHASES

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Off where the port cannot run autotune's commands; else start without a running
        search; pause, resume, stop only with one."""
        if action in CONTROLS and Kind.AUTOTUNE not in self.port.capabilities():
            return None
        paused = self.doc is not None and self.doc.get("phase") == "paused"
        allowed = {
            "start": not self.running,
            "pause": self.running and not paused,
            "resume": self.running and paused,
            "stop": self.running,
        }.get(action, True)
        return True if allowed else None

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why start, pause, resume or stop is off now: the port's reason first."""
        off = self.port.capabilities().reason(Kind.AUTOTUNE)
        if action in CONTROLS and off:
            return off
        paused = self.doc is not None and self.doc.get("phase") == "paused"
        return {
            "start": "a search is running (x stops it)",
            "pause": "the search is paused (u resumes it)" if paused else "no search is running",
            "resume": "the search is not paused" if self.running else "no search is running",
            "stop": "no search is running (s starts one)",
        }.get(action, "")

    def action_close(self) -> None:
        """Back to the grid; the search keeps running."""
        self.app.pop_screen()

    def action_start(self) -> None:
        """Open the form; start the search it confirms (detached)."""
        self.app.push_screen(AutotuneFormScreen(self.predictor, gpus=self.gpus), self._started)

    def _started(self, chosen: SearchRequest | None) -> None:
        """Send the confirmed search to the port (the app toasts what it did); the next
        reading of the status shows it."""
        if chosen is not None:
            argv = (*request_argv(chosen), *self.start_argv)
            self.app.post_message(OperationRequested(StartAutotune(argv)))

    def _ask(self, what: str) -> None:
        self.app.post_message(OperationRequested(SteerAutotune(what)))

    def action_pause(self) -> None:
        """Pause after the current step."""
        self._ask("pause")

    def action_resume(self) -> None:
        """Resume a paused search."""
        self._ask("resume")

    def action_stop(self) -> None:
        """Stop: a running canary is cancelled and its GPU goes back to the incumbent."""
        self._ask("stop")


def _preview() -> Predictor:
    """The form's default predictor: the running fleet's preflight (the fleet read once per
    screen, the servers' logs followed)."""
    preview = RangePreview()

    def predict(space: SearchSpace) -> str:
        return preview.verdict(space).describe()

    return predict
