"""One retune of the real fleet for the console: the engine, events forwarded, outcome recorded.

The same steps as ``gpufleet apply`` (``tui.retune.cli``): the previous profile of each GPU and
the diff for the journal, ``open_target`` on the real fleet, the engine's events forwarded as
they happen, then the running-profile state (for rollback) and the journal entry written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from tui.profiles import Profile, diff
from tui.retune.engine import RetuneEngine
from tui.retune.events import ApplyResult
from tui.retune.journal import record_apply
from tui.retune.options import ApplyOptions
from tui.state.fleet_state import profile_of, read_records, read_running, record_outcome

EventSink = Callable[[object], None]
"""Receives every ``tui.retune.events`` dataclass of an apply, on the event loop."""


def previous_profiles(gpus: Sequence[int]) -> dict[int, str | None]:
    """The profile each GPU runs now (running-profile state, else the fleet record's name).

    Args:
        gpus: The GPUs about to be retuned.

    Returns:
        GPU -> profile name (None when unknown).
    """
    running = read_running()
    records = read_records()
    out: dict[int, str | None] = {}
    for gpu in gpus:
        entry = running.get(gpu)
        if entry is not None and entry.current_name:
            out[gpu] = entry.current_name
        else:
            out[gpu] = records[gpu].profile if gpu in records else None
    return out


def diff_lines(profile: Profile, gpus: Sequence[int]) -> tuple[str, ...]:
    """Profile diff from what the GPUs run now, when they all run the same document.

    Args:
        profile: The profile about to be applied.
        gpus: The GPUs about to be retuned.

    Returns:
        One line per changed field; empty when the GPUs run different (or unknown) profiles.
    """
    running = read_running()
    docs = [running[g].current for g in gpus if g in running and running[g].current]
    if not docs or any(doc != docs[0] for doc in docs):
        return ()
    old = docs[0]
    assert old is not None
    return tuple(str(change) for change in diff(profile_of(old), profile))


async def run_apply(
    profile: Profile,
    gpus: Sequence[int],
    options: ApplyOptions,
    on_event: EventSink | None = None,
    term_timeout: float = 30.0,
) -> ApplyResult:
    """Retune ``gpus`` with ``profile`` on the real fleet; journal and record the outcome.

    Args:
        profile: The validated profile.
        gpus: GPUs to retune.
        options: Timeouts and measurement windows (``measure`` is turned off when nothing ran
            before, since there is no "before" to compare with).
        on_event: Called with each event as it happens.
        term_timeout: SIGTERM -> SIGKILL seconds when stopping the old servers.

    Returns:
        The apply's result (also the last event, ``ApplyFinished``).
    """
    from tui.retune.wiring import open_target  # httpx and the probes only when really applying

    targets = tuple(sorted(set(gpus)))
    records = read_records()
    measure = options.measure and any(g in records for g in targets)
    options = replace(options, measure=measure)
    target, probe = open_target(profile, targets, term_timeout)
    try:
        engine = RetuneEngine(
            target,
            targets,
            options,
            probe=probe,
            previous_profiles=previous_profiles(targets),
            diff=diff_lines(profile, targets),
        )
        if on_event is not None:
            engine.subscribe(on_event)
        result = await engine.run()
    finally:
        await target.aclose()
    if not result.refused:
        record_outcome(
            profile,
            [r.gpu for r in result.reports if r.ok],
            [r.gpu for r in result.reports if not r.ok],
        )
    record_apply(result)
    return result
