"""The "scheduler" child process: holds the simulated GPU memory, as sglang::scheduler does.

It publishes its own record in the simulated driver (``tui.gpu.sim_records``) and rewrites it for
each ``used_bytes utilization_gpu utilization_memory`` line the parent writes on its stdin. It
blocks on that pipe: EOF means the parent is gone (exited or killed), so it withdraws its record
and exits. No polling. It ignores SIGTERM/SIGINT, like a scheduler that waits for ShutdownReq, so a
group SIGTERM lets the parent drain; SIGKILL of the group ends it at once (its record then stops
counting because the reader checks that the pid is alive).

Run as ``python -m tui.sim.holder ROOT GPU_INDEX [--cuda]``. With ``--cuda`` it really allocates
the memory on its GPU (``tui.sim.cuda_backing``) and answers each memory change on stdout with
``ok`` or ``oom <PyTorch's message>``, so the parent can fail the way SGLang does.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import psutil

from tui.gpu.sim_records import SimProcessRecord, publish_process, withdraw_process
from tui.sglang.models import CUDA_CONTEXT_BYTES

PROCESS_NAME = "sglang::scheduler"
"""Name shown in the simulated driver's process list."""


def main(argv: list[str]) -> int:
    """Hold memory until stdin closes.

    Args:
        argv: ``[ROOT, GPU_INDEX]``.

    Returns:
        Exit status.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    root, index = Path(argv[0]), int(argv[1])
    pool = None
    if "--cuda" in argv[2:]:
        from tui.sim.cuda_backing import CudaPool

        pool = CudaPool()
        _reply("ready")
    me = psutil.Process()
    create_time = me.create_time()
    try:
        for line in sys.stdin:
            parts = line.split()
            if len(parts) != 3:
                continue
            if pool is not None and parts[0].startswith("="):
                # A memory change: allocate for real (beyond the CUDA context torch made).
                parts[0] = parts[0][1:]
                error = pool.resize(int(parts[0]) - CUDA_CONTEXT_BYTES)
                _reply("ok" if error is None else f"oom {error}")
            publish_process(
                root,
                index,
                SimProcessRecord(
                    pid=me.pid,
                    create_time=create_time,
                    used_bytes=int(parts[0]),
                    utilization_gpu=float(parts[1]),
                    utilization_memory=float(parts[2]),
                    name=PROCESS_NAME,
                ),
            )
    finally:
        withdraw_process(root, index, me.pid)
    return 0


def _reply(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
