"""What a stop's drain sees of the server: its load, the requests still arriving, what was lost.

SGLang (0.5.17 and 0.5.23 alike) keeps accepting ``/generate`` while it drains: only
``/health`` and ``/ready`` answer 503, and the drain ends at the first of its 5 s checks that
finds no request left. A client that never reads ``/health`` (the seed's own generation script)
therefore keeps a drain going until gpufleet's deadline, and then the group's SIGTERM drops
every request in flight (measured on a real 0.5.17: 16 of 16 lost, 864 answered in 60 s).

``DrainWatch`` reads the server's ``/metrics`` once before the first signal (the generation
requests arrived so far, and those in flight), about once a second while it drains (running,
queued, and how many arrived since the SIGTERM: a client still sending), and once more when the
deadline passes, just before the group is signalled (the requests in flight then are the ones
lost), and a few times a second after that signal while the server goes down (what it still
accepts then is lost too). ``DrainAccount`` is the result: the drain's own outcome, told in the
stop's line, the operation's output, the journal (``lost_in_flight``) and the exit status. A
client may see more lost than that: a connection it opens to a dying server can sit in the
kernel's backlog and be reset, a request the server never saw and no counter of its holds.

A drain can also *end* while a client keeps sending: SGLang's watchdog checks every 5 s, and when
one check finds nothing running (the client's requests ended together, the next not yet sent)
the server exits, and what arrived after that check is dropped by the exit (seen on the
simulated 0.5.17: a clean exit, 19 lost by the client). The process's exit cannot say which;
the counter can say a client was still sending: arrivals in the last interval read before the
exit, or since the last reading that found nothing in flight. The account then says so
(``still_sending``): requests sent in its last moment may have been lost.

Each read is on a connection of its own (``Connection: close``): uvicorn's shutdown waits for
every connection it accepted, and one accepted as the shutdown began is never told to close, so
a connection kept by a read a second held the server until the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from tui.servers.payloads import parse_metrics, parse_request_counts
from tui.words import counted

DRAIN_POLL_S = 1.0
"""How often a drain's progress is read from the server's ``/metrics``."""

LATE_POLL_S = 0.1
"""Once its group is signalled, how often a server going down is read (what it still accepts
until it stops listening is lost too)."""

READ_TIMEOUT_S = 0.5
"""One ``/metrics`` read's limit (a server on its way out stops answering)."""


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """How a stop is going, reported about once a second while it waits."""

    gpu: int
    """GPU index."""
    stage: str
    """'cordoned' (the jobs that honour cordons said whether they stopped sending), 'draining',
    'drain timed out', 'waiting for GPU memory release'."""
    elapsed_s: float
    """Seconds since the stop began."""
    running: int | None = None
    """Requests the server still runs (from its /metrics; None when it did not answer)."""
    queued: int | None = None
    """Requests still queued."""
    arrived: int | None = None
    """Generation requests that reached the server since its SIGTERM (None: the server exports
    no request counter, or did not answer): more than 0 means a client is still sending, and
    the drain cannot end while it does."""
    note: str = ""
    """Anything else the operator should know now (the job's acknowledgement of the cordon)."""

    def describe(self) -> str:
        """One line: ``GPU 0: draining 12 s: 16 running, 0 queued; 230 arrived since the
        SIGTERM: a client is still sending``."""
        if self.stage == "cordoned":
            return f"GPU {self.gpu}: cordoned: {self.note} ({self.elapsed_s:.1f} s)"
        load = "" if self.running is None else f": {self.running} running, {self.queued} queued"
        text = f"GPU {self.gpu}: {self.stage} {self.elapsed_s:.0f} s{load}"
        if self.arrived:
            text += (
                f"; {self.arrived} arrived since the SIGTERM: a client is still sending "
                "(the drain cannot end while it does)"
            )
        return text + (f"; {self.note}" if self.note else "")


ProgressSink = Callable[[DrainProgress], None]
"""Receives a stop's progress, from the stopping thread."""


