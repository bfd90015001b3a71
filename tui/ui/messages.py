"""Messages that cross widgets: data flowing in from workers, intents flowing up from panels."""

from __future__ import annotations

from textual.message import Message

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.commands import Command
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


class OperationRequested(Message):
    """The operator asked for ``command`` (confirmed where it asks): the app runs it on the
    port, its report shown or its outcome toasted."""

    def __init__(self, command: Command, words: str = "") -> None:
        self.command = command
        """What to run."""
        self.words = words
        """What it is about in words, for its report (a rollback's previous profiles)."""
        super().__init__()
