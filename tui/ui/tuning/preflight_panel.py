"""The PREFLIGHT panel: what the candidate will allocate on each GPU, before anything stops."""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from tui.ops.types import Preflight, planned_for_lines
from tui.ui.format import GIB, num
from tui.ui.text_table import Cell, text_table
from tui.ui.tuning.candidate import gpu_range

HEADER = ("GPU", "fits", "Mamba slots", "Mamba GB", "KV tokens", "max running", "free GB")


def mamba_pool_bytes(item: Preflight) -> int:
    """The Mamba pool as SGLang's 'Mamba Cache is allocated' line totals it: conv and ssm state
    and, with speculative decoding, the intermediate ssm and conv-window caches (the seed's 200
    slots: 0.55 + 28.27 + 23.06 + 0.45 = 52.3 GB; conv and ssm alone, 28.8, left out 23.5)."""
    return item.plan.mamba_bytes


def render_preflight(items: Sequence[Preflight]) -> Content:
    """A table, one row per GPU, then one plain 'does not fit: why' line per GPU that will not,
    the release the plans follow and where their sizes come from.

    Args:
        items: The predictions, any order.

    Returns:
        The text to show.
    """
    ordered = sorted(items, key=lambda p: p.gpu)
    rows: list[list[Cell]] = []
    for item in ordered:
        asked = "auto" if item.max_running_requested is None else str(item.max_running_requested)
        running: Cell = f"{asked} -> {item.max_running_effective}"
        if item.capped:
            running = (f"{running} (capped)", "$warning")
        rows.append(
            [
                str(item.gpu),
                ("yes", "$success") if item.fits else ("NO", "bold $error"),
                num(item.mamba_slots),
                f"{mamba_pool_bytes(item) / GIB:.1f}",
                num(item.kv_tokens),
                running,
                f"{item.available_gpu_mem_bytes / GIB:.1f}",
            ]
        )
    lines = [text_table(HEADER, rows, left=2)]
    unfit: dict[str, list[int]] = {}  # the same reason on every GPU is said once
    for item in ordered:
        if not item.fits:
            unfit.setdefault(item.why_not or "does not fit", []).append(item.gpu)
    for why, gpus in unfit.items():
        if len(gpus) == 1:
            text = f"GPU {gpus[0]} {why}"
        else:  # the verb agrees with the GPUs it names
            plural = why.replace("does not fit", "do not fit", 1).replace(
                "does not start", "do not start", 1
            )
            text = f"GPUs {gpu_range(gpus)} {plural}"
        lines.append(Content.styled(text, "$error"))
    lines += [Content.styled(line, "dim") for line in planned_for_lines(ordered)]
    if ordered:
        lines.append(Content.styled(sizes_source(ordered), "dim"))
    return Content("\n").join(lines)


def sizes_source(items: Sequence[Preflight]) -> str:
    """Where the sizes of the predictions come from, in a sentence that reads."""
    calibrated = sum(1 for item in items if item.calibrated)
    if calibrated == len(items):
        return "sizes calibrated on the running servers' logs"
    if calibrated == 0:
        return "sizes from the model's constants (no running server's log to calibrate on)"
    return (
        f"sizes calibrated on the servers' logs for {calibrated} of {len(items)} GPUs, "
        "the model's constants for the others"
    )


class PreflightPanel(Static):
    """Shows the newest preflight, a waiting line, or why it could not be computed."""

    DEFAULT_CSS = """
    PreflightPanel {
        border: round $primary;
        height: auto;
        padding: 0 1;
    }
    PreflightPanel.-unfit {
        border: round $error;
    }
    """

    def on_mount(self) -> None:
        """Title the border."""
        self.border_title = "PREFLIGHT"

    showing_table = False
    """Whether a table of predictions is shown (not a note)."""

    def show_items(self, items: Sequence[Preflight]) -> None:
        """Show the predictions; the border turns red when a GPU does not fit."""
        self.set_class(any(not item.fits for item in items), "-unfit")
        self.border_subtitle = ""
        self.showing_table = True
        self.update(render_preflight(items))

    def show_note(self, note: str, *, error: bool = False) -> None:
        """Show a line instead of a table (waiting for valid values, computing, or a failure)."""
        self.set_class(error, "-unfit")
        self.border_subtitle = ""
        self.showing_table = False
        self.update(Content.styled(note, "$error" if error else "dim"))

    def mark_updating(self) -> None:
        """A new prediction is on its way: the table shown stays (marked) until it arrives, so
        the panel does not flash a waiting line at every keystroke."""
        if self.showing_table:
            self.border_subtitle = "updating..."
        else:
            self.show_note("computing...")
