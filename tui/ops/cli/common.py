"""What the operations commands share: GPU lists, the event printer, exit codes, one-line errors.

Exit codes: 0 done (on every GPU), 1 an operation was refused or failed on a GPU (what runs there
is not verified as the fleet's, or it did not get there: the GPU is named), 2 refused before
anything was stopped (bad input, an invalid profile, another operation holding the fleet, a
damaged state file, a state lock held past its deadline, a journal that cannot be written),
3 done, but requests were lost or may have been: a drain ran past its deadline and requests in
flight were dropped, or a drain ended while a client was still sending (``EXIT_LOST``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from tui.cli_args import SECONDS
from tui.control.stop_release import DEFAULT_DRAIN_S, DrainProgress, StopTimeouts
from tui.inputs import InputError
from tui.ops.events import OperationFinished, OperationStarted, OpEvent
from tui.ops.journal import JournalError
from tui.ops.lock import OperationBusy
from tui.ops.service import OperationError
from tui.profiles import ProfileError
from tui.retune.events import ApplyRefused, GpuFailed, GpuPhase, GpuReady, MeasureProgress
from tui.rollout.canary_result import CanaryLook
from tui.state.files import StateFileError

REFUSALS = (ProfileError, OperationBusy, StateFileError, OperationError, JournalError, InputError)
"""Errors that mean nothing was changed: reported in one line, exit 2 (a state lock held past
its deadline is a ``StateFileError``: ``tui.state.locks.LockBusy``)."""


EXIT_LOST = 3
"""Every GPU done, but a stop dropped requests in flight: a drain ran past its deadline (a
client kept sending). The count is on the GPU's line and in the journal's ``lost_in_flight``.

Also when a drain *ended* while a client was still sending (the journal's
``client_still_sending``): SGLang accepts requests while it drains and its exit drops what came
after its last check, so the loss cannot be excluded, nor counted. 3, not 0: a script that reads
0 as "nothing was lost" would be told something that may not be true, and the operator, told
by 3, reads the line and decides (the client's own count says whether any were)."""


def exit_status(ok: bool, lost: bool) -> int:
    """0 done, 1 refused or failed on a GPU (it wins: the GPU is named), else 3 when requests
    were lost, or may have been (``EXIT_LOST``)."""
    if not ok:
        return 1
    return EXIT_LOST if lost else 0


def add_drain_timeout(parser: argparse.ArgumentParser, *aliases: str) -> None:
    """``--drain-timeout S``: how long an old server may drain before its group is signalled.

    Args:
        parser: The command's parser.
        aliases: Older spellings still taken (``--term-timeout``).
    """
    parser.add_argument(
        "--drain-timeout",
        *aliases,
        dest="drain_timeout",
        type=SECONDS,
        default=None,
        metavar="S",
        help="seconds an old server may drain (SIGTERM to its main pid) before its process "
        "group is signalled and what it has in flight is lost (default: the profile's "
        f"[stop] drain_timeout_s, else {DEFAULT_DRAIN_S:g})",
    )


def stop_timeouts(args: argparse.Namespace, release_s: float | None = None) -> StopTimeouts:
    """The stop's deadlines from ``add_drain_timeout``'s option (and a release wait)."""
    base = StopTimeouts() if release_s is None else StopTimeouts(release_s=release_s)
    return base.pinned(args.drain_timeout)


class UsageError(ValueError):
    """Bad command-line input (exit 2)."""


def parse_gpus(text: str, option: str = "--gpus") -> list[int]:
    """'0,5' -> [0, 5]; raises UsageError naming the bad value."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()) or int(part) > 255:
            raise UsageError(f"{option}: {part!r} is not a GPU index 0-255 (expected e.g. 0,5)")
        out.append(int(part))
    return sorted(set(out))


def print_event(event: OpEvent) -> None:
    """One line per event worth a line, for the headless commands."""
    if isinstance(event, GpuPhase):
        print(f"GPU {event.gpu}: {event.phase} ({event.elapsed_s:.1f} s)", flush=True)
    elif isinstance(event, GpuReady):
        report = event.report
        ready = ready_words(report.time_to_ready_s, report.stop_s)
        print(f"GPU {event.gpu}: READY {ready}", flush=True)
        if report.drain_note:
            print(f"  old server: {report.drain_note}", flush=True)
    elif isinstance(event, GpuFailed):
        word = "REFUSED" if event.report.status == "refused" else "FAILED"
        print(f"GPU {event.gpu}: {word} {event.report.failure}", flush=True)
        if event.report.drain_note:
            print(f"  old server: {event.report.drain_note}", flush=True)
        if event.report.error_line:
            print(f"  log line: {event.report.error_line}", flush=True)
    elif isinstance(event, MeasureProgress) and event.samples == 0:
        print(f"throughput: {event.stage} window {event.window_s:g} s", flush=True)
    elif isinstance(event, ApplyRefused):
        for error in event.errors:
            print(f"refused: {error}", file=sys.stderr, flush=True)
    elif isinstance(event, DrainProgress) and event.stage in (
        "cordoned",
        "draining",
        "drain timed out",
    ):
        print(event.describe(), flush=True)
    elif isinstance(event, CanaryLook):
        print(f"look at {event.intervals} intervals: {event.verdict} ({event.reason})", flush=True)
    elif isinstance(event, OperationStarted | OperationFinished):
        pass  # the command prints its own header and result


def run_refusing(prog: str, work: Callable[[], Any]) -> tuple[int, Any]:
    """Run ``work``; a refusal becomes one line on stderr and exit status 2.

    Returns:
        (0, its value), or (2, None) after a refusal.
    """
    try:
        return 0, work()
    except (UsageError, *REFUSALS) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2, None


def ready_words(start_s: object, stop_s: object) -> str:
    """'in 22.0 s (stop 20.0 s, start 2.0 s)': the time out of service, the stop included."""
    if not isinstance(start_s, int | float):
        return "in ? s"
    if not isinstance(stop_s, int | float) or stop_s <= 0:
        return f"in {start_s:.1f} s"
    return f"in {stop_s + start_s:.1f} s (stop {stop_s:.1f} s, start {start_s:.1f} s)"


def gb(n: object) -> str:
    """Bytes as '12.3 GB', or '?'."""
    return f"{n / 1e9:.1f} GB" if isinstance(n, int | float) else "?"


def format_report(rep: dict[str, Any]) -> str:
    """One GPU's verify line: requested vs effective, KV, Mamba, free memory, time to ready or
    why not (from a journal or a result's report dict; read defensively)."""
    req = rep.get("requested") if isinstance(rep.get("requested"), dict) else {}
    eff = rep.get("effective") if isinstance(rep.get("effective"), dict) else {}
    assert isinstance(req, dict) and isinstance(eff, dict)
    head = f"GPU {rep.get('gpu')}: "
    if not rep.get("ok"):
        word = "REFUSED" if rep.get("error_reason") == "refused" else "FAILED"
        return head + f"{word} {rep.get('failure') or ''}".rstrip()
    cap = " (CAPPED)" if rep.get("capped") else ""
    ready = ready_words(rep.get("time_to_ready_s"), rep.get("stop_s"))
    return head + (
        f"ready {ready}; max_running requested "
        f"{req.get('max_running_requests') or 'auto'} -> effective "
        f"{eff.get('max_running_requests') or '?'}{cap}; "
        f"mamba slots {eff.get('mamba_slots') or '?'}"
        f"; KV tokens {eff.get('kv_tokens') or '?'}; free {gb(rep.get('free_memory_bytes'))}"
    )
