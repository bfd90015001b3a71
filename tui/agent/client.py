"""A client of one node's agent: its snapshot, its operations (events streamed by long polls),
its profiles, journal and logs. Used by the many-node console and by ``gpufleet generate``.

Every failure is an ``AgentError`` in one line naming the node: unreachable, refused (401, 403,
400 with the agent's reason), or an operation that failed or was refused on the node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import httpx

from tui.agent.codec import CodecError, decode, encode_command, result_type
from tui.fleet.snapshot import FleetSnapshot
from tui.ops.alerts.engine import AlertFired
from tui.ops.commands import Op
from tui.ops.events import OpEvent
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus
from tui.profiles import Profile, ProfileError, profile_from_dict, profile_to_dict
from tui.retune.preflight import Preflight
from tui.rollout.sampling import Counts

R = TypeVar("R")

LONG_POLL_S = 10
"""Seconds an operation's status request waits for something new."""
SNAPSHOT_TIMEOUT_S = 2.0
"""A snapshot that takes longer marks the node unreachable for this poll (``tui.agent.nodes``:
the request goes on, and its answer is taken at a later poll)."""
SNAPSHOT_GIVE_UP_S = 30.0
"""A snapshot request that takes longer than this has failed."""
DEFAULT_AGENT_PORT = 9400
"""The agent's port when an address names none."""


def _counts(value: Any) -> Counts | None:
    """One GPU's counters as an agent sends them: null, [tokens, requests] (an agent before the
    load was read), or [tokens, requests, running, queued].

    Raises:
        ValueError: any other length (the caller names the document).
    """
    if value is None:
        return None
    if len(value) == 2:
        return float(value[0]), float(value[1])
    if len(value) == 4:
        return float(value[0]), float(value[1]), float(value[2]), float(value[3])
    raise ValueError(f"{len(value)} values, not 2 or 4")


class AgentError(RuntimeError):
    """The agent could not be reached, refused, or its operation failed (one line, naming the
    node)."""