@dataclass(frozen=True, slots=True)
class DrainAccount:
    """What one stop did to the requests its server had: the drain's own outcome."""

    timed_out: bool = False
    """A drain ran past its deadline with the main process still up: the group was signalled."""
    deadline_s: float | None = None
    """The drain's deadline (seconds), when it timed out."""
    arrived: int | None = None
    """Generation requests that arrived after the SIGTERM (None: not counted)."""
    lost_in_flight: int | None = 0
    """Requests in flight when the group (or the process) was signalled, all dropped by it, and
    those it still accepted as it went down; 0 when the server drained or had none; None when
    some were lost but how many is unknown (its ``/metrics`` did not answer)."""
    in_flight_at_deadline: int | None = None
    """Requests in flight when a drain's deadline passed (None: not timed out, or unknown)."""
    still_sending: bool = False
    """The drain ended (the server exited on its own) while a client was still sending: requests
    arrived in the last interval read before the exit, or after a reading that found nothing in
    flight. What arrived after the last check of SGLang's drain was dropped by its exit: no
    count, but the loss cannot be excluded."""

    @property
    def lost_some(self) -> bool:
        """Requests were (or may have been) lost."""
        return self.lost_in_flight != 0

    @property
    def at_risk(self) -> bool:
        """Requests were lost, or may have been: a timed-out drain, a loss counted, or a drain
        that ended while a client was still sending."""
        return self.timed_out or self.lost_some or self.still_sending

    def still_sending_words(self) -> str:
        """``drain ended while a client was still sending (12 arrived during the drain):
        requests sent in its last moment may have been lost``."""
        arrived = f" ({self.arrived} arrived during the drain)" if self.arrived else ""
        return (
            f"drain ended while a client was still sending{arrived}: requests sent in its last "
            "moment may have been lost"
        )

    def lost_words(self) -> str:
        """``16 in-flight requests lost`` (or how many is unknown)."""
        if self.lost_in_flight is None:
            return (
                "what it had in flight was lost (how many is unknown: its /metrics did not answer)"
            )
        return f"{counted(self.lost_in_flight, 'in-flight request')} lost"

    def timeout_words(self) -> str:
        """``drain timed out after 60 s: 16 requests running, 864 arrived during the drain``."""
        parts = []
        if self.in_flight_at_deadline is not None:
            parts.append(f"{counted(self.in_flight_at_deadline, 'request')} running")
        if self.arrived is not None:
            parts.append(f"{self.arrived} arrived during the drain")
        after = f" after {self.deadline_s:g} s" if self.deadline_s is not None else ""
        return f"drain timed out{after}" + (f": {', '.join(parts)}" if parts else "")


def metrics_url(host: str, port: int) -> str:
    """The server's ``/metrics`` on its own address (a wildcard bind is read on loopback)."""
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{host}:{port}/metrics"


@dataclass(frozen=True, slots=True)
class _Reading:
    running: int | None
    queued: int | None
    arrived_total: int | None
    active: int | None

    @property
    def in_flight(self) -> int | None:
        """What clients wait for: the generation requests the HTTP server holds (its own
        count), else the scheduler's running + queued."""
        if self.active is not None:
            return self.active
        if self.running is None:
            return None
        return self.running + (self.queued or 0)


