"""The fleet gpufleet runs, as its state records it: what every watcher watches by default.

``gpufleet status``, ``gpufleet console`` and ``gpufleet serve`` given no fleet of their own
(no ``--ports``, ``--profile``, ...) watch the GPUs the fleet state records, each on its recorded
port and host: a fleet started by ``gpufleet demo --base-port 25000`` runs on 25000-25006, and a
console watching 30000-30006 showed seven absent panels beside it. With nothing recorded, they
watch the default ports 30000-30006 on GPUs 0-6.
"""

from __future__ import annotations

from pathlib import Path

from tui.fleet.spec import FleetSpec, ServerSpec
from tui.state.fleet_state import fleet_ports, read_fleet
from tui.words import gpus_words, spans

DEFAULT_PORTS = tuple(range(30000, 30007))
"""The fleet's ports when neither the fleet state nor an option names one."""


def recorded_fleet(path: Path | None = None) -> FleetSpec | None:
    """The fleet as the state records it: each GPU on its port and host, with its server's log.

    Args:
        path: The fleet state file (default ``tui.paths.fleet_state_file()``).

    Returns:
        The spec, or None when no GPU has a recorded port.

    Raises:
        StateFileError: the state file is damaged.
        ValueError: two GPUs recorded on one port.
    """
    servers = tuple(
        ServerSpec(
            gpu,
            state.port,
            state.host,
            state.server.log_path if state.server else None,
            state.device,
        )
        for gpu, state in sorted(read_fleet(path).items())
        if state.port is not None
    )
    return FleetSpec(servers) if servers else None


def default_fleet(path: Path | None = None) -> tuple[FleetSpec, bool]:
    """The recorded fleet, else the default ports on GPUs 0, 1, ...; and whether it was recorded.

    Raises:
        StateFileError: the state file is damaged.
        ValueError: two GPUs recorded on one port.
    """
    recorded = recorded_fleet(path)
    if recorded is not None:
        return recorded, True
    return FleetSpec.from_ports(DEFAULT_PORTS), False


def fleet_words(spec: FleetSpec) -> str:
    """The fleet in a few words, for a startup line: ``ports 25000-25006 (GPUs 0-6)``, with its
    hosts when not this one's loopback."""
    hosts = sorted({s.host for s in spec.servers if s.host != "127.0.0.1"})
    where = f" on {','.join(hosts)}" if hosts else ""
    gpus = gpus_words(s.gpu_index for s in spec.servers)
    return f"ports {spans(s.port for s in spec.servers)}{where} ({gpus})"


def recorded_gpus(path: Path | None = None) -> dict[int, int]:
    """Port -> the GPU the fleet state records on it.

    Raises:
        StateFileError: the state file is damaged.
    """
    return {port: gpu for gpu, port in fleet_ports(path).items()}


def journal_gpus(spec: FleetSpec, path: Path | None = None) -> frozenset[int]:
    """The GPUs the journal names for ``spec``'s servers: the GPU the fleet state records on each
    port, else the spec's own (a fleet gpufleet never launched).

    Raises:
        StateFileError: the state file is damaged.
    """
    by_port = recorded_gpus(path)
    return frozenset(by_port.get(s.port, s.gpu_index) for s in spec.servers)
