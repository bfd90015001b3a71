"""The simulated server's child processes: ``sglang::scheduler`` and ``sglang::detokenizer``.

As in SGLang 0.5.23 (``srt/entrypoints/engine.py`` ``_launch_subprocesses``) the main process
spawns the scheduler (it holds the GPU memory) and then the detokenizer; both carry SGLang's
process titles, die on SIGTERM and die with their parent (``tui.sim.procname``). Each is a tiny
``python -m`` of a standard-library-only module blocked on a pipe: a few MiB, no CPU while idle.

Exits are watched without polling: one ``pidfd`` per child on the event loop
(:class:`ExitWatch`), so a dead scheduler stops the simulated one at once and the subprocess
watchdog (``tui.sim.signals``) reports it on its next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import tui

SCHEDULER_NAME = "scheduler_0"
"""The scheduler's name in the subprocess watchdog's messages."""

DETOKENIZER_NAME = "detokenizer"
"""The detokenizer's name in the subprocess watchdog's messages."""


def child_env() -> dict[str, str]:
    """The children's environment: the project and this interpreter's import path.

    Why: a child started with SGLang's title as ``argv[0]`` cannot locate the virtual
    environment by itself; the path is handed down instead (imports stay lazy, so it costs
    nothing for the standard-library-only children).
    """
    env = dict(os.environ)
    project = str(Path(tui.__file__).resolve().parent.parent)
    paths = [project, *(p for p in sys.path if p and Path(p).is_dir())]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _spawn(
    title: str, module: str, args: list[str], pipe_stdout: bool, site: bool = False
) -> subprocess.Popen[str]:
    # -S (no site import: ~3 MiB less each) unless the child imports third-party packages.
    flags = [] if site else ["-S"]
    return subprocess.Popen(
        [title, *flags, "-m", module, str(os.getpid()), *args],
        executable=sys.executable,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE if pipe_stdout else None,
        text=True,
        env=child_env(),
    )


class SchedulerChild:
    """The ``sglang::scheduler`` process and the pipe that tells it its memory."""

    name = SCHEDULER_NAME

    def __init__(
        self,
        root: Path,
        gpu_index: int,
        cuda: bool = False,
        speed: float | None = None,
        card_bytes: int | None = None,
    ) -> None:
        """Spawn it (same process group: a group signal reaches it); its stdout is a pipe to us
        (its tracebacks still go to the log through stderr).

        With ``cuda`` the child allocates real device memory and answers each memory change;
        ``speed`` goes in its record in the simulated driver. ``card_bytes``: the simulated
        card's capacity; a growth that the card no longer has free (a neighbour on the same
        card took it after this server measured) fails as PyTorch's allocation would.
        """
        self.root, self.gpu_index, self.card_bytes = root, gpu_index, card_bytes
        args = [str(root), str(gpu_index), *(["--cuda"] if cuda else [])]
        args += ["--speed", f"{speed:g}"] if speed is not None else []
        self.cuda = cuda
        self.proc = _spawn("sglang::scheduler", "tui.sim.holder", args, True, site=cuda)
        self._last: tuple[int, int] | None = None
        if cuda and self._read() != "ready":
            raise RuntimeError("the GPU-backed scheduler child failed to initialise CUDA")

    def _read(self) -> str:
        if self.proc.stdout is None:
            return ""
        return self.proc.stdout.readline().strip()

    def _write(self, text: str) -> bool:
        if self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(text + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            return False
        return True

    def publish(self, used_bytes: int, utilization: float) -> str | None:
        """Tell the child its memory and utilisation (skipped when unchanged).

        Returns:
            With cuda backing, PyTorch's out-of-memory message when a memory change could not
            be allocated for real; otherwise None.
        """
        key = (used_bytes, round(utilization))
        if key == self._last:
            return None
        if not self.cuda and (full := self._card_full(used_bytes)) is not None:
            return full
        grow = self.cuda and (self._last is None or self._last[0] != used_bytes)
        self._last = key
        mark = "=" if grow else ""
        if not self._write(f"{mark}{used_bytes} {utilization:.1f} {utilization * 0.6:.1f}"):
            return None
        if grow:
            reply = self._read()
            if reply.startswith("oom "):
                return reply[4:]
            if reply != "ok":
                return "CUDA error: the GPU-backed scheduler child died"
        return None

    def _card_full(self, used_bytes: int) -> str | None:
        """PyTorch's out-of-memory words when growing to ``used_bytes`` does not fit in what the
        simulated card has free now: SGLang measures the free memory once, at its start, and a
        server started beside it in the meantime takes what it counted on."""
        held = self._last[0] if self._last is not None else 0
        if self.card_bytes is None or used_bytes <= held:
            return None
        from tui.gpu.sim_records import GIB, live_processes

        others = [r for r in live_processes(self.root, self.gpu_index) if r.pid != self.proc.pid]
        free = self.card_bytes - held - sum(r.used_bytes for r in others)
        if used_bytes - held <= free:
            return None
        in_use = "".join(
            f" Process {r.pid} has {r.used_bytes / GIB:.2f} GiB memory in use." for r in others
        )
        return (
            f"CUDA out of memory. Tried to allocate {(used_bytes - held) / GIB:.2f} GiB. GPU 0 "
            f"has a total capacity of {self.card_bytes / GIB:.2f} GiB of which "
            f"{max(free, 0) / GIB:.2f} GiB is free.{in_use}"
        )

    async def wait_up(self, timeout: float = 60.0) -> None:
        """Wait until the child published its first record (it answers ``up``; with cuda the
        first allocation's answer already came back).

        Raises:
            RuntimeError: it died or stayed silent for ``timeout`` seconds.
        """
        if self.cuda:
            return
        try:
            reply = await asyncio.wait_for(asyncio.to_thread(self._read), timeout)
        except TimeoutError:
            reply = ""
        if reply != "up":
            raise RuntimeError("the scheduler child did not start (see its traceback above)")

    def crash(self) -> None:
        """The scheduler's exception path: it SIGQUITs the main process and exits 0."""
        self._write("crash")

    def shutdown(self) -> None:
        """SGLang's ShutdownReq: the child withdraws its record and exits 0."""
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()


class DetokenizerChild:
    """The ``sglang::detokenizer`` process (it blocks on its stdin until it closes)."""

    name = DETOKENIZER_NAME

    def __init__(self) -> None:
        """Spawn it."""
        self.proc = _spawn("sglang::detokenizer", "tui.sim.detokenizer", [], pipe_stdout=False)


class ResourceTrackerChild:
    """Python's multiprocessing resource tracker, as SGLang 0.5.17's main process has one.

    The very command multiprocessing runs (``python3 -B -c 'from multiprocessing.resource_tracker
    import main;main(FD)'``), started the same way: it reads a pipe whose only writer is the main
    process and exits at its end, so it outlives the main process by a moment after a SIGKILL
    (its children die with it in the recorded ``kill`` scenario); it ignores SIGTERM and SIGINT,
    as multiprocessing's does, so a group SIGTERM leaves it to the main process's end.
    """

    name = "resource_tracker"

    def __init__(self) -> None:
        """Spawn it; the write end of its pipe stays open in this process until it dies."""
        read_fd, self._write_fd = os.pipe()
        code = f"from multiprocessing.resource_tracker import main;main({read_fd})"
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-B", "-c", code], pass_fds=(read_fd,), env=child_env()
            )
        finally:
            os.close(read_fd)


