"""The ``gpufleet`` command line: a thin dispatcher to each concept's own ``cli`` module.

Each subcommand lives beside the concept it drives (``tui/sim/cli.py``, ``tui/logs/cli.py``, ...)
and exposes ``main(argv) -> int``. Only the chosen module is imported, so ``gpufleet sim`` and
``gpufleet generate`` start quickly and never import Textual.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from tui import plain

DEBUG_ENV = "GPUFLEET_DEBUG"
"""Set to show the traceback of an unexpected error instead of its one-line summary."""

COMMANDS: dict[str, tuple[str, str]] = {
    "console": ("tui.ui.cli", "open the console on a fleet (the default command)"),
    "demo": ("tui.ui.demo_cli", "start the simulated 7-GPU fleet and a pipeline, open the console"),
    "serve": ("tui.ui.serve.cli", "the console in a browser (textual-serve), token, read-only"),
    "sim": ("tui.sim.cli", "a simulated SGLang server, drop-in for python -m sglang.launch_server"),
    "sim-fleet": ("tui.ops.cli.sim_fleet", "start, list or stop a fleet of simulated servers"),
    "logs": ("tui.logs.cli", "parse SGLang logs into typed JSON events"),
    "plan": ("tui.retune.plan_cli", "SGLang's memory plan for a model folder, a GPU and flags"),
    "gpus": ("tui.gpu.cli", "print one sample of every GPU (NVML, or the simulated fleet)"),
    "profile": ("tui.profiles.cli", "list, show, diff, validate profiles; print launch argv"),
    "apply": ("tui.ops.cli.apply", "stop, relaunch with a profile, verify every GPU"),
    "adopt": ("tui.ops.cli.adopt", "take over servers gpufleet did not launch (writes a profile)"),
    "status": ("tui.ops.cli.status", "the whole fleet and its job; exit 0 all ready, 1, 2, 3"),
    "journal": ("tui.ops.cli.journal", "print the journal of applies, canaries and rollouts"),
    "fleet": ("tui.ops.cli.fleet", "the fleet state: forget a GPU that left the fleet"),
    "history": ("tui.history.cli", "export the recorded history (CSV or NDJSON rows)"),
    "replay": ("tui.ui.replay.cli", "the console, read-only, on the history at a past moment"),
    "alerts": ("tui.ops.cli.alerts", "the alert rules; --watch fires them (journal, webhook)"),
    "canary": ("tui.ops.cli.canary", "try a profile on one GPU against the others as control"),
    "rollout": ("tui.ops.cli.rollout", "roll a profile out k GPUs at a time, verifying each"),
    "autotune": (
        "tui.autotune.cli",
        "search the knobs online: canaries, rollout (start|status|...)",
    ),
    "generate": ("tui.pipeline.cli", "the resumable generation pipeline (headless)"),
    "agent": ("tui.agent.cli", "serve this node's /metrics and control API to consoles"),
}


def _private_state() -> None:
    """Make the state directory 0700 before the command runs (created so when missing, and
    tightened, with one line saying so, when an earlier version left it open): a subdirectory
    made first (``demo/``, ``pipeline/``) would otherwise create it with the umask's 0755."""
    from tui import paths
    from tui.state.private import ensure_private_dir

    with contextlib.suppress(OSError):  # an unwritable home: the command says what it cannot do
        ensure_private_dir(paths.state_dir())


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: gpufleet [COMMAND] [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "With no command, or with options only, gpufleet opens the console."]
    lines += ["Run 'gpufleet COMMAND --help' for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one gpufleet command and return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args and args[0] == "--version":
        from tui import __version__

        print(f"gpufleet {__version__}")
        return 0
    if not args or args[0].startswith("-"):
        name, rest = "console", args
    else:
        name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"gpufleet: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        plain.switched_off()  # a misspelt benchmarking switch says so before anything runs
    except plain.PlainError as error:
        print(f"gpufleet: {error}", file=sys.stderr)
        return 2
    if name != "sim":  # the simulator stands in for SGLang: it keeps no state of gpufleet's
        _private_state()
    module = importlib.import_module(COMMANDS[name][0])
    try:
        result = module.main(rest)
    except KeyboardInterrupt:
        if name == "sim":  # a drop-in for SGLang, which dies of SIGINT (traceback, status -2)
            raise
        return 130
    except BrokenPipeError:  # e.g. `gpufleet logs parse big.log | head`
        return 0
    except Exception as exc:
        # Every bad input has its own named error; this is the last line of defence, so a user
        # never gets a traceback. GPUFLEET_DEBUG=1 shows it.
        if os.environ.get(DEBUG_ENV):
            raise
        detail = " ".join(str(exc).split())[:300]
        print(
            f"gpufleet {name}: unexpected error: {type(exc).__name__}: {detail} "
            f"(set {DEBUG_ENV}=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
    return int(result or 0)


if __name__ == "__main__":
    raise SystemExit(main())
