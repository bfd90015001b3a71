"""The floor for console overhead: a minimal Textual app redrawing one clock label each second."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.widgets import Label


class ClockApp(App[None]):
    """One label, updated once a second: the least a live Textual screen can cost."""

    def compose(self) -> ComposeResult:
        yield Label(time.strftime("%H:%M:%S"), id="clock")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        self.query_one("#clock", Label).update(time.strftime("%H:%M:%S"))


if __name__ == "__main__":
    ClockApp().run()
