"""Messages of the canary and rollout screens: the intents going up (their progress coming in is
``tui.ui.run_screen.ProgressArrived``)."""

from __future__ import annotations

from textual.message import Message


class CanaryRequested(Message):
    """The user confirmed trying ``profile`` on ``gpu`` against the other GPUs."""

    def __init__(self, profile: str, gpu: int) -> None:
        self.profile = profile
        """Candidate profile name."""
        self.gpu = gpu
        """The canary GPU."""
        super().__init__()


class RolloutRequested(Message):
    """The user confirmed rolling ``profile`` out, ``batch`` GPUs at a time."""

    def __init__(self, profile: str, batch: int = 1, gpus: tuple[int, ...] | None = None) -> None:
        self.profile = profile
        """Profile name."""
        self.batch = batch
        """GPUs restarted together."""
        self.gpus = gpus
        """The GPUs it may restart (marked GPUs or a node); None: the whole fleet."""
        super().__init__()
