"""Posting alerts to a webhook: an HTTP POST with a JSON body per alert, from a thread of its own.

``post`` only queues (the poll that found the alert never waits on the network); the thread
sends each in order through one ``httpx.Client`` with the configured timeout, trying a failed one
``ATTEMPTS`` times ``RETRY_S`` apart. A queue that fills (an endpoint down for hours) drops its
oldest, counted. The body (``body``)::

    {"source": "gpufleet", "node": "gpu-node-1", "state": "firing", "rule": "crashed",
     "subject": "GPU 3", "gpu": 3, "message": "GPU 3 server on :30003 crashed: killed by SIGKILL",
     "at": 1796656097.4, "since": 1796656097.4}

``state`` is ``firing`` or ``resolved``; a resolved one carries ``fired_at`` instead of ``since``.
"""

from __future__ import annotations

import queue
import socket
import threading
from typing import Any

import httpx

from tui.ops.alerts.engine import AlertEvent, AlertFired

ATTEMPTS = 3
"""Tries of one post before it is given up (counted in ``failed``)."""
RETRY_S = 1.0
"""Seconds between two tries."""
MAX_QUEUED = 1000
"""Alerts waiting to be sent; past it the oldest is dropped."""


def body(event: AlertEvent, node: str) -> dict[str, Any]:
    """The JSON body of one alert's post."""
    out: dict[str, Any] = {
        "source": "gpufleet",
        "node": node,
        "state": "firing" if isinstance(event, AlertFired) else "resolved",
        "rule": event.rule,
        "subject": event.subject,
        "gpu": event.gpu,
        "message": event.message,
        "at": event.at,
    }
    if isinstance(event, AlertFired):
        out["since"] = event.since
    else:
        out["fired_at"] = event.fired_at
    return out


class WebhookPoster:
    """Sends alerts to one URL in the background.

    Args:
        url: The webhook (http or https).
        timeout_s: Seconds one post may take.
        node: The node's name in each body (default: the hostname).
        transport: httpx transport (tests inject one; default the network).
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = 5.0,
        node: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url
        self.node = node or socket.gethostname()
        self._client = httpx.Client(timeout=timeout_s, transport=transport)
        self._queue: queue.Queue[AlertEvent | None] = queue.Queue()
        self._stop = threading.Event()
        self.sent = 0
        """Posts the endpoint answered with a 2xx."""
        self.failed = 0
        """Alerts given up after ``ATTEMPTS`` tries, or dropped from a full queue."""
        self.last_error = ""
        """Why the last failed post failed ('' when none has)."""
        self._thread = threading.Thread(target=self._run, name="alerts-webhook", daemon=True)
        self._thread.start()

    def post(self, event: AlertEvent) -> None:
        """Queue one alert for sending (never blocks)."""
        while self._queue.qsize() >= MAX_QUEUED:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
            self.failed += 1
            self.last_error = f"more than {MAX_QUEUED} alerts waiting: the oldest dropped"
        self._queue.put(event)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self._send(event)

    def _send(self, event: AlertEvent) -> None:
        payload = body(event, self.node)
        for attempt in range(ATTEMPTS):
            try:
                answer = self._client.post(self.url, json=payload)
                if answer.is_success:
                    self.sent += 1
                    return
                self.last_error = f"{self.url} answered {answer.status_code}"
            except httpx.HTTPError as error:
                self.last_error = f"{self.url}: {type(error).__name__}: {error}"
            if attempt + 1 < ATTEMPTS and self._stop.wait(RETRY_S):
                break  # closing: no more waiting
        self.failed += 1

    def close(self, wait_s: float = 10.0) -> int:
        """Send what is queued (for at most ``wait_s``), then stop the thread.

        Returns:
            The alerts left unsent: still queued, or in flight when the wait ended.
        """
        self._queue.put(None)
        self._thread.join(wait_s)
        self._stop.set()  # a post between its tries gives up at once
        self._thread.join(min(wait_s, 1.0))
        unsent = sum(1 for event in list(self._queue.queue) if event is not None)
        if self._thread.is_alive():
            unsent += 1  # the one it is still sending (the process may end before it does)
        self._client.close()
        return unsent