Child = SchedulerChild | DetokenizerChild | ResourceTrackerChild


class ExitWatch:
    """Calls ``on_exit(child)`` on the event loop when a child exits (pidfd: no polling)."""

    def __init__(self, children: list[Child], on_exit: Callable[[Child], None]) -> None:
        """Watch ``children`` from now on (falls back to a 0.2 s poll where pidfd is missing)."""
        self._loop = asyncio.get_running_loop()
        self._on_exit = on_exit
        self._fds: dict[int, int] = {}
        self._poll: asyncio.Task[None] | None = None
        for child in children:
            try:
                fd = os.pidfd_open(child.proc.pid)
            except (AttributeError, OSError):
                if self._poll is None:
                    self._poll = self._loop.create_task(self._poll_exits(children))
                continue
            self._fds[child.proc.pid] = fd
            self._loop.add_reader(fd, self._exited, child)

    def _exited(self, child: Child) -> None:
        fd = self._fds.pop(child.proc.pid, None)
        if fd is not None:
            self._loop.remove_reader(fd)
            os.close(fd)
        child.proc.poll()  # reap it now: its exit code is known from here on
        self._on_exit(child)

    async def _poll_exits(self, children: list[Child]) -> None:
        pending = [c for c in children if c.proc.pid not in self._fds]
        while pending:
            await asyncio.sleep(0.2)
            for child in [c for c in pending if c.proc.poll() is not None]:
                pending.remove(child)
                self._on_exit(child)

    def close(self) -> None:
        """Stop watching."""
        for fd in self._fds.values():
            self._loop.remove_reader(fd)
            os.close(fd)
        self._fds.clear()
        if self._poll is not None:
            self._poll.cancel()


def kill_children(children: list[Child], wait_s: float = 10.0) -> None:
    """SIGKILL every child still running and reap it (``kill_process_tree``'s children part)."""
    for child in children:
        if child.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGKILL)
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.proc.wait(wait_s)
