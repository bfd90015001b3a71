"""What one server is, each poll: its state by the rules below, and its snapshot for the panels.

State rules, per server (the current launch only; see ``tui.fleet.server_log``):

* a stop was requested (``FleetMonitor.mark_stopping``) and the same process still runs -> STOPPING;
* the fleet state records this GPU on this port, and what runs or answers there is not its
  recorded server (no record, or another process) -> UNKNOWN;
* its log says a SIGTERM drain began (whoever sent it) and it still runs -> STOPPING;
* ``/ready`` 200 -> READY, or STUCK when it has requests and made no progress for longer than
  the liveness bound (``tui.fleet.liveness``);
* on a server without ``/ready`` (SGLang <= 0.5.19), its log's ready line, while the only
  ``/health`` answer held predates that line (or none has come yet) -> READY (or STUCK) at once:
  ``/health`` generates a token and takes >= 1 s, so it lags the line by a second or more; a
  ``/health`` begun after the line decides from then on;
* process alive and the log shows a fatal error since the launch -> FAILED (with the error line);
* process alive, probes time out -> STALE (busy or hung, not known dead);
* process alive otherwise -> STARTING, with the log's phase;
* process gone while starting with an error in its log -> FAILED;
* process gone, and it was stopped on purpose -> STOPPED: the console asked
  (``mark_stopping``), its address is cordoned (an operation of gpufleet is stopping it), its log
  says a SIGTERM drain began (whoever sent it), or the fleet state recorded it while it ran and
  no longer does (gpufleet stopped it and dropped its record, or relaunched the GPU);
* process gone otherwise -> CRASHED, with how it ended when the kernel still said
  (``killed by SIGKILL``: it was a zombie when seen gone) or ``exit status unknown``;
* never seen running, while the fleet state records a server for it that does not run ->
  CRASHED too (``gpufleet status`` after the fact: nobody stopped it), or FAILED when its log
  ends in a startup error; never seen and not recorded -> ABSENT.
"""

from __future__ import annotations

from tui.fleet.freshness import decayed_throughput
from tui.fleet.running_profiles import RunningProfile
from tui.fleet.snapshot import ServerSnapshot, ServerState
from tui.fleet.speculative import speculative
from tui.fleet.tracker import Tracker, live_number, note_decode, pressure_words, stamp_age
from tui.servers.probe import HEALTH_PATHS, ProbeStatus
from tui.servers.procinfo import boot_id
from tui.sglang.caps import running_capped


def _either(first: object, second: object) -> object:
    """``first`` unless it is None, else ``second`` (a plain call: a closure with a generator,
    made per server per poll, cost a third of the snapshot's building)."""
    return first if first is not None else second


def _stuck_for(t: Tracker, now: float) -> float | None:
    """Feed this poll's progress counters to the liveness watch; seconds stuck, or None."""
    load = t.load
    busy = load is not None and (load.running or 0) + (load.queued or 0) > 0
    fingerprint = (
        *(load.progress if load is not None else ()),
        float(t.log.decode_lines),
        float(t.log.prefill_lines),
    )
    t.progress.observe(now, busy, fingerprint)
    return t.progress.stuck_for(now, busy)


def _ready_by_log(t: Tracker) -> bool:
    """The log says ready and no generating probe begun since says otherwise (no ``/ready``).

    SGLang prints its ready line after the warm-up request, when ``/health`` starts to answer
    200; the monitor's ``/health`` in flight or last answered may have begun before (a 503 from
    the warm-up): it says nothing about the server now.
    """
    readiness = t.readiness
    if readiness is None or readiness.endpoint not in HEALTH_PATHS:
        return False  # a /ready server: its /ready decides
    if not (t.alive and t.log.ready and t.log_ready_at is not None):
        return False
    return t.health is None or t.health_at <= t.log_ready_at


def _state(t: Tracker, stuck: bool = False) -> ServerState:
    status = t.readiness.status if t.readiness else None
    answers = status in (ProbeStatus.READY, ProbeStatus.UP, ProbeStatus.TIMEOUT)
    if t.stopping:
        same = t.stop_pid is None or (t.process is not None and t.process.pid == t.stop_pid)
        if same and (t.alive or (not t.spec.is_local and answers)):
            return ServerState.STOPPING
        t.stopping = False  # gone (or replaced by a relaunch): the usual rules apply
    if t.known is False and (t.alive or answers):
        return ServerState.UNKNOWN  # serves the port, but is not what the fleet state records
    if t.log.stopping and (t.alive or (not t.spec.is_local and answers)):
        # A SIGTERM drain began, sent by anyone: /health (0.5.17 has no /ready) answers 503 and
        # the process exits when the drain ends.
        return ServerState.STOPPING
    if status is ProbeStatus.READY or (status is ProbeStatus.UP and _ready_by_log(t)):
        return ServerState.STUCK if stuck else ServerState.READY
    if t.log.ready and t.alive and status is not ProbeStatus.TIMEOUT:
        t.ever_ready = True  # ready before the console attached; probes may lag a moment
    if t.alive or (not t.spec.is_local and status in (ProbeStatus.UP, ProbeStatus.TIMEOUT)):
        if t.log.failed:
            return ServerState.FAILED
        if status is ProbeStatus.TIMEOUT:
            return ServerState.STALE
        return ServerState.STARTING
    launched = t.follower is not None and t.follower.launches > 0
    started = t.ever_ready or t.log.ready
    if t.process is None:
        if t.record is not None and t.spec.is_local and not t.cordoned:
            # Recorded, not running, and no stop of gpufleet's dropped its record: it died.
            return ServerState.FAILED if t.log.failed and not started else ServerState.CRASHED
        return ServerState.FAILED if t.log.failed and launched else ServerState.ABSENT
    if t.log.failed and not started:
        return ServerState.FAILED
    return ServerState.STOPPED if _stopped_on_purpose(t) else ServerState.CRASHED


