"""What the console's command lines build of the layers above the operations core: the remote
port over many nodes' agents, the Prometheus chart source, a fleet file's check, and the
autotune search a local port starts, steers and reads (``DetachedAutotune``).

The console (``tui.ui``) reaches the fleet through ``tui.ops`` (an import-linter contract in
pyproject.toml); the agents and the autotune search sit above the operations core, so what the
console needs of them is built here, once, and handed to it as a port (``tui.ops.port.Fleet``),
a port's part (``tui.ops.local.Autotune``) or a chart source. No Textual here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from tui.ops.port import SearchStatus

if TYPE_CHECKING:
    from tui.agent.history import PrometheusChart
    from tui.agent.nodes import Nodes


def remote_port(agents: str | None, token_file: Path | None, fleet: Path | None) -> Nodes:
    """The port over the agents ``--agents host:port,...`` or ``--fleet FILE`` name.

    Args:
        agents: ``host:port,host:port`` (None with ``fleet``).
        token_file: The agents' token (default: the state directory's ``agent.token``; with a
            fleet file, the token of the agents that name none).
        fleet: A fleet file (``tui.agent.fleet_file``).

    Raises:
        ValueError: a bad address, fleet file or token (one line naming the option).
    """
    from tui.agent.cli import default_token_file
    from tui.agent.client import parse_agents
    from tui.agent.fleet_file import load_fleet
    from tui.agent.nodes import Nodes
    from tui.servers.tokens import read_token

    if fleet is not None:
        default = token_file or default_token_file()
        token = read_token(default) if token_file or default.is_file() else ""
        addresses = load_fleet(fleet, token or None)
    else:
        addresses = parse_agents(agents or "")
        token = read_token(token_file or default_token_file())
    return Nodes(addresses, token)


def prometheus_chart(url: str | None) -> PrometheusChart | None:
    """The chart source for ``--prometheus URL`` (None without it).

    Raises:
        ValueError: not an http(s) URL with a host (naming the option).
    """
    if url is None:
        return None
    from urllib.parse import urlsplit

    from tui.agent.history import PrometheusChart, PrometheusHistory

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--prometheus={url!r}: give http(s)://HOST[:PORT] of a Prometheus server")
    return PrometheusChart(PrometheusHistory(url))


def fleet_file_problem(path: Path) -> str | None:
    """Why the fleet file ``path`` cannot be used (None: it can), in one line."""
    from tui.agent.fleet_file import FleetFileError, check_fleet_file

    try:
        check_fleet_file(path)  # a FIFO or /dev/zero: refused here, not per session
    except FleetFileError as error:
        return str(error)
    return None


class DetachedAutotune:
    """The autotune search on this host, as a local port (``tui.ops.local.LocalFleet``) starts,
    steers and reads it: the detached ``gpufleet autotune start`` and its control and status
    files in the state directory (``tui.autotune.status``). Blocking."""

    def start(self, argv: Sequence[str]) -> object:
        """Start ``gpufleet autotune start ARGV`` in its own session (closing the console
        leaves it running)."""
        from tui.autotune.detach import start_detached

        return start_detached(argv)

    def steer(self, action: str) -> None:
        """Write ``action`` (pause, resume or stop) to the running search's control file.

        Raises:
            ValueError: not one of those (naming it).
        """
        from tui.autotune.status import Request, request

        request(cast(Request, action))  # checked there: one line naming the request

    def status(self) -> SearchStatus:
        """The status document (None: no search has run here) and whether its process runs.

        Raises:
            StateFileError: the document cannot be read.
        """
        from tui.autotune.status import holder_alive, read_status

        doc = read_status()
        return SearchStatus(doc, doc is not None and holder_alive(doc))
