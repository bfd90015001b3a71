"""Messages that cross widgets: data flowing in from workers, intents flowing up from panels."""

from __future__ import annotations

from textual.message import Message

from tui.control.adopt import ConfirmedServer
from tui.control.stop import StopMode
from tui.fleet.snapshot import FleetSnapshot
from tui.ops.adoption import AdoptPlan
from tui.ops.marks import OperationMark
from tui.pipeline.status import PipelineStatus


class FleetUpdated(Message):
    """A new fleet snapshot arrived from the poll worker."""

    def __init__(self, snapshot: FleetSnapshot) -> None:
        self.snapshot = snapshot
        """The snapshot."""
        super().__init__()

    def can_replace(self, message: Message) -> bool:
        """A newer snapshot makes an older one still in the queue worthless."""
        return isinstance(message, FleetUpdated)


class PipelineStatusRead(Message):
    """A new reading of the pipeline status document (None when absent) and the retune marks."""

    def __init__(
        self, status: PipelineStatus | None, retune_marks: tuple[OperationMark, ...]
    ) -> None:
        self.status = status
        """The document, or None when there is none."""
        self.retune_marks = retune_marks
        """The journal's operations that changed servers, oldest first."""
        super().__init__()

    def can_replace(self, message: Message) -> bool:
        """Only the newest reading matters."""
        return isinstance(message, PipelineStatusRead)


class PanelSelected(Message):
    """The user selected a GPU panel (click, arrows or digits)."""

    def __init__(self, gpu: int) -> None:
        self.gpu = gpu
        """GPU index of the panel."""
        super().__init__()


class PanelOpened(Message):
    """The user asked for a panel's detail (Enter or double click)."""

    def __init__(self, gpu: int) -> None:
        self.gpu = gpu
        """GPU index of the panel."""
        super().__init__()


class KillRequested(Message):
    """The user chose to stop the servers on ``gpus``, and how."""

    def __init__(
        self,
        gpus: tuple[int, ...],
        mode: StopMode = "drain",
        confirmed: tuple[ConfirmedServer, ...] = (),
        drain_s: float | None = None,
    ) -> None:
        self.gpus = gpus
        """GPU indices."""
        self.mode: StopMode = mode
        """drain, terminate or kill."""
        self.confirmed = confirmed
        """The ``unknown`` servers the confirmation named (pid, command line): their pid alone
        may be signalled."""
        self.drain_s = drain_s
        """The drain's deadline the operator typed (None: the profiles', else 60 s)."""
        super().__init__()


class RelaunchRequested(Message):
    """The user confirmed relaunching the servers on ``gpus``."""

    def __init__(self, gpus: tuple[int, ...], confirmed: tuple[ConfirmedServer, ...] = ()) -> None:
        self.gpus = gpus
        """GPU indices."""
        self.confirmed = confirmed
        """The ``unknown`` servers the confirmation named: their pid alone may be signalled."""
        super().__init__()


class AdoptRequested(Message):
    """The user confirmed adopting what ``plan`` shows (its profile and servers)."""

    def __init__(self, plan: AdoptPlan) -> None:
        self.plan = plan
        """The plan the dialog showed: what will be written."""
        super().__init__()


class ApplyProfileRequested(Message):
    """The user confirmed retuning ``gpus`` with ``profile``."""

    def __init__(self, profile: str, gpus: tuple[int, ...]) -> None:
        self.profile = profile
        """Profile name."""
        self.gpus = gpus
        """GPU indices."""
        super().__init__()


class RollbackRequested(Message):
    """The user confirmed returning to the previous profile."""

    def __init__(
        self,
        target: str = "the previous profile",
        gpus: tuple[int, ...] = (),
        scoped: bool = False,
        all_at_once: bool = False,
    ) -> None:
        self.target = target
        """The previous profile(s) in words, for the report's title."""
        self.gpus = gpus
        """GPUs that go back (empty: the backend decides)."""
        self.scoped = scoped
        """Only ``gpus`` go back (marked GPUs or a node); False: the fleet, the backend
        returning every GPU that has a previous profile."""
        self.all_at_once = all_at_once
        """Every GPU back together (the operator chose it); False: one GPU at a time."""
        super().__init__()


class PipelineStartRequested(Message):
    """The user asked to start the generation pipeline."""


class PipelineStopRequested(Message):
    """The user confirmed stopping the generation pipeline."""
