"""Dispatch prompts to the fleet: bounded in flight per server, least-loaded, health aware.

``tui.pipeline.sender`` carries the requests (a lean keep-alive HTTP/1.1 path to plain
``http://`` servers, httpx to the others). A server that refuses connections, answers 5xx/429 or
times out is marked down: it gets no new work, its other in-flight requests are cancelled and go
back to the front of the queue (they are retried elsewhere at once; a connection failure is the
server's fault, not the prompt's, so it does not use up the prompt's retries), and a background
probe polls ``GET /health`` with backoff until it answers 200. Errors that may be the prompt's
(4xx, a malformed answer, 5xx, timeouts) count against ``max_retries``, with exponential backoff;
past that the prompt is reported failed.

SGLang 0.5.23 answers ``/health`` (one handler with ``/health_generate``,
``srt/entrypoints/http_server.py``) by generating one token and sleeping a whole second before
its first check, for up to ``SGLANG_HEALTH_CHECK_TIMEOUT`` (20 s) before a 503: the probe waits
``HEALTH_TIMEOUT_S`` for an answer, so a slow 200 is "up", never "down".

Cordons (``tui.state.cordons``): before it picks a server for a request the dispatcher reads the
cordon file (a stat call unless it changed) and sends a cordoned server nothing new; what it has
in flight finishes normally (SGLang's drain waits for exactly that). When the cordon is lifted the
server is probed again (it may have been restarted meanwhile) and gets work once it answers 200.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from tui.pipeline.batch_input import Prompt, request_for
from tui.pipeline.prompts import PromptFile, PromptFileError
from tui.pipeline.sender import Route, Sender, lean_route
from tui.servers.probe import HEALTH_TIMEOUT_S
from tui.state.cordons import CordonWatch, address_of

GATEWAY_STATUSES = (502, 503, 504)
"""A router's answers when the worker behind it failed (not the prompt's fault)."""
GATEWAY_RETRIES = 50
"""How often a prompt may get a gateway error from a router before it counts as its own."""
CORDON_RECHECK_S = 0.2
"""While a server is cordoned and nothing else can take work, how often the cordon is re-read."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A 200 answer to one prompt, handed to the result sink."""

    position: int
    """The prompt's position in the prompts file."""
    prompt: Prompt
    """The prompt."""
    content: bytes
    """The response body."""
    server: str
    """Base URL of the server that answered."""
    started_at: float
    """``time.time()`` when the request was sent."""
    latency: float
    """Seconds until the whole answer arrived."""


ResultSink = Callable[[Answer], int]
"""on_result(answer) -> completion tokens; raises ValueError/KeyError/IndexError/TypeError when
the answer is not a completion (the attempt then counts as failed)."""
FailureSink = Callable[[int, str, int], None]
"""on_failed(position, reason, attempts)."""
ChangeSink = Callable[[str], None]
"""on_input_changed(problem): a prompt read back is not the one scanned (the file changed)."""


