"""A fleet file for a many-node console (``gpufleet console --fleet nodes.toml``): the agents in
the order their nodes are shown, each with its address and, when it differs from the others',
its own token file.

.. code-block:: toml

    token_file = "~/.config/gpufleet/agent.token"   # default for every agent (optional)

    [[agent]]
    address = "127.0.0.1:9401"

    [[agent]]
    address = "https://node2:9400"
    token_file = "~/.config/gpufleet/node2.token"

A file that does not fit is refused in one line naming the file, the field and what is allowed;
nothing is contacted.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tui.agent.client import AgentAddress, parse_agents
from tui.inputs import CONFIG_LIMIT, InputError, parse_toml, read_text
from tui.servers.tokens import TokenError, read_token

MAX_AGENTS = 256
"""Most agents one file may list."""


class FleetFileError(ValueError):
    """The fleet file cannot be used (one line naming the file and the field)."""


def _token(path_text: Any, field: str, source: Path) -> str:
    if not isinstance(path_text, str) or not path_text.strip():
        raise FleetFileError(f"{source}: {field}: must be the path of a token file")
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = source.parent / path  # relative to the fleet file, like Prometheus' files
    try:
        return read_token(path)
    except TokenError as error:
        raise FleetFileError(f"{source}: {field}: {error}") from None


def _read(path: Path) -> dict[str, Any]:
    try:
        text = read_text(path, CONFIG_LIMIT, "a fleet file")  # a FIFO or /dev/zero: refused
    except FileNotFoundError as error:
        raise FleetFileError(f"{path}: cannot be read ({error.strerror})") from None
    except InputError as error:
        raise FleetFileError(str(error)) from None
    try:
        return parse_toml(text)
    except ValueError as error:
        raise FleetFileError(f"{path}: not TOML ({error})") from None


def check_fleet_file(path: Path) -> None:
    """Refuse a fleet file that cannot be read as TOML (its agents are not contacted).

    Raises:
        FleetFileError: naming the file.
    """
    _read(path)


def load_fleet(path: Path, default_token: str | None) -> list[AgentAddress]:
    """The agents a fleet file lists, each with its token.

    Args:
        path: The fleet file.
        default_token: The token of agents that name none and of a file that names no default
            (``--token-file``; None: such an agent is an error).

    Returns:
        The addresses, in order, each carrying its token.

    Raises:
        FleetFileError: unreadable, not TOML, an unknown key, a bad address or token file.
    """
    data = _read(path)
    unknown = sorted(set(data) - {"token_file", "agent"})
    if unknown:
        raise FleetFileError(f"{path}: {unknown[0]}: unknown key (allowed: token_file, agent)")
    if "token_file" in data:
        default_token = _token(data["token_file"], "token_file", path)
    agents = data.get("agent")
    if not isinstance(agents, list) or not agents or len(agents) > MAX_AGENTS:
        raise FleetFileError(f"{path}: agent: give 1-{MAX_AGENTS} [[agent]] tables")
    out: list[AgentAddress] = []
    for i, entry in enumerate(agents):
        field = f"agent[{i}]"
        if not isinstance(entry, dict):
            raise FleetFileError(f"{path}: {field}: must be a table")
        extra = sorted(set(entry) - {"address", "token_file"})
        if extra:
            raise FleetFileError(
                f"{path}: {field}.{extra[0]}: unknown key (allowed: address, token_file)"
            )
        address = entry.get("address")
        if not isinstance(address, str) or "," in address:
            raise FleetFileError(f"{path}: {field}.address: must be one HOST[:PORT]")
        try:
            (parsed,) = parse_agents(address)
        except ValueError as error:
            raise FleetFileError(f"{path}: {field}.address: {error}") from None
        if "token_file" in entry:
            token = _token(entry["token_file"], f"{field}.token_file", path)
        elif default_token is not None:
            token = default_token
        else:
            raise FleetFileError(f"{path}: {field}.token_file: no token (and no default)")
        out.append(replace(parsed, token=token))
    if len({a.label for a in out}) != len(out):
        raise FleetFileError(f"{path}: agent: an agent is listed twice")
    return out