@dataclass(frozen=True, slots=True)
class AgentAddress:
    """Where one agent answers."""

    host: str
    """Host name or address."""
    port: int
    """Port."""
    scheme: str = "http"
    """http, or https for an agent serving TLS."""
    token: str | None = field(default=None, repr=False, compare=False)
    """This agent's own token (a fleet file's ``token_file``); None: the console's."""

    @property
    def base_url(self) -> str:
        """``scheme://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def label(self) -> str:
        """``host:port``, for headings and errors."""
        return f"{self.host}:{self.port}"


def parse_agents(text: str) -> list[AgentAddress]:
    """``node1:9400,node2:9400`` (or ``https://node1:9400``) as addresses.

    Raises:
        ValueError: naming ``--agents``, the entry and the form allowed.
    """
    out: list[AgentAddress] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        url = entry if "://" in entry else f"http://{entry}"
        try:
            parts = urlsplit(url)
            port = parts.port or DEFAULT_AGENT_PORT
        except ValueError:
            port, parts = -1, urlsplit("http://")
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or port < 1
            or parts.path not in ("", "/")
        ):
            raise ValueError(
                f"--agents: {entry!r} is not HOST[:PORT] or http(s)://HOST[:PORT] (port 1-65535)"
            )
        out.append(AgentAddress(parts.hostname, port, parts.scheme))
    if not out:
        raise ValueError("--agents: give at least one HOST:PORT")
    if len({a.label for a in out}) != len(out):
        raise ValueError("--agents: an agent is named twice")
    return out


@dataclass(frozen=True, slots=True)
class NodeView:
    """One agent's answer to a snapshot request."""

    node: str
    """The node's name."""
    readonly: bool
    """The agent refuses writes."""
    snapshot: FleetSnapshot
    """Its fleet snapshot (its own GPU numbers)."""
    profiles: dict[int, str] = field(default_factory=dict)
    """GPU -> the profile it runs."""
    pipeline: PipelineStatus | None = None
    """The job's status document on that node, if any."""
    polled_at: float = 0.0
    """When the agent built the view."""
    previous: dict[int, str] = field(default_factory=dict)
    """GPU -> the profile it ran before (what a rollback returns to)."""
    alerts: tuple[AlertFired, ...] = ()
    """The node's alerts firing now, in its own words and GPU numbers (its agent runs, journals
    and posts them; an agent that sends none: none)."""
    job_energy: JobEnergy | None = None
    """The energy ledger beside the job's status document on that node (None: none, or an
    agent that does not send it)."""


Remap = Callable[[Any], Any]
"""Turns a decoded value's node-local GPU numbers into the console's (identity by default)."""


class AgentClient:
    """Talks to one agent.

    Args:
        address: Where it answers.
        token: The bearer token.
        client: The HTTP client to use (shared by the clients of a console).
    """

    def __init__(self, address: AgentAddress, token: str, client: httpx.AsyncClient) -> None:
        self.address = address
        """Where the agent answers."""
        self.node = address.label
        """The node's name once known (its address until its first answer)."""
        self._headers = {"authorization": f"Bearer {address.token or token}"}
        self._client = client

    def _url(self, path: str) -> str:
        return self.address.base_url + path

    def _fail(self, what: str) -> AgentError:
        return AgentError(f"node {self.node}: {what}")

    async def _request(
        self, method: str, path: str, *, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        try:
            response = await self._client.request(
                method,
                self._url(path),
                headers=self._headers,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
                **kwargs,
            )
        except httpx.TimeoutException:
            raise self._fail(f"agent {self.address.label} did not answer in time") from None
        except httpx.HTTPError as error:
            raise self._fail(
                f"agent {self.address.label} unreachable ({type(error).__name__})"
            ) from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            reason = body.get("error") if isinstance(body, dict) else None
            raise self._fail(f"HTTP {response.status_code}: {reason or response.text[:200]}")
        return body

    async def snapshot(self) -> NodeView:
        """The agent's newest view.

        Raises:
            AgentError: unreachable, refused, or an answer that is not a snapshot.
        """
        body = await self._request("GET", "/api/v1/snapshot", timeout=SNAPSHOT_GIVE_UP_S)
        try:
            view = NodeView(
                node=str(body["node"]),
                readonly=bool(body.get("readonly", False)),
                snapshot=decode(body["snapshot"], FleetSnapshot, "snapshot"),
                profiles={int(g): str(n) for g, n in (body.get("profiles") or {}).items()},
                pipeline=(
                    decode(body["pipeline"], PipelineStatus, "pipeline")
                    if body.get("pipeline")
                    else None
                ),
                polled_at=float(body.get("polled_at") or 0.0),
                previous={int(g): str(n) for g, n in (body.get("previous") or {}).items()},
                alerts=tuple(
                    decode(alert, AlertFired, f"alerts[{i}]")
                    for i, alert in enumerate(body.get("alerts") or ())
                ),
                job_energy=(
                    decode(body["job_energy"], JobEnergy, "job_energy")
                    if body.get("job_energy")
                    else None
                ),
            )
        except (CodecError, KeyError, TypeError, ValueError) as error:
            raise self._fail(f"its snapshot does not fit ({error})") from None
        self.node = view.node
        return view

    async def profiles(self) -> tuple[list[str], str | None]:
        """The node's profile names and the one most of its GPUs run."""
        body = await self._request("GET", "/api/v1/profiles")
        return [str(n) for n in body.get("names", [])], body.get("current")

    async def journal(self, last: int = 200) -> list[dict[str, Any]]:
        """The node's newest journal entries, encoded."""
        body = await self._request("GET", "/api/v1/journal", params={"last": last})
        return list(body.get("entries", []))

    async def logs(self, gpu: int, lines: int = 200) -> list[str]:
        """The last lines of the server log of the node's GPU ``gpu``."""
        body = await self._request("GET", f"/api/v1/logs/{gpu}", params={"lines": lines})
        return [str(line) for line in body.get("lines", [])]

    async def counters(self, gpus: list[int]) -> dict[int, Counts | None]:
        """The node's GPUs' cumulative (output tokens, finished requests), and their running and
        queued requests where the node reads them (an older agent sends the first two alone),
        read now (None: the server did not answer).

        Raises:
            AgentError: unreachable or slow (``SNAPSHOT_TIMEOUT_S``), refused, or an answer
                that does not fit.
        """
        body = await self._request(
            "GET",
            "/api/v1/counters",
            params={"gpus": ",".join(str(g) for g in gpus)},
            timeout=SNAPSHOT_TIMEOUT_S + 1.0,
        )
        try:
            return {int(g): _counts(v) for g, v in body["counters"].items()}
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            raise self._fail(f"its counters do not fit ({error})") from None

    async def profile(self, name: str) -> Profile:
        """The node's profile ``name`` as it launches it.

        Raises:
            AgentError: unreachable, refused, no such profile, or a document that does not fit.
        """
        body = await self._request("GET", f"/api/v1/profiles/{name}")
        try:
            return profile_from_dict(body["profile"], default_name=name, source=f"{name} on node")
        except (ProfileError, KeyError, TypeError) as error:
            raise self._fail(" ".join(f"its profile does not fit ({error})".split())) from None

    async def save_profile(self, profile: Profile) -> str:
        """Save ``profile`` on the node under its name; returns the path the node wrote.

        Raises:
            AgentError: unreachable, refused (read-only: 403; a bad profile: 400 naming why).
        """
        body = await self._request(
            "PUT", f"/api/v1/profiles/{profile.name}", json={"profile": profile_to_dict(profile)}
        )
        return str(body.get("path", ""))

    async def preflight(self, profile: Profile, gpus: list[int]) -> list[Preflight]:
        """The node's preflight of ``profile`` on its GPUs ``gpus`` (its own calibration).

        Raises:
            AgentError: unreachable, refused (400 naming why), or an answer that does not fit.
        """
        body = await self._request(
            "POST",
            "/api/v1/preflight",
            json={"profile": profile_to_dict(profile), "gpus": gpus},
        )
        try:
            return [decode(item, Preflight, "preflight") for item in body["preflight"]]
        except (CodecError, KeyError, TypeError) as error:
            raise self._fail(f"its preflight does not fit ({error})") from None

    async def autotune_status(self) -> dict[str, Any]:
        """The node's autotune status: ``status`` (the document or None) and ``running``."""
        body = await self._request("GET", "/api/v1/autotune")
        return dict(body) if isinstance(body, dict) else {}

    async def autotune(self, action: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start (with ``options``, the CLI's as JSON names), pause, resume or stop the node's
        search.

        Raises:
            AgentError: refused (400 naming the option, 403 read-only, 409 none or one running).
        """
        request: dict[str, Any] = {"action": action}
        if options is not None:
            request["options"] = options
        body = await self._request("POST", "/api/v1/autotune", json=request, timeout=45.0)
        return dict(body) if isinstance(body, dict) else {}

    async def pipeline(self, action: str) -> dict[str, Any]:
        """Stop the node's job, or start again the one this agent stopped.

        Raises:
            AgentError: refused (403 read-only; 409 nothing to stop, already running, or a job
                the agent cannot start, with why).
        """
        body = await self._request(
            "POST", "/api/v1/pipeline", json={"action": action}, timeout=60.0
        )
        return dict(body) if isinstance(body, dict) else {}

    async def run(
        self,
        command: Op[R],
        on_event: Callable[[OpEvent], None] | None = None,
        remap: Remap = lambda value: value,
    ) -> R:
        """Run a command on the node (its own port) and follow it to its end.

        Args:
            command: The command, in the node's own GPU numbers.
            on_event: Receives each event, decoded and remapped, in order.
            remap: Applied to every event and to the result.

        Returns:
            The decoded, remapped result (``Op[R]``'s ``R``).

        Raises:
            AgentError: the command cannot cross the API, was refused, or failed or was
                refused on the node (with the node's reason).
        """
        try:
            request = encode_command(command)
        except CodecError as error:
            raise self._fail(str(error)) from None
        started = await self._request("POST", "/api/v1/operations", json=request)
        op_id = str(started["id"])
        after = 0
        while True:
            doc = await self._request(
                "GET",
                f"/api/v1/operations/{op_id}",
                params={"after": after, "wait": LONG_POLL_S},
                timeout=LONG_POLL_S + 10,
            )
            for encoded in doc.get("events", []):
                try:
                    event = decode(encoded, OpEvent, "event")
                except CodecError:
                    continue  # an event type this console does not know: skip it, keep going
                if on_event is not None:
                    on_event(remap(event))
            after = int(doc.get("next", after))
            state = doc.get("state")
            if state == "running":
                await asyncio.sleep(0)
                continue
            if state != "done":
                raise self._fail(f"{request.get('kind')} {state}: {doc.get('error')}")
            result = doc.get("result")
            try:
                hint = result_type(type(command))
                done = remap(decode(result, hint, "result")) if result is not None else None
                return cast(R, done)
            except CodecError as error:
                raise self._fail(f"its result does not fit ({error})") from None
