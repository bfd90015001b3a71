"""The job's energy: joules the node's GPUs used while the job ran, its output tokens, and what
they cost, kept beside the status document across restarts of the job and of the console.

The pipeline meters while it runs (``JobMeter``, in a thread every ``SAMPLE_S``): each GPU's
joules from the driver's energy counter, else its power integrated (``tui.gpu.energy``). It
writes the ledger, ``<status>.energy.json`` beside the status document (``ledger_path``),
atomically, with the job's id: a resumed run adds to the ledger of its job, a new job in the same
place starts a new one. Only time the job runs is metered: a console or a stopped job adds
nothing. Tokens per joule = the job's output tokens (every run's) over its joules.

The price is the operator's (``[energy]`` of ``settings.toml``: ``price_per_kwh``, ``currency``);
the cost so far is joules at that price, the cost to the ETA the recent power for the ETA's
seconds (``job_cost``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tui import paths
from tui.gpu.energy import EnergyMeter
from tui.gpu.snapshot import GpuSource
from tui.gpu.source import sample_slow
from tui.inputs import STATUS_LIMIT, read_json, settings_table
from tui.pipeline.status import replace_json

SCHEMA = 1
"""The ledger's version."""
SAMPLE_S = 5.0
"""Seconds between two power samples of the job's GPUs (and ledger writes)."""
COUNTER_EVERY_S = 10.0
"""Seconds between two reads of the energy counters (~4 ms a GPU on an H200)."""
RECENT_S = 60.0
"""The recent power (the cost to the ETA) is the mean over this long."""
JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True, slots=True)
class JobEnergy:
    """The ledger: the job's energy over every run so far."""

    schema: int
    """``SCHEMA`` of the writer."""
    job_id: str
    """The job it belongs to (``tui.pipeline.job_id``)."""
    joules: float
    """Joules the node's GPUs used while the job ran, every run."""
    output_tokens: int
    """The job's output tokens, every run."""
    runs: int
    """Runs that metered (this one included)."""
    gpus: int
    """GPUs the last run metered."""
    counter: bool
    """Every GPU of the last run read the driver's energy counter (False: some were metered by
    their power samples)."""
    watts: float | None
    """Mean power of the job's GPUs over the last minute (None: not yet known)."""
    updated_at: float
    """time.time() of the ledger."""

    @property
    def tokens_per_joule(self) -> float | None:
        """The job's output tokens per joule (None before any energy was metered)."""
        return self.output_tokens / self.joules if self.joules > 0 else None


def ledger_path(status_path: Path) -> Path:
    """The ledger beside a status document: ``status.json`` -> ``status.energy.json``."""
    return status_path.with_name(status_path.stem + ".energy.json")


def read_ledger(path: Path) -> JobEnergy | None:
    """The ledger at ``path``; None when it is missing or not a ledger (read through the one door:
    a FIFO or an oversized file is None at once)."""
    try:
        data = read_json(path, STATUS_LIMIT, "an energy ledger")
        ledger = JobEnergy(**data)
    except (OSError, ValueError, TypeError):
        return None
    return ledger if ledger.schema == SCHEMA else None


def write_ledger(path: Path, ledger: JobEnergy) -> None:
    """Atomically replace the ledger (a temporary file, then rename)."""
    replace_json(path, asdict(ledger))