def server_address(url: str) -> str:
    """The cordon key (``host:port``, loopback folded) of a server's base URL."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return address_of(parts.hostname or "", port)


@dataclass(slots=True)
class ServerState:
    """Live dispatch state of one server (mutable; the status document copies it)."""

    url: str
    """Base URL, no trailing slash."""
    capacity: int
    """Most requests in flight at once."""
    address: str = ""
    """Its cordon key (``host:port``)."""
    in_flight: int = 0
    """Requests outstanding now."""
    healthy: bool = False
    """Whether its last health probe (or request) says it is up."""
    cordoned: bool = False
    """Whether it is closed to new work by a cordon (its in-flight requests go on)."""
    done: int = 0
    """Requests it completed in this run."""
    failed: int = 0
    """Attempts that failed on it."""
    output_tokens: int = 0
    """Completion tokens it produced in this run."""
    last_error: str = ""
    """Why it was last marked down."""
    tasks: dict[asyncio.Task[None], int] = field(default_factory=dict)
    """In-flight request tasks and their prompt position."""
    probe: asyncio.Task[None] | None = None
    """The running health probe, if any."""
    route: Route | None = None
    """How the lean transport reaches it (``tui.pipeline.sender.lean_route``); None: httpx."""


class Dispatcher:
    """Sends every pending prompt until each has a result or is recorded as failed."""

    def __init__(
        self,
        urls: list[str],
        prompts: PromptFile,
        *,
        per_server_inflight: int,
        model: str,
        max_tokens: int,
        max_retries: int,
        on_result: ResultSink,
        on_failed: FailureSink,
        on_input_changed: ChangeSink | None = None,
        request_timeout: float = 600.0,
        cordons: CordonWatch | None = None,
        gateway: bool = False,
    ) -> None:
        """Args: see the attribute names; urls are base URLs of OpenAI-compatible servers;
        cordons: the cordon file to honour (default ``tui.paths.cordon_file()``);
        gateway: the one URL is a router (``sglang-router``): its 502/503/504 mean a worker
        behind it failed, so the prompt is sent again without using up its retries and the
        router is not marked down (its other requests go on);
        on_input_changed: told when a prompt read back is not the one scanned (the prompts file
        changed): that is no failure of the prompt (None: it is recorded as one)."""
        self.servers = [
            ServerState(
                url.rstrip("/"), per_server_inflight, server_address(url), route=lean_route(url)
            )
            for url in urls
        ]
        """One state per server."""
        self.cordons = cordons or CordonWatch()
        """The cordon file, re-read when it changes."""
        self._prompts = prompts
        self._model = model
        self._max_tokens = max_tokens
        self._max_retries = max_retries
        self._on_result = on_result
        self._on_failed = on_failed
        self._on_input_changed = on_input_changed
        unrouted = sum(s.route is None for s in self.servers)
        self._sender = Sender(unrouted, per_server_inflight, request_timeout)
        self._retry: collections.deque[int] = collections.deque()
        self._fresh: Iterator[int] = iter(())
        self._attempts: dict[int, int] = {}
        self._gateway = gateway
        self._gateway_tries: dict[int, int] = {}
        self._unresolved = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._delayed: set[asyncio.TimerHandle] = set()
        self.on_closed: Callable[[frozenset[str]], None] | None = None
        """Told, at each read of the cordons, which servers get nothing new now (the job's
        acknowledgement of a cordon, ``tui.state.cordon_acks``)."""

    @property
    def in_flight(self) -> int:
        """Requests outstanding on all servers."""
        return sum(s.in_flight for s in self.servers)

    def start_probes(self) -> None:
        """Probe every server's /health in the background; each becomes healthy on a 200."""
        for server in self.servers:
            self._ensure_probe(server)

    @property
    def any_healthy(self) -> bool:
        """Whether some server is getting work now."""
        return any(s.healthy for s in self.servers)

    async def wait_any_healthy(self, deadline_s: float) -> bool:
        """Wait until some server is healthy or the deadline passes; True when one is."""
        end = time.monotonic() + deadline_s
        while not self.any_healthy:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return False
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=min(remaining, 0.5))
        return True

    async def run(self, pending: Iterator[int], count: int) -> None:
        """Dispatch ``count`` prompts from ``pending`` until all are resolved or stop() is called.

        Args:
            pending: the indices to generate, lazily (each is used once).
            count: how many it yields.
        """
        self._fresh = pending
        self._unresolved = count
        while not self._stopping and self._unresolved > 0:
            server = self._pick()
            index = self._next_index() if server is not None else None
            if server is None or index is None:
                self._wake.clear()
                if server is None and any(s.cordoned for s in self.servers):
                    # Nothing signals a lifted cordon but the file: look again shortly.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), CORDON_RECHECK_S)
                else:
                    await self._wake.wait()
                continue
            server.in_flight += 1
            task = asyncio.create_task(self._send(server, index))
            server.tasks[task] = index

    def stop(self) -> None:
        """Stop dispatching and cancel every in-flight request (their prompts stay undone)."""
        self._stopping = True
        for handle in self._delayed:
            handle.cancel()
        for server in self.servers:
            for task in list(server.tasks):
                server.tasks.pop(task, None)
                server.in_flight -= 1
                task.cancel()
            if server.probe is not None:
                server.probe.cancel()
        self._wake.set()

    async def aclose(self) -> None:
        """Close the HTTP connections and clients."""
        await self._sender.aclose()

    def refresh_cordons(self) -> None:
        """Re-read the cordon file (a stat unless it changed) and update each server's flag.

        A lifted cordon sends the server back to its health probe: it may have been restarted
        while cordoned, and it gets work again once the probe answers 200.
        """
        cordoned = self.cordons.current()
        for server in self.servers:
            now = server.address in cordoned
            if server.cordoned and not now:
                server.healthy = False
                self._ensure_probe(server)
            server.cordoned = now
        if self.on_closed is not None:
            self.on_closed(frozenset(s.address for s in self.servers if s.cordoned))

    def _pick(self) -> ServerState | None:
        self.refresh_cordons()
        best: ServerState | None = None
        for server in self.servers:
            free = server.healthy and not server.cordoned and server.in_flight < server.capacity
            if free and (best is None or server.in_flight < best.in_flight):
                best = server
        return best

    def _next_index(self) -> int | None:
        if self._retry:
            return self._retry.popleft()
        return next(self._fresh, None)

    def _requeue(self, index: int, delay: float) -> None:
        if self._stopping:
            return
        if delay <= 0:
            self._retry.appendleft(index)
            self._wake.set()
            return
        loop = asyncio.get_running_loop()

        def due() -> None:
            self._delayed.discard(handle)
            self._retry.append(index)
            self._wake.set()

        handle = loop.call_later(delay, due)
        self._delayed.add(handle)

    async def _send(self, server: ServerState, index: int) -> None:
        task = asyncio.current_task()
        try:
            try:
                prompt = self._prompts.read(index)
            except PromptFileError as exc:
                self._unresolved -= 1
                if self._on_input_changed is not None:
                    self._on_input_changed(str(exc))
                else:
                    self._on_failed(index, str(exc), 1)
                return
            if server.cordoned:
                # Cordoned since it was picked (a busy loop runs a task late), and the job has
                # told the stop it sends nothing new there: the prompt goes elsewhere. Sent now,
                # it would reach a server whose drain may already have ended (SGLang then waits
                # for it with its scheduler gone, until the stop's deadline).
                self._requeue(index, 0)
                return
            path, body = request_for(prompt, self._model, self._max_tokens)
            started_at = time.time()
            t0 = time.perf_counter()
            try:
                status, content = await self._sender.post(server.url, server.route, path, body)
            except httpx.TimeoutException as exc:
                self._attempt_failed(server, index, f"timeout: {type(exc).__name__}", down=True)
                return
            except httpx.TransportError as exc:
                # The server is gone (killed, restarting): not the prompt's fault.
                server.failed += 1
                self._mark_down(server, f"{type(exc).__name__}: {exc}", exclude=task)
                self._requeue(index, 0)
                return
            latency = time.perf_counter() - t0
            if self._gateway and status in GATEWAY_STATUSES and self._gateway_retry(server, index):
                return
            if status != 200:
                down = status >= 500 or status == 429
                reason = f"HTTP {status}: {content[:400].decode(errors='replace')[:200]}"
                self._attempt_failed(server, index, reason, down=down, exclude=task)
                return
            answer = Answer(index, prompt, content, server.url, started_at, latency)
            try:
                tokens = self._on_result(answer)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                self._attempt_failed(server, index, f"malformed response: {exc}", down=False)
                return
            self._gateway_tries.pop(index, None)
            server.done += 1
            server.output_tokens += tokens
            self._unresolved -= 1
        except asyncio.CancelledError:
            pass  # marked down (its index was requeued) or stopping
        finally:
            # Whoever removes the task from server.tasks accounts for its slot (a task cancelled
            # before it started never runs this block).
            if task is not None and server.tasks.pop(task, None) is not None:
                server.in_flight -= 1
            self._wake.set()

    def _gateway_retry(self, server: ServerState, index: int) -> bool:
        """Send ``index`` again shortly, unless it has had ``GATEWAY_RETRIES`` of these."""
        tries = self._gateway_tries.get(index, 0) + 1
        if tries > GATEWAY_RETRIES:
            return False
        self._gateway_tries[index] = tries
        server.failed += 1
        self._requeue(index, min(0.1 * tries, 2.0))
        return True

    def _attempt_failed(
        self,
        server: ServerState,
        index: int,
        reason: str,
        *,
        down: bool,
        exclude: asyncio.Task[None] | None = None,
    ) -> None:
        server.failed += 1
        if down:
            self._mark_down(server, reason, exclude=exclude or asyncio.current_task())
        attempts = self._attempts.get(index, 0) + 1
        if attempts > self._max_retries:
            self._attempts.pop(index, None)
            self._unresolved -= 1
            self._on_failed(index, f"{reason} (on {server.url})", attempts)
            return
        self._attempts[index] = attempts
        self._requeue(index, min(0.05 * 2 ** (attempts - 1), 5.0))

    def _mark_down(
        self, server: ServerState, reason: str, exclude: asyncio.Task[None] | None
    ) -> None:
        server.last_error = reason
        if server.healthy:
            server.healthy = False
            for task, index in list(server.tasks.items()):
                if task is not exclude:
                    server.tasks.pop(task, None)
                    server.in_flight -= 1
                    task.cancel()
                    self._requeue(index, 0)
        self._ensure_probe(server)

    def _ensure_probe(self, server: ServerState) -> None:
        if self._stopping or (server.probe is not None and not server.probe.done()):
            return
        server.probe = asyncio.create_task(self._probe(server))

    async def _probe(self, server: ServerState) -> None:
        delay = 0.05
        while not self._stopping:
            if server.cordoned:
                # Not even /health: on SGLang 0.5.23 it generates, and a drain waits for it.
                await asyncio.sleep(CORDON_RECHECK_S)
                continue
            try:
                status = await self._sender.health(server.url, server.route)
                if status == 200:
                    server.healthy = True
                    self._wake.set()
                    return
                server.last_error = f"/health answered {status}"
            except httpx.TimeoutException:
                server.last_error = f"/health: no answer within {HEALTH_TIMEOUT_S:g} s"
            except httpx.HTTPError as exc:
                server.last_error = f"/health: {type(exc).__name__}"
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
