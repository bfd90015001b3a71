"""What every simulated SGLang child does first: take SGLang's process name, die with its parent.

SGLang 0.5.23's children call ``setproctitle("sglang::scheduler")`` (``srt/managers/scheduler.py``
``configure_scheduler_process``) or ``"sglang::detokenizer"`` (``srt/managers/
detokenizer_manager.py``) and ``kill_itself_when_parent_died()`` (``srt/utils/common.py``:
``prctl(PR_SET_PDEATHSIG, SIGKILL)``). They install no SIGTERM handler, so a SIGTERM kills them at
once. The launcher sets ``argv[0]`` to the name (what ``ps`` and psutil show); this sets the
kernel's 15-character ``comm`` to match. Standard library only: the children must stay small.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


def become_child(name: str, parent_pid: int) -> None:
    """Rename this process and arrange SIGKILL when the parent dies; exit if it already did.

    Args:
        name: SGLang's process title (``sglang::scheduler``).
        parent_pid: The main process that spawned this one.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the stdin pipe's EOF still ends the child
        pass
    # The parent may have died before prctl took effect: then no signal will ever come.
    if os.getppid() != parent_pid:
        sys.exit(0)