class JobMeter:
    """Meters the node's GPUs while the job runs. Blocking (NVML): call from a thread.

    Args:
        path: The ledger (``ledger_path`` of the status document).
        job_id: The job's id: a ledger of another job is started anew.
        source: The node's GPUs (NVML, the simulated fleet, or none).
        clock: Wall seconds (tests pass their own).
    """

    def __init__(
        self,
        path: Path,
        job_id: str,
        source: GpuSource,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.job_id = job_id
        self.source = source
        self._clock = clock
        earlier = read_ledger(path)
        self._base = earlier if earlier is not None and earlier.job_id == job_id else None
        self._meters: dict[int, EnergyMeter] = {}
        self._counter_at = float("-inf")
        self._recent: deque[tuple[float, float]] = deque()
        self.ledger: JobEnergy | None = None
        """The last ledger written (None before the first sample)."""

    def sample(self, output_tokens: int) -> JobEnergy:
        """Read the GPUs, add to the ledger and write it.

        Args:
            output_tokens: The job's output tokens in this run so far.

        Returns:
            The ledger written.
        """
        now = self._clock()
        for gpu in self.source.sample():
            self._meters.setdefault(gpu.index, EnergyMeter()).power(gpu.taken_at, gpu.power_w)
        if now - self._counter_at >= COUNTER_EVERY_S:
            self._counter_at = now
            for reading in sample_slow(self.source):
                meter = self._meters.setdefault(reading.index, EnergyMeter())
                meter.energy_counter(reading.taken_at, reading.energy_mj)
        run = sum(m.joules for m in self._meters.values())
        self._recent.append((now, run))
        while len(self._recent) > 2 and self._recent[1][0] <= now - RECENT_S:
            self._recent.popleft()
        (t0, j0), (t1, j1) = self._recent[0], self._recent[-1]
        base = self._base
        self.ledger = JobEnergy(
            schema=SCHEMA,
            job_id=self.job_id,
            joules=(base.joules if base else 0.0) + run,
            output_tokens=(base.output_tokens if base else 0) + output_tokens,
            runs=(base.runs if base else 0) + 1,
            gpus=len(self._meters),
            counter=bool(self._meters) and all(m.counter for m in self._meters.values()),
            watts=(j1 - j0) / (t1 - t0) if t1 > t0 else None,
            updated_at=now,
        )
        write_ledger(self.path, self.ledger)
        return self.ledger


@dataclass(frozen=True, slots=True)
class Price:
    """The operator's electricity price (``[energy]`` of ``settings.toml``)."""

    per_kwh: float
    """Price of one kWh."""
    currency: str = ""
    """What the price is in ('EUR', '$'; shown after the amount)."""


class PriceError(ValueError):
    """The ``[energy]`` settings cannot be used; the message names the file and the key."""


def load_price(path: Path | None = None) -> Price | None:
    """The price per kWh from ``[energy]`` of the settings file (None: none set).

    Raises:
        PriceError: the file cannot be read or parsed, or ``price_per_kwh`` is not a number in
            0..100, or ``currency`` not text of at most 8 characters (one line naming them).
    """
    path = path or paths.settings_file()
    energy = settings_table(path, "energy", ("price_per_kwh", "currency"), PriceError)
    if energy is None or "price_per_kwh" not in energy:
        return None
    price, currency = energy["price_per_kwh"], energy.get("currency", "")
    if isinstance(price, bool) or not isinstance(price, int | float) or not 0 <= price <= 100:
        raise PriceError(f"{path}: energy.price_per_kwh = {price!r}: must be a number in 0..100")
    if not isinstance(currency, str) or len(currency) > 8:
        raise PriceError(f"{path}: energy.currency = {currency!r}: must be text of 0..8 characters")
    return Price(float(price), currency)


@dataclass(frozen=True, slots=True)
class JobCost:
    """What the job's energy cost at the operator's price."""

    so_far: float
    """The ledger's joules at the price."""
    to_eta: float | None
    """The recent power for the ETA's seconds at the price (None: no ETA or no power yet)."""
    currency: str
    """The price's currency."""


def job_cost(ledger: JobEnergy, price: Price, eta_s: float | None) -> JobCost:
    """The job's cost so far and to its ETA.

    Args:
        ledger: The job's energy.
        price: The operator's price per kWh.
        eta_s: Seconds to the job's end at its recent rate (the status document's).
    """
    to_eta = None
    if eta_s is not None and ledger.watts is not None:
        to_eta = ledger.watts * eta_s / JOULES_PER_KWH * price.per_kwh
    return JobCost(ledger.joules / JOULES_PER_KWH * price.per_kwh, to_eta, price.currency)
