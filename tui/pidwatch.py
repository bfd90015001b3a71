"""``PidWatch``: whether one known process has exited, from a pidfd (Linux 5.3+).

The console asks every second whether each server (and, on the simulated fleet, each GPU
record's process) still runs. Through psutil that is two or three ``/proc/PID/stat`` reads a
process a look (its identity, then its status); a pidfd names the process itself, not its pid,
so a reused pid can never pass for it, and it becomes readable when the process exits (zombie
included): one ``poll(2)`` with no timeout answers. Callers check the identity once (psutil's
start time), with the pidfd already open, then ask the pidfd; where there is none (another OS,
an old kernel, a process not ours to see) they keep asking psutil.
"""

from __future__ import annotations

import os
import select


class PidWatch:
    """A pidfd on one process: ``exited()`` is one non-blocking poll. Closed when it exited,
    by ``close()``, or when garbage-collected."""

    def __init__(self, fd: int) -> None:
        """Args:
        fd: A pidfd (``os.pidfd_open``), owned from now on.
        """
        self._fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._exited = False

    @classmethod
    def open(cls, pid: int) -> PidWatch | None:
        """A watch on ``pid`` as it is now, or None when pidfds are not available for it (no
        ``os.pidfd_open``, an old kernel, no such process, not permitted).

        Open it *before* checking the process's identity: a process that matches its recorded
        start time after the open is the one the pidfd names (it existed before the open).
        """
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is None:
            return None
        try:
            return cls(pidfd_open(pid))
        except OSError:
            return None

    def exited(self) -> bool:
        """True once the process has exited (a zombie counts: it no longer runs)."""
        if not self._exited and self._poll.poll(0):
            self._exited = True
            self.close()
        return self._exited

    def close(self) -> None:
        """Release the pidfd (idempotent)."""
        if self._fd >= 0:
            self._poll.unregister(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()