class DrainWatch:
    """Reads a stopping server's ``/metrics``: before the first signal, about once a second
    while it drains, and at the drain's deadline.

    Args:
        gpu: The GPU (for the progress events).
        host: The server's address.
        port: Its port.
        sink: Receives the progress (None: no progress reads, only the account's).
        started: ``time.monotonic()`` when the stop began.
    """

    def __init__(
        self, gpu: int, host: str, port: int, sink: ProgressSink | None, started: float
    ) -> None:
        self.gpu, self.url, self.sink, self.started = gpu, metrics_url(host, port), sink, started
        self._next = 0.0
        self._client: httpx.Client | None = None
        self._baseline: _Reading | None = None
        self._at_deadline: _Reading | None = None
        self._last_arrived: int | None = None
        self._totals: tuple[int | None, int | None] = (None, None)
        """The arrival counter's last two readings while it drained (earlier, latest)."""
        self._idle_total: int | None = None
        """The arrival counter at the latest reading that found nothing in flight."""
        self._signalled = False
        self._late: _Reading | None = None
        self.deadline_s: float | None = None
        """The drain's deadline, set when it passed."""

    def _read(self) -> _Reading | None:
        try:
            if self._client is None:
                # Plain http to the server itself: no TLS, so no CA bundle (loading it took
                # ~0.2 s of CPU per client, seven at once under the GIL at a fleet's stop,
                # delaying each drain's signal and exit check by up to a second).
                self._client = httpx.Client(
                    timeout=READ_TIMEOUT_S, verify=False, headers={"Connection": "close"}
                )
            body = self._client.get(self.url).content
            load, counts = parse_metrics(body), parse_request_counts(body)
        except (httpx.HTTPError, ValueError):
            return None  # a server on its way out stops answering; the process table is the truth
        return _Reading(load.running, load.queued, counts.arrived, counts.active)

    def _arrived(self, reading: _Reading | None) -> int | None:
        base = self._baseline
        if reading is None or base is None:
            return self._last_arrived
        if reading.arrived_total is None or base.arrived_total is None:
            return None
        self._last_arrived = max(reading.arrived_total - base.arrived_total, 0)
        return self._last_arrived

    def begin(self) -> None:
        """Read the server once before its first signal: what had arrived, what is in flight."""
        self._baseline = reading = self._read()
        if reading is not None:
            self._totals = (None, reading.arrived_total)

    def signalled(self) -> None:
        """Its group (or the process) was signalled while it served: what it has in flight is
        lost, and so is whatever it still accepts until it stops listening."""
        self._signalled = True
        self._next = 0.0

    def tick(self) -> None:
        """Read the drain's progress (at most every ``DRAIN_POLL_S``: reported when there is a
        sink, and kept to tell whether a client still sent as the drain ended); once the group
        is signalled, keep reading what still arrives as it goes down (lost too)."""
        now = time.monotonic()
        if self._signalled:
            if now >= self._next:
                self._next = now + LATE_POLL_S
                self._late = self._read() or self._late
            return
        if now < self._next:
            return
        self._next = now + DRAIN_POLL_S
        reading = self._read()
        arrived = self._arrived(reading)
        if reading is not None and reading.arrived_total is not None:
            self._totals = (self._totals[1], reading.arrived_total)
            if reading.in_flight == 0:
                self._idle_total = reading.arrived_total
        if self.sink is None:
            return
        running = reading.running if reading else None
        queued = reading.queued if reading else None
        self.sink(DrainProgress(self.gpu, "draining", now - self.started, running, queued, arrived))

    def _still_sending(self) -> bool:
        """Requests arrived in the last interval read before the drain ended, or after the
        latest reading that found nothing in flight (when SGLang's check may have found the
        same and ended the drain)."""
        if not self._last_arrived:
            return False
        earlier, latest = self._totals
        if latest is None:
            return False
        grew = earlier is not None and latest > earlier
        return grew or (self._idle_total is not None and latest > self._idle_total)

    def deadline(self, deadline_s: float) -> None:
        """The drain's deadline passed with the server still up: read what is in flight now,
        just before the group is signalled (those requests are what the signal drops)."""
        self.deadline_s = deadline_s
        self._at_deadline = reading = self._read()
        self.signalled()
        if self.sink is not None:
            self.sink(
                DrainProgress(
                    self.gpu,
                    "drain timed out",
                    time.monotonic() - self.started,
                    reading.running if reading else None,
                    reading.queued if reading else None,
                    self._arrived(reading),
                    note="signalling its process group: what it has in flight is lost",
                )
            )

    def account(self, drained: bool, signalled_in_flight: bool) -> DrainAccount:
        """The drain's outcome.

        Args:
            drained: The server exited on its main pid's SIGTERM (nothing was lost).
            signalled_in_flight: The group (or the process) was signalled while the server
                still ran: what it had in flight was dropped.
        """
        if self._at_deadline is not None or self.deadline_s is not None:
            reading = self._at_deadline
            return DrainAccount(
                timed_out=True,
                deadline_s=self.deadline_s,
                arrived=self._arrived(reading),
                lost_in_flight=self._lost(reading),
                in_flight_at_deadline=reading.in_flight if reading is not None else None,
            )
        arrived = self._last_arrived
        if drained:
            return DrainAccount(arrived=arrived, still_sending=self._still_sending())
        if not signalled_in_flight:
            return DrainAccount(arrived=arrived)
        return DrainAccount(arrived=arrived, lost_in_flight=self._lost(self._baseline))

    def _lost(self, at_signal: _Reading | None) -> int | None:
        """In flight when it was signalled, plus what it accepted after, as it went down."""
        if at_signal is None or at_signal.in_flight is None:
            return None
        late = self._late
        if late is None or late.arrived_total is None or at_signal.arrived_total is None:
            return at_signal.in_flight
        return at_signal.in_flight + max(late.arrived_total - at_signal.arrived_total, 0)

    def close(self) -> None:
        """Close the HTTP client (idempotent)."""
        if self._client is not None:
            self._client.close()
            self._client = None