def _stopped_on_purpose(t: Tracker) -> bool:
    """Whether the gone process was stopped (by gpufleet, or drained by anyone's SIGTERM)."""
    if t.stop_asked or t.log.stopping or t.cordoned:
        return True
    record, process = t.record, t.process
    still_recorded = record is not None and process is not None and record.pid == process.pid
    return t.recorded_alive and not still_recorded


def _crash_words(t: Tracker) -> str:
    """How a crashed server ended, as far as anyone can know."""
    if t.exit_status:
        return t.exit_status
    record = t.record
    if t.process is None and record is not None and record.boot_id and record.boot_id != boot_id():
        return "exit status unknown: the machine restarted since it was launched"
    return "exit status unknown"


def server_snapshot(t: Tracker, now: float, profile: RunningProfile | None) -> ServerSnapshot:
    """The server of ``t`` as the panels show it: its state by the rules above (``t.state`` is
    set to it), its settings (``/server_info``, else the log), its load (``/metrics``, else
    the log, only while it answers)."""
    stuck_for = _stuck_for(t, now)
    state = _state(t, stuck=stuck_for is not None)
    t.state = state
    log, load, info = t.log, t.load, t.info
    live = state in (
        ServerState.READY,
        ServerState.STUCK,
        ServerState.STALE,
        ServerState.STOPPING,
    )
    effective = _either(info.max_running_effective if info else None, log.max_running_effective)
    requested = _either(info.max_running_requested if info else None, log.max_running_requested)
    throughput_age = note_decode(t, now)
    capped = running_capped(
        requested if isinstance(requested, int) else None,
        effective if isinstance(effective, int) else None,
        log.cap_cause,
    )
    if load is not None and t.load_at is not None:
        epoch = t.process.pid if t.process is not None else None
        t.latency.offer(t.load_at, t.probe.latency_histograms, epoch)
    kv = _either(info.max_total_num_tokens if info else None, log.kv_tokens)
    mamba = _either(info.max_mamba_cache_size if info else None, log.mamba_slots)
    pid = t.process.pid if t.process else None
    if state is ServerState.CRASHED and pid is None and t.record is not None:
        pid = t.record.pid  # the recorded server that died
    return ServerSnapshot(
        port=t.spec.port,
        state=state,
        pid=pid,
        phase=log.phase if state is ServerState.STARTING else "",
        log_path=str(t.follower.path) if t.follower else None,
        kv_tokens=kv if isinstance(kv, int) else None,
        mamba_slots=mamba if isinstance(mamba, int) else None,
        max_running_requested=requested if isinstance(requested, int) else None,
        max_running_effective=effective if isinstance(effective, int) else None,
        capped=bool(capped),
        running=live_number(live, load.running if load else None, log.running),
        queued=live_number(live, load.queued if load else None, log.queued),
        token_usage=live_number(live, load.token_usage if load else None, log.token_usage),
        mamba_usage=live_number(live, load.mamba_usage if load else None, log.mamba_usage),
        gen_throughput=decayed_throughput(
            live_number(live, load.gen_throughput if load else None, log.gen_throughput),
            throughput_age,
        ),
        swa_usage=live_number(live, load.swa_usage if load else None, None),
        cache_hit_rate=live_number(live, load.cache_hit_rate if load else None, None),
        accept_len=live_number(live, load.accept_len if load else None, log.accept_len),
        spec=speculative(load, info, log.accept_len) if live else None,
        latency=t.latency.summary if live else None,
        throughput_history=log.throughput_history,
        allocation_lines=log.allocation_lines,
        last_error=log.last_error,
        error_reason=log.error_reason,
        error_fatal=log.error_fatal,
        stuck_for_s=stuck_for if state is ServerState.STUCK else None,
        pressure=pressure_words(log),
        pressure_age_s=stamp_age(log.pressure_stamp, now),
        ready_at=t.ready_at,
        updated_at=now,
        profile=profile,
        load_age_s=None if t.load_at is None or not live else max(now - t.load_at, 0.0),
        throughput_age_s=throughput_age if live else None,
        cmdline=t.process.cmdline if t.process else (),
        start_ticks=t.process.start_ticks if t.process else None,
        stranger=t.spec.is_local and t.known is None and t.process is not None and t.alive,
        exit_status=_crash_words(t) if state is ServerState.CRASHED else None,
    )
