"""The simulated ``sglang::detokenizer`` child: it only exists, as SGLang's does, until it dies.

Run as ``python -m tui.sim.detokenizer PARENT_PID`` with ``argv[0]`` set to ``sglang::detokenizer``.
It blocks on its stdin pipe (no polling) and exits when the pipe closes; it dies at once on
SIGTERM (no handler) and with its parent (PR_SET_PDEATHSIG). The main process's subprocess
watchdog reports it if it dies with a non-zero code, as SGLang's does.
"""

from __future__ import annotations

import sys

from tui.sim.procname import become_child

NAME = "sglang::detokenizer"
"""SGLang's process title."""


def main(argv: list[str]) -> int:
    """Block until the parent closes the pipe.

    Args:
        argv: ``[PARENT_PID]``.

    Returns:
        0.
    """
    become_child(NAME, int(argv[0]))
    sys.stdin.buffer.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
