"""The grid's operation keys: what each key that changes the fleet asks before its command goes up.

``k``/``K`` stop, ``r``/``R`` relaunch, ``t``/``T`` tune, ``b`` rolls back, ``c`` tries a canary,
``o`` rolls out, ``A`` adopts, ``p`` starts or stops the job, and on a console over many nodes'
agents ``N`` relaunches and ``X`` stops the selected panel's whole node. Each refuses at once
while an operation runs in the background (one at a time, never queued), asks the operator (a
confirmation, the stop dialog, a profile's choice, the tuning form), and only on a yes posts
``OperationRequested(command)`` to the app, which runs it through the port. What the keys act on
(the marks, the selection, the node) is the habits' (``tui.ui.grid.habits``); whether a key
applies now is ``tui.ui.grid.key_states``; the command line (``tui.ui.command_mode``) asks
through the same flows.

A mixin of ``MainScreen`` (Textual looks its actions up on the screen), kept apart from the
screen's composition, selection and views because these flows are the one place where a key
becomes a change of the fleet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.binding import Binding
from textual.message import Message

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.commands import (
    Adopt,
    Apply,
    Canary,
    Kill,
    Kind,
    Relaunch,
    Rollback,
    Rollout,
    StartPipeline,
    StopPipeline,
)
from tui.ops.port import Fleet
from tui.pipeline.status import PipelineStatus
from tui.ui.adopt_screen import open_adoption
from tui.ui.confirm import ConfirmScreen
from tui.ui.describe import (
    describe_fresh_job,
    describe_pipeline_stop,
    describe_servers,
    unknown_servers,
)
from tui.ui.grid.scope import scope_words
from tui.ui.messages import OperationRequested
from tui.ui.retune.flows import choose_relaunch, confirm_rollback
from tui.ui.rollout.describe import compact_range
from tui.ui.rollout.flows import choose_canary, choose_rollout
from tui.ui.stop_screen import StopChoice, StopScreen
from tui.ui.tuning.form_screen import open_tuning

if TYPE_CHECKING:
    from tui.ui.operation_host import OperationHost

NODE_BINDINGS = [
    Binding("N", "relaunch_node", "Relaunch node", id="nodes.relaunch"),
    Binding("X", "stop_node", "Stop node", id="nodes.stop"),
]
"""The node keys (``MainScreen.check_operation`` hides them on one node, where the fleet keys
are the node keys)."""


class OperationKeys:
    """The operation keys' flows (mixed into ``MainScreen``, which provides the fleet, the
    selection, the port and the app)."""

    port: Fleet
    fleet: FleetSnapshot
    selected: int
    profile: str | None
    pipeline_status: PipelineStatus | None

    if TYPE_CHECKING:  # provided by the screen and its other mixins
        app: OperationHost

        @property
        def _indices(self) -> list[int]: ...

        def targets(self) -> tuple[int, ...]: ...

        def scope(self) -> tuple[int, ...] | None: ...

        def _node_gpus(self) -> tuple[str, tuple[int, ...]]: ...

        def post_message(self, message: Message) -> bool: ...

    # --- asking -----------------------------------------------------------------------------

    def _busy(self) -> bool:
        """True (after a notification naming it) while an operation runs in the background:
        one at a time, refused before anything is asked, never queued."""
        return self.app.refuse_if_busy()

    def _confirm_then_post(
        self, title: str, affected: str, message: Message, *, confirm: str = "Yes"
    ) -> None:
        """Ask, and post ``message`` (up to the app, which performs it) only on yes; a canary
        is the harmless kind of question (Enter starts it), the rest keep Cancel focused."""

        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.post_message(message)

        harmless = isinstance(message, OperationRequested) and isinstance(message.command, Canary)
        self.app.push_screen(
            ConfirmScreen(title, affected, confirm, destructive=not harmless), done
        )

    def _ask_how_to_stop(self, title: str, gpus: tuple[int, ...]) -> None:
        """Ask how (drain, terminate, kill), and post the stop only when one was chosen."""

        shown = self.fleet  # what the confirmation names is what may be signalled

        def done(choice: StopChoice | None) -> None:
            if choice is not None:
                unknown = unknown_servers(shown, gpus)
                kill = Kill(gpus, choice.mode, unknown, choice.drain_s)
                self.post_message(OperationRequested(kill))

        self.app.push_screen(StopScreen(title, describe_servers(shown, gpus)), done)

    # --- stop and relaunch ------------------------------------------------------------------

    def action_kill_selected(self) -> None:
        """Stop the marked GPUs' servers (else the selected one's), the way the operator
        chooses."""
        if self._busy():
            return
        gpus = self.targets()
        plural = (
            f"servers on GPUs {compact_range(gpus)}"
            if len(gpus) > 1
            else f"server on GPU {gpus[0]}"
        )
        self._ask_how_to_stop(f"Stop the {plural}?", gpus)

    def action_kill_all(self) -> None:
        """Stop every server, the way the operator chooses."""
        if self._busy():
            return
        gpus = tuple(self._indices)
        self._ask_how_to_stop(f"Stop all {len(gpus)} servers?", gpus)

    def action_relaunch_selected(self) -> None:
        """Relaunch the marked GPUs' servers (else the selected one's) with a chosen profile,
        after confirmation."""
        if self._busy():
            return
        self._relaunch_flow(self.targets())

    def action_relaunch_all(self) -> None:
        """Relaunch every server with a chosen profile, after confirmation."""
        if self._busy():
            return
        self._relaunch_flow(tuple(self._indices))

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _relaunch_flow(self, gpus: tuple[int, ...]) -> None:
        shown = self.fleet  # what the confirmation names is what may be signalled
        reads = self.port.reads
        choice = await choose_relaunch(self.app, reads, gpus, describe_servers(shown, gpus))
        if choice is None:
            return
        if choice.same or choice.profile is None:
            self.post_message(OperationRequested(Relaunch(gpus, unknown_servers(shown, gpus))))
        else:
            self.post_message(OperationRequested(Apply(choice.profile, gpus)))

    def action_relaunch_node(self) -> None:
        """Relaunch every server of the selected panel's node, after a confirmation."""
        node, gpus = self._node_gpus()
        self._confirm_then_post(
            f"Relaunch all {len(gpus)} servers of node {node}?",
            describe_servers(self.fleet, gpus),
            OperationRequested(Relaunch(gpus)),
        )

    def action_stop_node(self) -> None:
        """Stop every server of the selected panel's node, the way the operator chooses."""
        node, gpus = self._node_gpus()
        self._ask_how_to_stop(f"Stop all {len(gpus)} servers of node {node}?", gpus)

    # --- profiles: tune, roll back, canary, roll out ----------------------------------------

    def action_tune(self) -> None:
        """Open the tuning form on the selected GPU (a per-GPU override)."""
        if self._busy():
            return
        self._tune_flow(self.selected)

    def action_tune_all(self) -> None:
        """Open the tuning form on every GPU."""
        if self._busy():
            return
        self._tune_flow(None)

    def _tune_flow(self, gpu: int | None) -> None:
        # Pushed at once, not from a worker: the keys typed right after `t` go to the form.
        open_tuning(
            self.app,
            self.port,
            gpu,
            self.profile,
            lambda apply: self.post_message(OperationRequested(apply)),
        )

    def action_rollback(self) -> None:
        """Return the marked GPUs (else the fleet) to their previous profile, after a
        confirmation naming it, the GPUs and their nodes."""
        if self._busy():
            return
        self._rollback_flow(self.scope())

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _rollback_flow(self, scope: tuple[int, ...] | None) -> None:
        words = scope_words(self.fleet, scope)
        gpus = scope if scope is not None else tuple(self._indices)
        scoped = scope is not None
        choice = await confirm_rollback(self.app, self.port.reads.running, gpus, words, scoped)
        if choice is not None:
            back = Rollback(choice.gpus if choice.scoped else None, all_at_once=choice.all_at_once)
            self.post_message(OperationRequested(back, choice.target))

    def action_canary(self) -> None:
        """Try a profile on the selected GPU, the others as control, after confirmation."""
        if self._busy():
            return
        self._canary_flow(self.selected)

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _canary_flow(self, gpu: int) -> None:
        # A many-node console's port picks the controls (the GPUs running the canary GPU's
        # profile on every node): the confirm names those; on one node, every other GPU.
        controls = self.port.reads.canary_controls(gpu)
        fleet = (gpu, *controls) if controls is not None else tuple(self._indices)
        profile = await choose_canary(
            self.app, self.port, gpu, fleet, describe_servers(self.fleet, (gpu,))
        )
        if profile is not None:
            self.post_message(OperationRequested(Canary(profile, gpu)))

    def action_rollout(self) -> None:
        """Roll a profile out to the marked GPUs (else the fleet) one GPU at a time, after a
        confirmation naming the GPUs and their nodes."""
        if self._busy():
            return
        self._rollout_flow(self.scope())

    @work(group="ask", exclusive=True, exit_on_error=False)
    async def _rollout_flow(self, scope: tuple[int, ...] | None) -> None:
        gpus = scope if scope is not None else tuple(self._indices)
        words = scope_words(self.fleet, scope)
        profile = await choose_rollout(self.app, self.port.reads, gpus, words)
        if profile is not None:
            self.post_message(OperationRequested(Rollout(profile, 1, scope)))

    # --- adoption and the job ---------------------------------------------------------------

    def action_adopt(self) -> None:
        """Take over the servers shown that the fleet state records nothing of (started by the
        operator's own script), after a dialog showing what will be written."""
        if self._busy() or Kind.ADOPT not in self.port.capabilities():
            return
        open_adoption(
            self.app,
            self.port.reads,
            self.fleet,
            lambda plan: self.post_message(OperationRequested(Adopt(plan))),
        )

    def action_toggle_pipeline(self) -> None:
        """Start the pipeline, or stop it (after confirmation) when it is running; the demo's
        job, once finished, is started afresh after confirmation."""
        status = self.pipeline_status
        if status is not None and status.state == "running":
            self._confirm_then_post(
                "Stop the generation pipeline?",
                describe_pipeline_stop(status),
                OperationRequested(StopPipeline()),
                confirm="Stop pipeline",
            )
        elif status is not None and status.state == "finished" and self._starts_fresh_job:
            self._confirm_then_post(
                "Start a fresh demo job?",
                describe_fresh_job(status),
                OperationRequested(StartPipeline()),
            )
        else:
            self.post_message(OperationRequested(StartPipeline()))

    @property
    def _starts_fresh_job(self) -> bool:
        """The port starts a finished job afresh (the demo's)."""
        return self.port.capabilities().starts_fresh_job
