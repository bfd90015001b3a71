"""Where a Python program's CPU goes, by event-loop callback: loaded at start-up by every Python
process that has this folder on ``PYTHONPATH`` and ``LOOP_COST_OUT`` set
(``python -m bench.profile_console --loop-cost``).

It charges each asyncio handle's thread CPU to its callback (a Textual timer's to the timer's
callback, a task's step to its coroutine), each Textual message's dispatch to its pump and
message class, and each function named in ``LOOP_COST_WRAP`` (``module:Class.method``, comma
separated: thread work such as the monitor's host side) to itself, and writes the sums once a
second to ``LOOP_COST_OUT.<pid>.json``. Why: a sampling profiler (py-spy) counted a waiting
``poll(2)`` as busy and saw a few hundred samples a minute in a process that is idle 99% of the
time; thread CPU per callback is what the console's CPU is made of (issue 20, round 9).

A measuring tool: it costs the process some CPU of its own (a few percent), in every window.
"""

from __future__ import annotations

import asyncio.events
import gc
import json
import os
import sys
import threading
import time
from collections import defaultdict
from typing import Any

OUT = os.environ.get("LOOP_COST_OUT", "")
DUMP_EVERY_S = 1.0

Sums = defaultdict[str, list[float]]


def _charge(table: Sums, key: str, started: float) -> None:
    entry = table[key]
    entry[0] += 1
    entry[1] += time.thread_time() - started


def _callback_name(callback: Any) -> str:
    owner = getattr(callback, "__self__", None)
    if owner is not None and hasattr(owner, "get_coro"):  # a task's step: name its coroutine
        coro = owner.get_coro()
        name = getattr(coro, "__qualname__", type(coro).__name__)
        if name == "Timer._run_timer":  # a Textual timer: name what it calls
            timer = getattr(getattr(coro, "cr_frame", None), "f_locals", {}).get("self")
            inner = getattr(timer, "_callback", None)
            return "timer " + str(getattr(inner, "__qualname__", repr(inner)))
        return "task " + name
    return str(getattr(callback, "__qualname__", type(callback).__name__))


def _install(handles: Sums, messages: Sums, functions: Sums) -> None:
    run = asyncio.events.Handle._run

    def timed_run(self: asyncio.events.Handle) -> None:
        started = time.thread_time()
        try:
            run(self)
        finally:
            _charge(handles, _callback_name(getattr(self, "_callback", None)), started)

    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]  # timed, then run
    collecting: dict[int, float] = {}

    def timed_gc(phase: str, info: dict[str, int]) -> None:
        """The cyclic collector's own time, by generation (it runs inside whatever allocated:
        that callback is charged it too, so this is a second view, not a share of the sum)."""
        if phase == "start":
            collecting[threading.get_ident()] = time.thread_time()
        elif (started := collecting.pop(threading.get_ident(), None)) is not None:
            _charge(functions, f"gc generation {info.get('generation')}", started)

    gc.callbacks.append(timed_gc)
    pending = {spec for spec in os.environ.get("LOOP_COST_WRAP", "").split(",") if spec}
    patched_messages = False

    def patch_late() -> None:
        """Wrap what has been imported since (the console imports Textual after start-up)."""
        nonlocal patched_messages
        pump = sys.modules.get("textual.message_pump")
        if pump is not None and not patched_messages:
            patched_messages = True
            dispatch = pump.MessagePump._dispatch_message

            async def timed_dispatch(self: Any, message: Any) -> Any:
                started = time.thread_time()
                try:
                    return await dispatch(self, message)
                finally:
                    _charge(messages, f"{type(self).__name__} {type(message).__name__}", started)

            pump.MessagePump._dispatch_message = timed_dispatch
        for spec in list(pending):
            module_name, _, attribute = spec.partition(":")
            module = sys.modules.get(module_name)
            if module is None:
                continue
            pending.discard(spec)
            owner_name, _, name = attribute.rpartition(".")
            owner = getattr(module, owner_name) if owner_name else module
            setattr(owner, name, _timed(getattr(owner, name), attribute, functions))

    def dump() -> None:
        path = f"{OUT}.{os.getpid()}.json"
        while True:
            time.sleep(DUMP_EVERY_S)
            patch_late()
            document = {
                "at": time.monotonic(),
                "process_cpu": time.process_time(),
                "handles": dict(handles),
                "messages": dict(messages),
                "functions": dict(functions),
            }
            with open(path + ".tmp", "w") as out:
                json.dump(document, out)
            os.replace(path + ".tmp", path)

    threading.Thread(target=dump, name="loop-cost", daemon=True).start()


def _timed(function: Any, name: str, table: Sums) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            _charge(table, name, started)

    return timed


if OUT:
    _install(
        defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
    )
