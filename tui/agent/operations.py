"""Long operations asked through the agent's API: each runs as a background task with an id, and
its typed events are kept (encoded) for the caller to poll, long-polling for new ones.

The operation itself is a ``FleetOps`` coroutine (the one door): its lock refuses a second
operation, remote or local, and its journal records who asked (``by``). A refusal or a failure
ends the operation with ``state`` ``refused`` or ``failed`` and the reason in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tui.agent.codec import encode
from tui.ops.events import EventSink, OpEvent
from tui.ops.journal import JournalError
from tui.ops.lock import OperationBusy
from tui.state.files import StateFileError

Work = Callable[[EventSink], Awaitable[Any]]
"""The operation: called with the sink for its events, returns its result (a dataclass)."""

KEEP_FINISHED = 64
"""Finished operations kept for their callers to read (oldest forgotten first)."""


@dataclass
class Operation:
    """One operation asked through the API (mutable: it grows while it runs)."""

    id: str
    """Opaque id, unguessable (the caller polls by it)."""
    kind: str
    """apply, relaunch, kill, rollback, canary, rollout, rollout_back or stop_fleet."""
    args: dict[str, Any]
    """What was asked, as sent."""
    started_at: float
    """time.time() when it was accepted."""
    state: str = "running"
    """running, done, failed or refused."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Its events so far, encoded (``tui.agent.codec``)."""
    result: Any = None
    """Its encoded result once done."""
    error: str = ""
    """Why it failed or was refused."""
    finished_at: float | None = None
    """time.time() when it ended."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set on every new event and at the end (long polls wait on it)."""

    def document(self, after: int = 0) -> dict[str, Any]:
        """Its status for the API, with the events from number ``after`` on."""
        return {
            "id": self.id,
            "kind": self.kind,
            "args": self.args,
            "state": self.state,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "error": self.error,
            "result": self.result,
            "events": self.events[after:],
            "next": len(self.events),
        }


class Operations:
    """Runs operations in the background and keeps their events and results."""

    def __init__(self) -> None:
        self._ops: OrderedDict[str, Operation] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, kind: str, args: dict[str, Any], work: Work) -> Operation:
        """Start ``work`` in the background (on the running loop) and return its handle."""
        op = Operation(secrets.token_hex(8), kind, args, time.time())
        self._ops[op.id] = op

        def sink(event: OpEvent) -> None:
            op.events.append(encode(event))
            op.changed.set()

        task = asyncio.create_task(self._run(op, work, sink))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._forget_old()
        return op

    async def _run(self, op: Operation, work: Work, sink: EventSink) -> None:
        try:
            result = await work(sink)
            op.result = encode(result) if result is not None else None
            op.state = "done"
        except (OperationBusy, StateFileError, JournalError) as refusal:
            # Refused before anything was stopped: another operation, a state lock held past
            # its deadline (its holder named), a damaged state file, a journal it cannot write.
            op.state, op.error = "refused", _one_line(refusal)
        except asyncio.CancelledError:
            op.state, op.error = "failed", "the agent stopped while it ran"
            raise
        except Exception as error:  # the caller gets the reason; the agent keeps serving
            op.state, op.error = "failed", _one_line(error)
        finally:
            op.finished_at = time.time()
            op.changed.set()

    def _forget_old(self) -> None:
        finished = [i for i, op in self._ops.items() if op.state != "running"]
        for op_id in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._ops[op_id]

    def get(self, op_id: str) -> Operation | None:
        """The operation ``op_id``, if it is known."""
        return self._ops.get(op_id)

    def running(self) -> list[Operation]:
        """Operations still running."""
        return [op for op in self._ops.values() if op.state == "running"]

    async def wait(self, op: Operation, after: int, timeout_s: float) -> None:
        """Return once ``op`` has more than ``after`` events or has ended, or after the timeout."""
        deadline = time.monotonic() + timeout_s
        while op.state == "running" and len(op.events) <= after:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            op.changed.clear()
            try:
                await asyncio.wait_for(op.changed.wait(), remaining)
            except TimeoutError:
                return

    async def aclose(self) -> None:
        """Cancel what still runs (the agent is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:500]
