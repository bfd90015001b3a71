"""``JobEnergyLine``: the job's energy in the generation pane, and its cost where a price is set.

``job energy: 12.40 kWh for 9,000,000 tokens, 2.01 tok/J, 3.84 EUR so far, 9.12 EUR to the ETA
(2 runs)``: the ledger ``gpufleet generate`` keeps beside its status document (every run of the
job, ``tui.pipeline.energy``), at the ``[energy]`` price of ``settings.toml``, in the words of
``gpufleet status`` (``tui.ops.observed.job_energy_lines``). Read through the port
(``FleetReads.job_energy``: a local fleet's ledger file, the job's node's on many nodes, none in
a replay) and the
price from the settings, in a thread worker at most every ``READ_S`` while the pane shows.
"""

from __future__ import annotations

import time

from textual import work
from textual.content import Content
from textual.message import Message
from textual.widgets import Static

from tui.ops.observed import job_energy_document, job_energy_lines
from tui.ops.port import FleetReads
from tui.pipeline.energy import JobEnergy, PriceError, load_price

READ_S = 10.0
"""Seconds between two reads of the ledger (``gpufleet generate`` writes it every 5 s)."""


class EnergyRead(Message):
    """What the worker read: the words, or '' when there is no ledger."""

    def __init__(self, words: Content) -> None:
        self.words = words
        """The line to show (empty: none)."""
        super().__init__()


def energy_words(ledger: JobEnergy | None, eta_s: float | None) -> Content:
    """The job's energy line from its ledger and the price (blocking: reads the settings)."""
    if ledger is None:
        return Content("")
    try:
        price = load_price()
        problem = ""
    except PriceError as error:
        price, problem = None, str(error)
    lines = job_energy_lines(job_energy_document(ledger, price, eta_s))
    parts = [Content(line) for line in lines]
    if problem:
        parts.append(Content.styled(f"no cost: {problem}", "$warning"))
    return Content("\n").join(parts)


class JobEnergyLine(Static):
    """The job's energy and cost (empty, taking no room, without a ledger)."""

    DEFAULT_CSS = """
    JobEnergyLine {
        height: auto;
    }
    """

    class Shown(Message):
        """Its rows changed (the pane gives the chart what is left)."""

    def __init__(self, reads: FleetReads, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.reads = reads
        """Where the ledger is read (the console's port)."""
        self.display = False  # until a ledger is read
        self._read_at: float | None = None
        self._rows = 0

    def read_if_due(self, eta_s: float | None) -> None:
        """Read the ledger again when ``READ_S`` passed since the last read."""
        now = time.monotonic()
        if self._read_at is not None and now - self._read_at < READ_S:
            return
        self._read_at = now
        self._read(eta_s)

    @work(thread=True, exclusive=True, group="energy-read", exit_on_error=False)
    def _read(self, eta_s: float | None) -> None:
        self.post_message(EnergyRead(energy_words(self.reads.job_energy(), eta_s)))

    def on_energy_read(self, message: EnergyRead) -> None:
        """Show what the worker read."""
        message.stop()
        self.update(message.words)
        shown = bool(message.words.plain)
        self.display = shown
        rows = message.words.plain.count("\n") + 1 if shown else 0
        if rows != self._rows:
            self._rows = rows
            self.post_message(self.Shown())
