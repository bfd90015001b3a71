"""The simulated ``sglang::scheduler`` child: it holds the GPU memory, as SGLang's scheduler does.

Run as ``python -m tui.sim.holder PARENT_PID ROOT GPU_INDEX [--cuda] [--speed S]`` with
``argv[0]`` set to ``sglang::scheduler`` (standard library only, see ``tui.sim.procname``). It
publishes its record in the simulated driver (``tui.gpu.sim_records``) and rewrites it for each
``used_bytes utilization_gpu utilization_memory`` line the main process writes on its stdin. It
blocks on that pipe, no polling:

* its first record published, it answers ``up`` on stdout (the main process waits for it, as
  SGLang's waits for the scheduler's init info: a ready server's scheduler is alive and holds
  memory);
* EOF (SGLang's ``ShutdownReq``, or the parent is gone) withdraws the record and exits 0;
* ``crash`` is the scheduler's exception path (``run_scheduler_process``): SIGQUIT to the parent,
  withdraw, exit 0 (the main process's SIGQUIT handler then kills the tree);
* SIGTERM kills it at once (no handler, as in SGLang), and it dies with its parent
  (PR_SET_PDEATHSIG); its record then stops counting because the reader checks the pid.

With ``--cuda`` it really allocates the memory on its GPU (``tui.sim.cuda_backing``) and answers
each memory change on stdout with ``ok`` or ``oom <PyTorch's message>``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from tui.gpu.sim_records import (
    SimProcessRecord,
    own_create_time,
    publish_process,
    withdraw_process,
)
from tui.sglang.models import CUDA_CONTEXT_BYTES
from tui.sim.procname import become_child

PROCESS_NAME = "sglang::scheduler"
"""SGLang's process title (single GPU, dp=1: no rank suffix)."""


def main(argv: list[str]) -> int:
    """Hold memory until stdin closes.

    Args:
        argv: ``[PARENT_PID, ROOT, GPU_INDEX, (--cuda), (--speed S)]`` (the speed goes in its
            record: the GPU source says how fast the simulated fleet runs).

    Returns:
        Exit status.
    """
    parent = int(argv[0])
    become_child(PROCESS_NAME, parent)
    root, index = Path(argv[1]), int(argv[2])
    pool = None
    if "--cuda" in argv[3:]:
        from tui.sim.cuda_backing import CudaPool

        pool = CudaPool()
        _reply("ready")
    pid, create_time = os.getpid(), own_create_time()
    options = argv[3:]
    speed = float(options[options.index("--speed") + 1]) if "--speed" in options else None
    announced = False
    # The utilisation's integral, for the simulated energy counter: each line's utilisation
    # holds until the next line (the main process writes one only when it changes).
    busy_s, util, since = 0.0, 0.0, time.time()
    try:
        for line in sys.stdin:
            if line.strip() == "crash":
                os.kill(parent, signal.SIGQUIT)
                break
            parts = line.split()
            if len(parts) != 3:
                continue
            if pool is not None and parts[0].startswith("="):
                # A memory change: allocate for real (beyond the CUDA context torch made).
                parts[0] = parts[0][1:]
                error = pool.resize(int(parts[0]) - CUDA_CONTEXT_BYTES)
                _reply("ok" if error is None else f"oom {error}")
            now = time.time()
            busy_s += util / 100.0 * max(now - since, 0.0)
            util, since = float(parts[1]), now
            record = SimProcessRecord(
                pid=pid,
                create_time=create_time,
                used_bytes=int(parts[0].lstrip("=")),
                utilization_gpu=util,
                utilization_memory=float(parts[2]),
                name=PROCESS_NAME,
                speed=speed,
                busy_s=busy_s,
                at=now,
            )
            publish_process(root, index, record)
            if not announced and pool is None:
                _reply("up")
                announced = True
    finally:
        withdraw_process(root, index, pid)
    return 0


def _reply(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
