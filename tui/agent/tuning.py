"""The tuning form of a many-node console: the running profile read from a node's agent, the
edited profile checked by the node's own preflight (its calibration, its verdict) and saved on
the node, all through the agents. The apply that follows is the console's usual one (the plan's
GPUs go to ``Nodes.apply_profile``, each node applying the profile it now has).

The form works in the console's GPU numbers: a node's profile is shown with its GPUs (and
``[gpu.N]`` overrides) renumbered ``node position * NODE_STRIDE + N``; its ports stay the node's
own (they are unique within one node, which is all a profile needs). ``t`` tunes one GPU: the
profile of that GPU's node. ``T`` tunes every node: the form shows the first answering node's
profile; what is saved on each node is that node's own profile with the form's shared flags and
name, so each keeps its GPUs, ports, engine and overrides; the plan covers every node's GPUs. A
node that refuses or does not answer is named in the result, the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TypeVar

import httpx

from tui.agent.client import AgentAddress, AgentClient, AgentError
from tui.fleet.snapshot import NODE_STRIDE
from tui.ops.commands import Saved
from tui.profiles import Profile
from tui.retune.preflight import Preflight

T = TypeVar("T")

TIMEOUT_S = 10.0
"""Seconds one agent may take to answer a tuning request."""


def renumber(profile: Profile, offset: int) -> Profile:
    """``profile`` with every GPU number (its GPUs and its overrides) moved by ``offset``.

    Args:
        profile: A node's profile (its own numbers) or the console's view of it.
        offset: ``+position * NODE_STRIDE`` to show it, the negative to send it back.

    Returns:
        The renumbered profile (ports, flags and everything else unchanged).
    """
    if offset == 0:
        return profile
    return replace(
        profile,
        gpus=tuple(g + offset for g in profile.gpus),
        overrides=tuple(replace(o, gpu=o.gpu + offset) for o in profile.overrides),
    )


class NodesTuning:
    """The tuning form's backend over some nodes of a many-node console.

    Args:
        addresses: Every node's agent, by position.
        token: The agents' bearer token.
        positions: The nodes this form tunes (one for ``t``, all for ``T``).
        current: Node position -> the profile its GPU (or most of its GPUs) runs, from the poll;
            a node missing here is asked.
        names: Node position -> the node's name (its errors name it; default its address).
        http: The console's HTTP client, kept open for its life (its connections to the agents
            stay open between keystrokes): the preflight, which runs on the console's loop at
            each keystroke, goes through it. None: a client per preflight (a caller without
            one, such as a test on another loop).
    """

    def __init__(
        self,
        addresses: Sequence[AgentAddress],
        token: str,
        positions: Sequence[int],
        current: dict[int, str] | None = None,
        names: dict[int, str] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._shared = http
        self._addresses = list(addresses)
        self._names = dict(names or {})
        self._token = token
        self.positions = tuple(positions)
        """The nodes this form tunes."""
        self._current = dict(current or {})
        self._running: dict[int, Profile] = {}
        """Node position -> its running profile (its own numbers), once read."""
        self._unread: dict[int, str] = {}
        """Node position -> why its running profile could not be read."""
        self._primary: int | None = None
        self._unsaved: set[int] = set()
        """Nodes whose save failed (an Apply leaves them out: they lack the profile)."""

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT_S, connect=3.0))

    def _client(self, http: httpx.AsyncClient, position: int) -> AgentClient:
        client = AgentClient(self._addresses[position], self._token, http)
        client.node = self._names.get(position, client.node)
        return client

    async def _gather(
        self, call: Callable[[AgentClient], Awaitable[T]]
    ) -> dict[int, T | AgentError]:
        """``call`` on every node of the form at once: position -> its answer or its error."""
        async with self._http() as http:
            answers = await asyncio.gather(
                *(call(self._client(http, p)) for p in self.positions), return_exceptions=True
            )
        out: dict[int, T | AgentError] = {}
        for position, answer in zip(self.positions, answers, strict=True):
            if isinstance(answer, BaseException) and not isinstance(answer, AgentError):
                raise answer
            out[position] = answer
        return out

    # --- what the form reads (blocking: the form calls these from a thread) -------------------

    def profile_names(self) -> list[str]:
        """Profiles every answering node of the form has. Blocking.

        Raises:
            AgentError: no node answers (naming each).
        """
        answers = asyncio.run(self._gather(lambda c: c.profiles()))
        good = [a for a in answers.values() if not isinstance(a, AgentError)]
        if not good:
            raise AgentError("; ".join(str(a) for a in answers.values()))
        for position, answer in answers.items():
            if not isinstance(answer, AgentError) and answer[1] and position not in self._current:
                self._current[position] = answer[1]
        common = set(good[0][0]).intersection(*(set(names) for names, _ in good[1:]))
        return sorted(common)

    def current_profile(self) -> str | None:
        """The profile the tuned GPU's node runs (``T``: the one most nodes run). Blocking."""
        names = [self._current[p] for p in self.positions if p in self._current]
        return max(set(names), key=names.count) if names else None

    def load_profile(self, name: str) -> Profile:
        """Every node's own profile ``name``; the form shows the first one read, renumbered.
        Blocking.

        Raises:
            AgentError: no node could give it (naming each node and why).
        """
        answers = asyncio.run(self._gather(lambda c: c.profile(name)))
        self._running = {p: a for p, a in answers.items() if isinstance(a, Profile)}
        self._unread = {p: str(a) for p, a in answers.items() if isinstance(a, AgentError)}
        if not self._running:
            raise AgentError("; ".join(self._unread.values()))
        self._primary = min(self._running)
        return renumber(self._running[self._primary], self._primary * NODE_STRIDE)

    def save_profile(self, profile: Profile) -> Saved:
        """Save the form's profile on every node it tunes (each node's own version). Blocking.

        Returns:
            Where each node saved it, and each node that did not and why.

        Raises:
            AgentError: no node saved it (naming each and why).
        """

        async def save(client: AgentClient) -> str:
            position = self._position_of(client)
            version = self.version(position, profile)
            return f"{client.node}:{await client.save_profile(version)}"

        answers = asyncio.run(self._gather(save))
        self._unsaved = {p for p, a in answers.items() if isinstance(a, AgentError)}
        saved = tuple(a for a in answers.values() if not isinstance(a, AgentError))
        failed = tuple(str(a) for a in answers.values() if isinstance(a, AgentError))
        if not saved:
            raise AgentError("; ".join(failed))
        return Saved(saved, failed)

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        """Each node's preflight of its version of ``profile`` on its GPUs among ``gpus``
        (console numbers), in the console's numbers.

        Raises:
            AgentError: a node refused or did not answer (naming it and why).
        """
        groups: dict[int, list[int]] = {}
        for gpu in gpus:
            groups.setdefault(gpu // NODE_STRIDE, []).append(gpu % NODE_STRIDE)
        async with contextlib.AsyncExitStack() as stack:
            # A new client per keystroke cost a connection (and its setup) per node each time:
            # 140-250 ms a keystroke through an agent whose own preflight takes 0.7 ms.
            http = self._shared
            if http is None:
                http = await stack.enter_async_context(self._http())

            async def one(position: int) -> list[Preflight]:
                version = self.version(position, profile)
                items = await self._client(http, position).preflight(version, groups[position])
                offset = position * NODE_STRIDE
                return [replace(item, gpu=item.gpu + offset) for item in items]

            answers = await asyncio.gather(*(one(p) for p in groups), return_exceptions=True)
        errors = [str(a) for a in answers if isinstance(a, BaseException)]
        if errors:
            raise AgentError("; ".join(errors))
        return [item for a in answers if not isinstance(a, BaseException) for item in a]

    def targets(self, gpus: tuple[int, ...]) -> tuple[int, ...]:
        """The GPUs an Apply of the form restarts: with ``T`` and every GPU of the shown
        profile, every GPU of every node whose profile was read and, once saved, that saved it;
        else ``gpus``."""
        if self._primary is None or len(self.positions) == 1:
            return gpus
        shown = {g + self._primary * NODE_STRIDE for g in self._running[self._primary].gpus}
        if set(gpus) != shown:
            return gpus
        nodes = {p: prof for p, prof in self._running.items() if p not in self._unsaved}
        return tuple(sorted(p * NODE_STRIDE + g for p, prof in nodes.items() for g in prof.gpus))

    def gpu_label(self, gpu: int) -> str:
        """The console GPU ``gpu`` in a profile name: its node's name and its own number
        (``n2-gpu1``), as the node saves and lists it; the console's number (101) means
        nothing on the node."""
        position, local = gpu // NODE_STRIDE, gpu % NODE_STRIDE
        name = self._names.get(position) or self._addresses[position].host
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or f"node{position}"
        return f"{safe}-gpu{local}"

    # --- each node's version ------------------------------------------------------------------

    def _position_of(self, client: AgentClient) -> int:
        return next(p for p, a in enumerate(self._addresses) if a == client.address)

    def version(self, position: int, shown: Profile) -> Profile:
        """What node ``position`` gets of the form's profile: the shown node gets it as edited
        (its numbers); another its own running profile with the form's name and shared flags.

        Raises:
            AgentError: the node's running profile was not read.
        """
        if position == self._primary:
            return renumber(shown, -position * NODE_STRIDE)
        own = self._running.get(position)
        if own is None:
            label = self._names.get(position, self._addresses[position].label)
            raise AgentError(self._unread.get(position) or f"node {label}: its profile is unread")
        return replace(own, name=shown.name, note=shown.note, server=shown.server)
