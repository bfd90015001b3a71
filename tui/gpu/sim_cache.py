"""The simulated driver's records, read again only when their folder changed.

The simulated GPU source samples every GPU once a second; reading the records each time meant
listing the root and every GPU's folder, then reading and parsing every ``device.json`` and
``proc-<pid>.json``: half of the fleet monitor's CPU on the demo's seven GPUs, for files that
under steady load are rewritten only when a server's memory or rounded utilisation changes.
Writers replace a record by renaming a new file into its GPU's folder (``sim_records``), which
changes the folder's modification time; a folder whose (inode, mtime) is unchanged since it was
read holds the same records. Liveness is not cached: every sample still checks each record's
process, so a dead process's memory is released at the next sample; after a first check by
``sim_records.alive`` (psutil: its start time), through a pidfd opened just before
(``tui.pidwatch``): one ``poll(2)`` a record a sample instead of two ``/proc`` reads.

A changed folder is listed again, but only its files whose (inode, mtime, size) changed are read:
records of processes killed without withdrawing them (a SIGKILLed test or demo) pile up beside
the live ones, and each change of a live record re-read them all (104 files in one GPU's folder
on a well-used machine made a sample 3.1 ms; a clean one takes 0.45).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tui.gpu import sim_records
from tui.gpu.sim_records import SimDevice, SimProcessRecord
from tui.pidwatch import PidWatch

RACY_NS = 1_000_000_000
"""A folder changed this recently may change again within its timestamp's granularity without
its mtime moving: it is read again rather than trusted (git's "racy" rule)."""


@dataclass(frozen=True, slots=True)
class _Folder:
    """What one folder held when it was read."""

    key: tuple[int, int]
    """(inode, mtime in ns) of the folder when read."""
    device: SimDevice | None
    """Its ``device.json`` (None in the root's entry, or when missing or unreadable)."""
    records: tuple[SimProcessRecord, ...]
    """Its process records, live or not, by pid."""
    names: tuple[str, ...] = ()
    """The GPU folders' names (the root's entry only)."""


def _key(path: Path, now_ns: int) -> tuple[int, int] | None:
    """(inode, mtime) of a folder; None when it is missing or changed too recently to trust."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if now_ns - stat.st_mtime_ns < RACY_NS:
        return None
    return (stat.st_ino, stat.st_mtime_ns)


class RecordCache:
    """The devices and process records under one root, each folder read once per change."""

    def __init__(self, root: Path) -> None:
        """Read the records under ``root`` (``tui.paths.sim_gpu_dir()``'s layout).

        Args:
            root: Directory holding ``gpu<N>/device.json`` and ``gpu<N>/proc-<pid>.json``.
        """
        self.root = root
        self._folders: dict[Path, _Folder] = {}
        self._files: dict[Path, dict[str, tuple[tuple[int, int, int], SimProcessRecord | None]]]
        self._files = {}
        """Each GPU folder's process record files as last read, by name, with their (inode,
        mtime, size)."""
        self._watches: dict[tuple[int, float], PidWatch] = {}
        """A pidfd per live record's process, by (pid, create_time), once its identity checked."""
        self._dead: set[tuple[int, float]] = set()
        """Records whose process was found gone: gone for good (a reused pid starts at another
        time), so never checked again. Why: records of dead processes stay until pruned (a
        killed fleet, a crash), and each cost psutil's /proc reads at every sample (95 such
        records made a sample 1.7 ms)."""
        self.reads = 0
        """Folders read from disk so far (what the cache saves; tests count it)."""
        self.record_reads = 0
        """Process record files read so far (tests count it)."""

    def _folder(self, path: Path, now_ns: int, *, gpu: bool) -> _Folder:
        key = _key(path, now_ns)
        held = self._folders.get(path)
        if key is not None and held is not None and held.key == key:
            return held
        self.reads += 1
        try:
            entries = sorted(os.scandir(path), key=lambda entry: entry.name)
        except OSError:
            entries = []
        names = [entry.name for entry in entries]
        if gpu:
            device = None
            if "device.json" in names:
                index = int(path.name[3:])
                device = sim_records.read_device(self.root, index)
            records = []
            known = self._files.get(path, {})
            files = {}  # rebuilt from the listing: a removed file is forgotten
            for entry in entries:
                if entry.name.startswith("proc-") and entry.name.endswith(".json"):
                    files[entry.name] = read = self._record(entry, known.get(entry.name))
                    if read[1] is not None:
                        records.append(read[1])
            self._files[path] = files
            records.sort(key=lambda r: r.pid)
            folder = _Folder(key or (0, 0), device, tuple(records))
        else:
            gpus = tuple(n for n in names if n.startswith("gpu") and n[3:].isdigit())
            folder = _Folder(key or (0, 0), None, (), gpus)
        if key is None:
            self._folders.pop(path, None)  # not trusted: read again next time
        else:
            self._folders[path] = folder
        return folder

    def _record(
        self,
        entry: os.DirEntry[str],
        held: tuple[tuple[int, int, int], SimProcessRecord | None] | None,
    ) -> tuple[tuple[int, int, int], SimProcessRecord | None]:
        """The file's (inode, mtime, size) and record: ``held`` while the file is unchanged.

        Why all three, not the inode the listing gives for free: a withdrawn record's inode
        can be reused by the next record written under the same name (a new process with the
        same pid); mtime and size changing too is what makes that a different file.
        """
        try:
            stat = entry.stat()
        except OSError:
            return ((0, 0, 0), None)
        version = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if held is not None and held[0] == version:
            return held
        self.record_reads += 1
        return (version, sim_records.read_process(Path(entry.path)))

    def devices(self) -> list[tuple[SimDevice, list[SimProcessRecord]]]:
        """Every simulated GPU, by index, with the records of its live processes.

        Returns:
            (device, live process records by pid) pairs, as ``sim_records.list_devices`` and
            ``sim_records.live_processes`` would read them.
        """
        now_ns = time.time_ns()
        out = []
        seen: set[tuple[int, float]] = set()
        for name in self._folder(self.root, now_ns, gpu=False).names:
            folder = self._folder(self.root / name, now_ns, gpu=True)
            if folder.device is None:
                continue
            seen.update((r.pid, r.create_time) for r in folder.records)
            live = [r for r in folder.records if self._alive(r)]
            out.append((folder.device, live))
        for key in self._watches.keys() - seen:  # records gone: their pidfds too
            self._watches.pop(key).close()
        self._dead &= seen
        return sorted(out, key=lambda pair: pair[0].index)

    def _alive(self, record: SimProcessRecord) -> bool:
        """``sim_records.alive`` the first time, then the pidfd opened before that check."""
        key = (record.pid, record.create_time)
        watch = self._watches.get(key)
        if watch is not None:
            if not watch.exited():
                return True
            del self._watches[key]
            self._dead.add(key)
            return False
        if key in self._dead:
            return False
        watch = PidWatch.open(record.pid)  # before the check: then it names the checked process
        if not sim_records.alive(record.pid, record.create_time):
            if watch is not None:
                watch.close()
            self._dead.add(key)
            return False
        if watch is not None:
            self._watches[key] = watch
        return True
