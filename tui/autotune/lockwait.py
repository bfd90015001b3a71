"""A search step waits for the fleet's operation lock instead of failing on it.

Each step of the search (a canary, a rollback, a rollout) is an operation of the operations core
and takes the fleet's operation lock (``tui.ops.lock``); an operator's apply or a rollout
started from the console may hold it for minutes. A search that ended on the first refusal
would throw away its budget and its place in the climb, so a step waits until the lock is free
(bounded by ``AutotuneOptions.lock_wait_s``), reporting whom it waits for, then runs.

It looks at the lock with ``current_holder`` (which never takes it) rather than by trying the
step again and again: every refused operation is journalled by the operations core, and a
journal with one refusal per poll would bury the search's own entries. A step that still
loses the race (another operation took the lock between the look and the step) is refused with
``OperationBusy`` and waits again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tui.ops.lock import Holder, OperationBusy, current_holder

T = TypeVar("T")


class LockWaitTimeout(RuntimeError):
    """The operation lock stayed held past the wait's bound; the message names its holder."""


class WaitStopped(RuntimeError):
    """The operator asked for a stop while the step waited; the step never ran."""


async def when_free(
    step: Callable[[], Awaitable[T]],
    *,
    what: str,
    wait_s: float,
    poll_s: float,
    on_wait: Callable[[Holder | None], Awaitable[None]],
    gate: Callable[[], Awaitable[bool]] | None = None,
) -> T:
    """Run ``step`` once the fleet's operation lock is free.

    Args:
        step: The operation (it takes the lock itself; ``OperationBusy`` from it means it lost
            a race and is retried).
        what: The step in words (for the timeout's message).
        wait_s: Longest total wait, seconds.
        poll_s: How often the lock is looked at.
        on_wait: Called with the holder when waiting starts or the holder changes, and with
            None when the wait is over.
        gate: Awaited before every look: it may block (the operator's pause holds the step,
            even once the lock is free) and returns True when the operator asked for a stop
            (None: neither interrupts the wait, e.g. for a rollback that must happen).

    Returns:
        What ``step`` returned.

    Raises:
        LockWaitTimeout: the lock stayed held for ``wait_s``.
        WaitStopped: a stop was asked while waiting (``step`` never ran).
    """
    deadline = time.monotonic() + wait_s
    shown: tuple[str, int] | None = None
    while True:
        if gate is not None:
            paused_from = time.monotonic()
            if await gate():
                if shown is not None:
                    await on_wait(None)
                raise WaitStopped(f"{what}: stopped by the operator while waiting for the fleet")
            # A pause is the operator's time: it does not bring the wait's bound nearer.
            deadline += time.monotonic() - paused_from
        holder = await asyncio.to_thread(current_holder)
        if holder is None:
            try:
                result = await step()
            except OperationBusy:
                # Lost a race: whoever took the lock is named on the next look (its entry may
                # not be written yet, so it may read as "another operation" for a moment).
                holder = await asyncio.to_thread(current_holder) or Holder(
                    "another operation", 0, 0.0, time.time()
                )
            else:
                if shown is not None:
                    await on_wait(None)
                return result
        if (holder.operation, holder.pid) != shown:
            shown = (holder.operation, holder.pid)
            await on_wait(holder)
        if time.monotonic() >= deadline:
            raise LockWaitTimeout(
                f"{what}: waited {wait_s:.0f} s for the operation lock; "
                f"{holder.describe()} still holds it"
            )
        await asyncio.sleep(poll_s)
