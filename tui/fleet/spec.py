"""What fleet to watch: per GPU, the server's port, host and log path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server of the fleet."""

    gpu_index: int
    """The GPU it runs on."""
    port: int
    """Its HTTP port."""
    host: str = "127.0.0.1"
    """Where it listens; processes are only looked for when this is a local address."""
    log_path: str | None = None
    """Its log file, when known (else found from the process's stdout)."""
    device: int | None = None
    """The physical GPU it runs on when not ``gpu_index`` (slots sharing one card: its panel
    shows that card's readings). None: ``gpu_index``."""

    def __post_init__(self) -> None:
        if not 0 <= self.gpu_index <= 255:
            raise ValueError(f"gpu_index={self.gpu_index} is out of range; allowed 0..255")
        if self.device is not None and not 0 <= self.device <= 255:
            raise ValueError(f"device={self.device} is out of range; allowed 0..255")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port={self.port} is out of range; allowed 1..65535")

    @property
    def device_index(self) -> int:
        """The physical GPU whose readings its panel shows."""
        return self.gpu_index if self.device is None else self.device

    @property
    def is_local(self) -> bool:
        """True when the server runs on this host (its processes can be inspected)."""
        return self.host in ("127.0.0.1", "localhost", "::1", "0.0.0.0")


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """The fleet: one server per GPU at most, plus GPUs shown without a server."""

    servers: tuple[ServerSpec, ...] = ()
    """The servers, any order."""
    extra_gpus: tuple[int, ...] = ()
    """GPUs to show even though no server is configured on them."""

    def __post_init__(self) -> None:
        gpus = [s.gpu_index for s in self.servers]
        dup_gpu = sorted({g for g in gpus if gpus.count(g) > 1})
        if dup_gpu:
            raise ValueError(f"gpu_index {dup_gpu} has more than one server; allowed one per GPU")
        ports = [(s.host, s.port) for s in self.servers]
        dup_port = sorted({p for h, p in ports if ports.count((h, p)) > 1})
        if dup_port:
            raise ValueError(f"port {dup_port} is used by more than one server; ports must differ")

    @classmethod
    def from_ports(
        cls,
        ports: Sequence[int],
        gpus: Sequence[int] | None = None,
        host: str = "127.0.0.1",
        log_paths: Sequence[str | None] | None = None,
        devices: Sequence[int | None] | None = None,
    ) -> FleetSpec:
        """Build a spec from parallel lists (the command line's ``--ports/--gpus/--logs``).

        Args:
            ports: One port per server.
            gpus: The GPU of each server (default 0, 1, 2, ...).
            host: Host of every server.
            log_paths: Log file of each server (default: found from the process).
            devices: The physical GPU of each server (default: its GPU; None: its GPU).

        Returns:
            The spec. Raises ValueError naming the list whose length does not match.
        """
        gpu_list = list(gpus) if gpus is not None else list(range(len(ports)))
        logs = list(log_paths) if log_paths is not None else [None] * len(ports)
        if len(gpu_list) != len(ports):
            raise ValueError(
                f"gpus has {len(gpu_list)} entries; expected {len(ports)} (one per port)"
            )
        if len(logs) != len(ports):
            raise ValueError(
                f"log_paths has {len(logs)} entries; expected {len(ports)} (one per port)"
            )
        on = list(devices) if devices is not None else [None] * len(ports)
        if len(on) != len(ports):
            raise ValueError(f"devices has {len(on)} entries; expected {len(ports)} (one per port)")
        servers = tuple(
            ServerSpec(g, p, host, log, None if d == g else d)
            for g, p, log, d in zip(gpu_list, ports, logs, on, strict=True)
        )
        return cls(servers)

    def gpu_indices(self) -> tuple[int, ...]:
        """Every GPU the spec names, sorted."""
        return tuple(sorted({s.gpu_index for s in self.servers} | set(self.extra_gpus)))
