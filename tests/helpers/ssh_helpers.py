"""A real OpenSSH server on a loopback port for the tests of ``gpufleet agent start`` over ssh.

``sshd -D -e -f CONFIG`` of the test's own: a generated ed25519 host key, one authorized ed25519
key for the current user (root in CI: ``PermitRootLogin prohibit-password``), ``AcceptEnv
GPUFLEET_*`` so the client's ``SetEnv`` points the node's gpufleet at the test's directories.
The client side is the system's ``ssh`` with ``-F /dev/null`` (no developer's config applies),
the key, a known_hosts of the test's and ``StrictHostKeyChecking=accept-new``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.simfleet import free_ports

SSHD = "/usr/sbin/sshd"
READY_S = 15.0
"""Deadline for sshd to greet."""


class SshdUnavailable(RuntimeError):
    """sshd cannot run here (the message says why); the tests skip with it."""


@dataclass(frozen=True)
class Sshd:
    """A running test sshd and what a client needs to log in."""

    port: int
    """Its loopback port."""
    key: Path
    """The client's private key (authorized for the current user)."""
    known_hosts: Path
    """The client's known_hosts (filled on the first connection: accept-new)."""
    log: Path
    """sshd's own log (``-e``)."""

    def client_options(self, env: Mapping[str, str]) -> list[str]:
        """``--ssh-option`` values that log in here with ``env`` set on the node (SetEnv)."""
        setenv = " ".join(f"{name}={value}" for name, value in env.items())
        return [
            "-F /dev/null",
            f"-p {self.port}",
            shlex.join(["-i", str(self.key)]),
            "-o IdentitiesOnly=yes",
            "-o IdentityAgent=none",
            shlex.join(["-o", f"UserKnownHostsFile={self.known_hosts}"]),
            "-o StrictHostKeyChecking=accept-new",
            shlex.join(["-o", f"SetEnv={setenv}"]),
        ]

    def config_file(self, path: Path, aliases: Mapping[str, int], env: Mapping[str, str]) -> Path:
        """An ssh client config naming ``aliases`` (host alias -> port on 127.0.0.1)."""
        setenv = " ".join(f"{name}={value}" for name, value in env.items())
        blocks = [
            f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n"
            for alias, port in aliases.items()
        ]
        blocks.append(
            "Host *\n"
            f"  IdentityFile {self.key}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
            f"  UserKnownHostsFile {self.known_hosts}\n  StrictHostKeyChecking accept-new\n"
            f"  SetEnv {setenv}\n"
        )
        path.write_text("".join(blocks))
        return path


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-test", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


def _config(root: Path, port: int, host_key: Path, authorized: Path) -> Path:
    config = root / "sshd_config"
    config.write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile none
AuthorizedKeysFile {authorized}
AllowUsers {getpass.getuser()}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AcceptEnv GPUFLEET_*
PrintMotd no
X11Forwarding no
AllowTcpForwarding no
LogLevel INFO
"""
    )
    # StrictModes no: the key files live under /tmp, which is world-writable (sticky), and
    # sshd's strict modes refuse any path through such a directory.
    return config


def _greets(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as s:
        s.settimeout(1)
        return s.recv(64).startswith(b"SSH-2.0-")
    return False


@contextlib.contextmanager
def sshd(root: Path) -> Iterator[Sshd]:
    """Run a test sshd until the context ends, then stop it and every process it forked.

    Raises:
        SshdUnavailable: no sshd or ssh here, or it cannot start (its own words).
    """
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh") is None:
        raise SshdUnavailable(f"{SSHD} or ssh missing (make test's tools target installs them)")
    if os.geteuid() == 0:
        # Privilege separation chroots into /run/sshd; a system without the service lacks it.
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    host_key, key = root / "host_ed25519", root / "client_ed25519"
    _keygen(host_key)
    _keygen(key)
    authorized = root / "authorized_keys"
    authorized.write_text(Path(f"{key}.pub").read_text())
    authorized.chmod(0o600)
    port = free_ports(1)[0]
    config = _config(root, port, host_key, authorized)
    checked = subprocess.run(
        [SSHD, "-t", "-f", str(config)], capture_output=True, text=True, timeout=30
    )
    if checked.returncode != 0:
        raise SshdUnavailable(f"sshd -t refuses the test config: {checked.stderr.strip()}")
    log = root / "sshd.log"
    with log.open("ab") as out:
        server = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + READY_S
        while not _greets(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise SshdUnavailable(f"sshd did not start: {log.read_text()[-500:]}")
            time.sleep(0.05)
        yield Sshd(port, key, root / "known_hosts", log)
    finally:
        _stop(server)


def _stop(server: subprocess.Popen[bytes]) -> None:
    """Stop sshd and the per-connection sshd processes it forked (its children, ours)."""
    try:
        forked = psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        forked = []
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)
    for proc in forked:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, left = psutil.wait_procs(forked, timeout=5)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
