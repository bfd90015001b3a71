"""The tests' port door: ports no outgoing connection can take, one slice per xdist worker."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bench import ports


def test_ports_are_free_now_and_below_the_ephemeral_range() -> None:
    chosen = ports.free_ports(5)
    assert len(set(chosen)) == 5
    floor = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in chosen:
        assert port < floor, (port, floor)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # raises when it was not free


def test_a_consecutive_run_skips_a_held_port(monkeypatch: pytest.MonkeyPatch) -> None:
    first = ports.pool()[0]
    monkeypatch.setattr(ports.random, "randrange", lambda n: 0)
    with socket.socket() as held:
        held.bind(("127.0.0.1", first + 2))  # breaks the run starting at the pool's floor
        run = ports.free_ports(4, consecutive=True)
    assert run == list(range(run[0], run[0] + 4))
    assert first + 2 not in run
    assert run[0] > first + 2


def test_each_worker_chooses_in_its_own_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(set(ports.pool()))
    assert not slices[0] & slices[1] and not slices[1] & slices[2]
