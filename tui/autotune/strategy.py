"""The search strategy: a challenger climb around the incumbent, ordered by the preflight.

What the fleet can measure decides the strategy. A canary answers one question, with a
sequential test that stops as soon as the answer is clear: is this candidate better, worse, or
not measurably different from the incumbent the other GPUs run over the same seconds? It does
not give a stable absolute score to compare across candidates measured at different times
(the job's prompt mix, the pipeline's load and the machine drift), and each answer costs
minutes of one GPU, so a search gets a handful of answers, not hundreds. That rules out a grid
(the default space has 15,552 points) and makes a Bayesian model over absolute scores both
starved and fed the wrong kind of observation. So:

1. **Neighbours**: from the incumbent, every point that changes ONE knob to the next value up
   or down in its list (a knob still on SGLang's automatic value may take any of its values).
   One knob at a time keeps every change small (a regression stays small and is explained by
   one diff line) and makes a verdict attributable to that knob. The exception is a **coupled
   pair** (``COUPLED``): two knobs that act through one limit also move together, one step
   each in the same direction. SGLang 0.5.23 caps the running requests at ``Mamba slots //
   slots per request`` (``srt/mem_cache/kv_cache_configurator.py``, ``tui.sglang.caps``), and
   with speculative decoding an automatic ``max_running_requests`` is reset to 48: on that
   ridge more slots alone still run the same batch and a higher ``max_running_requests`` alone
   is capped back, so every single move is predicted identical (skipped) while the better
   configurations need both. Measured on the simulated 7-GPU fleet, a single-knob climb
   stopped there at 0.871 of the grid's best.
   Beside them, **whole moves** (``tui.autotune.jumps``): for each running batch of the space
   above the incumbent's, the one move that sets everything it needs (the pool that does not
   cap it, the fraction whose KV pool holds it), as the seed's operator moved four knobs at
   once; judged by the preflight as one move, ranked with the rest, so the first canaries of a
   search are the predicted-best whole moves. Measured on the simulated fleet: from the seed's
   baseline the first canary is 0.91 / 360 slots / 72 running, +101% by the model, where the
   single-knob climb spent its first canaries on +27% steps that a noisy window called 'no
   measurable difference'.
2. **Preflight filter**: each neighbour is predicted on the canary GPU by the preflight (SGLang
   0.5.23's memory plan, calibrated on the running servers' logs). One predicted not to fit or
   not to start is recorded as rejected and is NEVER launched.
   One whose predicted server is the incumbent's (same effective max running requests, KV
   tokens, Mamba slots, CUDA-graph batch ceiling, draft tokens: e.g. a ``max_running_requests``
   above SGLang's Mamba cap, or a graph ceiling above the batch that can run) is recorded as
   skipped: a canary could only measure noise.
   One predicted to hold fewer running requests than the incumbent (its KV pool retracts what
   its Mamba pool lets run), or to run a server already measured against this incumbent, is
   skipped too.
3. **Order by a cheap model**: the feasible neighbours are tried best-predicted first: the
   batch the pools hold (``held_batch``: the preflight's effective max running requests, less
   where the KV pool cannot hold their half outputs; decode is memory-bandwidth bound, so that
   batch is the first-order driver of tokens/s), then the share its CUDA graphs cover, then
   its KV tokens per running request, then fewer changes.
4. **Challenge**: the first one is canaried against the incumbent. ``better`` (the interval
   excludes 0 on the gain side) -> **a line search along that move** before adopting it
   (``further``): the same move taken further, 1, 2, 4... steps beyond it, each canaried on the
   canary GPU against the same control, while each measures better than the last; the best of
   the line is then rolled out to the fleet and the climb continues around it. A canary
   relaunches one GPU, a rollout every GPU (on a real node each relaunch is minutes of a GPU
   not serving): a climb that rolled out every single step of a long ridge (the Mamba slots
   from 80 to 320 are six steps of 40) spent its wall budget on rollouts, measured at 0.871 of
   the grid's best on the simulated fleet. ``worse`` or ``no measurable difference`` -> the
   canary GPU goes back to the incumbent (or the line's best) at once and the next neighbour
   is tried (a change without measurable gain is not worth a fleet-wide restart).
5. **End**: no untried feasible neighbour is left (a local optimum under single-knob moves), or
   the budget (wall time, exploration GPU-seconds, largest regression) is spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tui.autotune.space import Candidate, KnobValue, SearchSpace
from tui.retune.preflight import Preflight

Assignment = Mapping[str, KnobValue | None]
"""Every knob of the space with its value (None: SGLang's automatic value)."""


def point_key(point: Assignment) -> str:
    """A stable text naming a full assignment (for 'already tried')."""
    return ",".join(f"{k}={'auto' if v is None else format(v, 'g')}" for k, v in point.items())


def neighbours(space: SearchSpace, incumbent: Assignment) -> list[Candidate]:
    """Every single-knob move from ``incumbent`` to the adjacent values of that knob, then the
    coupled pairs' joint moves (``coupled_moves``).

    Args:
        space: The knobs and their values.
        incumbent: The incumbent's value of every knob of the space.

    Returns:
        Candidates: the single moves in knob order, lower value first, then the pairs.
    """
    out: list[Candidate] = []
    for knob in space.knobs():
        values = sorted(space.values_of(knob))
        current = incumbent.get(knob)
        if current is None:
            moves = values
        else:
            below = [v for v in values if v < current]
            above = [v for v in values if v > current]
            moves = ([below[-1]] if below else []) + ([above[0]] if above else [])
        out += [Candidate.of({knob: v}) for v in moves]
    return out + coupled_moves(space, incumbent)


COUPLED: tuple[tuple[str, str], ...] = (("max_mamba_cache_size", "max_running_requests"),)
"""Knob pairs that also move together (the Mamba slots bound the running requests)."""


def further(
    space: SearchSpace, incumbent: Assignment, move: Candidate, stride: int
) -> Candidate | None:
    """``move`` taken further: each knob it sets moved ``stride`` more values along the
    direction it went from the incumbent (clamped to the knob's last value).

    Args:
        space: The knobs and their values.
        incumbent: The incumbent's value of every knob of the space.
        move: A move that measured better.
        stride: Values to go beyond ``move`` (>= 1).

    Returns:
        The candidate, or None when the move has no direction (a knob left SGLang's automatic
        value, or did not change) or every knob is already at its end.
    """
    out: dict[str, KnobValue] = {}
    moved = False
    for knob, value in move.knobs:
        start = incumbent.get(knob)
        if start is None or value == start:
            return None
        values = sorted(space.values_of(knob))
        side = [v for v in values if (v > value if value > start else v < value)]
        if side:
            moved = True
            out[knob] = (
                side[min(stride, len(side)) - 1] if value > start else side[-min(stride, len(side))]
            )
        else:
            out[knob] = value
    return Candidate.of(out) if moved else None


def _steps(values: Sequence[KnobValue], current: KnobValue | None, up: bool) -> list[KnobValue]:
    """The next value in one direction (every value of that side when the knob is on auto)."""
    if current is None:
        return list(values)
    side = [v for v in values if (v > current if up else v < current)]
    if not side:
        return []
    return [side[0] if up else side[-1]]


def coupled_moves(space: SearchSpace, incumbent: Assignment) -> list[Candidate]:
    """Every ``COUPLED`` pair of the space moved one step each, both up or both down.

    Args:
        space: The knobs and their values.
        incumbent: The incumbent's value of every knob of the space.

    Returns:
        Candidates setting both knobs of a pair (a knob on SGLang's automatic value may take
        any of its values), up moves first.
    """
    out: list[Candidate] = []
    knobs = set(space.knobs())
    for first, second in COUPLED:
        if first not in knobs or second not in knobs:
            continue
        a_values, b_values = sorted(space.values_of(first)), sorted(space.values_of(second))
        for up in (True, False):
            for a in _steps(a_values, incumbent.get(first), up):
                for b in _steps(b_values, incumbent.get(second), up):
                    move = Candidate.of({first: a, second: b})
                    if move not in out:  # two knobs on auto give the same pairs both ways
                        out.append(move)
    return out


def apply_move(incumbent: Assignment, candidate: Candidate) -> dict[str, KnobValue | None]:
    """The full assignment after ``candidate``'s moves."""
    return {**incumbent, **candidate.as_dict()}


_SERVER_SHAPE = (
    "max_running_requests",
    "max_total_num_tokens",
    "max_mamba_cache_size",
    "cuda_graph_max_bs",
    "speculative",
    "num_draft_tokens",
    "chunked_prefill_size",
    "page_size",
)
"""What a server does with its memory, as the plan predicts it (the knobs act through these)."""


def same_server(a: Preflight, b: Preflight) -> bool:
    """Whether two predictions describe the same running server (a move that changes nothing).

    Args:
        a: One prediction.
        b: The other.

    Returns:
        True when every field of ``_SERVER_SHAPE`` of their plans is equal.
    """
    return all(getattr(a.plan, f) == getattr(b.plan, f) for f in _SERVER_SHAPE)


@dataclass(frozen=True, slots=True)
class Ranked:
    """A feasible candidate with its prediction, in the order it will be tried."""

    candidate: Candidate
    """The move."""
    prediction: Preflight
    """The preflight on the canary GPU."""
    score: tuple[float, ...]
    """The sort key (larger first)."""


ROOM_KNOB = "mem_fraction_static"
"""The knob that gives the KV pool its room (the memory left after weights, graphs and the
Mamba pool is the KV pool's)."""


def kv_room(prediction: Preflight, mean_output_tokens: int) -> float:
    """KV tokens per running request, as a share of the job's mean output (at most 1)."""
    running = max(1, prediction.max_running_effective)
    return min(1.0, prediction.kv_tokens / (running * max(1, mean_output_tokens)))


def with_room(
    space: SearchSpace,
    incumbent: Assignment,
    move: Candidate,
    prediction: Preflight,
    current: Preflight,
    mean_output_tokens: int,
) -> Candidate | None:
    """``move`` with ``mem_fraction_static`` one value up, when it raises the running batch
    and leaves each request less KV room than the incumbent has.

    A larger batch needs KV room as well as Mamba slots: SGLang 0.5.23 retracts decode
    requests when the KV pool runs out (``srt/managers/scheduler.py`` ``update_running_batch``:
    ``check_decode_mem`` fails -> ``batch.retract_decode()``), so past the point where the pool
    binds, more slots and running requests alone measure worse while the same move with a
    larger memory fraction gains (measured on the simulated fleet: 400 slots and 80 running
    -20% at fraction 0.88; the model's best of the grid runs them at 0.91). The move with more
    memory is proposed beside the move, and ranked by room.

    Returns:
        The move with the fraction's next value up, or None (the move sets the fraction, does
        not raise the batch, leaves as much room, or the fraction is at its top).
    """
    knobs = dict(move.knobs)
    if ROOM_KNOB in knobs or ROOM_KNOB not in space.knobs():
        return None
    if prediction.max_running_effective <= current.max_running_effective:
        return None
    if kv_room(prediction, mean_output_tokens) >= kv_room(current, mean_output_tokens):
        return None
    up = _steps(sorted(space.values_of(ROOM_KNOB)), incumbent.get(ROOM_KNOB), up=True)
    if not up or incumbent.get(ROOM_KNOB) is None:
        return None
    return Candidate.of({**knobs, ROOM_KNOB: up[0]})


def starves_kv(prediction: Preflight, current: Preflight, mean_output_tokens: int) -> bool:
    """Whether a move keeps (or lowers) the running batch while leaving each request less KV
    room than the incumbent, where the pool binds: no more concurrency to gain, and SGLang
    retracts decode requests sooner. Measured on the simulated fleet: 400 Mamba slots at the
    same 72 running (the Mamba pool took KV memory) -52.7%, fraction 0.88 instead of 0.91 at 72
    running -41.6%; the first ended a search on its regression budget."""
    if prediction.max_running_effective > current.max_running_effective:
        return False
    room = kv_room(prediction, mean_output_tokens)
    return room < 1.0 and room < kv_room(current, mean_output_tokens)


HELD_SHARE = 0.5
"""The share of its output a running request holds in the KV pool on average: a request in
decode holds its prompt and what it generated so far, and a batch's requests are spread over
their lives (continuous batching), so about half their outputs (the prompts are short beside
~2,500-token outputs). Measured against the simulator's scheduler (``tui.sim.kvpool``, SGLang's
admission and retraction rules): 80 running on 127,360 KV tokens (51 requests' whole outputs)
run at full speed; 72 on 28,928 (23 halves) run about 23."""


def held_batch(prediction: Preflight, mean_output_tokens: int) -> float:
    """The batch the predicted server holds running: its effective max running requests, or
    fewer when its KV pool cannot hold that many requests' half outputs (``HELD_SHARE``)."""
    running = max(1, prediction.max_running_effective)
    hold = prediction.kv_tokens / max(1.0, HELD_SHARE * max(1, mean_output_tokens))
    return min(float(running), hold)


def retracts(prediction: Preflight, current: Preflight, mean_output_tokens: int) -> bool:
    """Whether a move asks for more running requests than its KV pool holds and ends up
    holding fewer than the incumbent does (``held_batch``): SGLang admits them and retracts.
    Measured on the simulated fleet: 400 slots and 80 running at fraction 0.93 with 3
    speculative steps hold 704 KV tokens, 181 tok/s against the incumbent's 3,891."""
    held = held_batch(prediction, mean_output_tokens)
    return held < prediction.max_running_effective and held < held_batch(
        current, mean_output_tokens
    )


def score(prediction: Preflight, changes: int, mean_output_tokens: int) -> tuple[float, ...]:
    """The cheap model's key: the batch the pools hold (``held_batch``: effective concurrency,
    less where the KV pool binds), then the share of that batch its CUDA graphs cover, then KV
    room per request, then simplicity.

    SGLang 0.5.23 replays a captured CUDA graph only for a decode batch up to the graph ceiling
    (``srt/model_executor/runner/decode_cuda_graph_runner.py`` ``can_run_graph``:
    ``cuda_graph_bs <= self.max_bs``); a larger batch runs eagerly, slower per step. A move that
    puts the ceiling below the batch the pools allow is tried after those that keep it covered
    (on the simulated fleet such moves measured about -11% each, and a search that tried them
    first ran out of wall time before the moves that gained).

    Args:
        prediction: The preflight of the candidate.
        changes: Knobs the candidate changes.
        mean_output_tokens: The job's mean output length (KV room is judged against it).

    Returns:
        A tuple to sort by, larger first.
    """
    running = max(1, prediction.max_running_effective)
    graphs = min(1.0, prediction.plan.cuda_graph_max_bs / running)
    held = round(held_batch(prediction, mean_output_tokens), 1)
    return (held, graphs, kv_room(prediction, mean_output_tokens), -float(changes))


def rank(
    predicted: Sequence[tuple[Candidate, Preflight]], mean_output_tokens: int = 2500
) -> list[Ranked]:
    """The feasible candidates (predicted to fit), best-predicted first.

    Args:
        predicted: Candidates with their preflights.
        mean_output_tokens: The job's mean output length.

    Returns:
        Feasible candidates in the order to try them (stable for equal scores), without a later
        one predicted to run the same server as an earlier one.
    """
    ok = [Ranked(c, p, score(p, len(c.knobs), mean_output_tokens)) for c, p in predicted if p.fits]
    kept: list[Ranked] = []
    for ranked in sorted(ok, key=lambda r: r.score, reverse=True):
        # Two moves predicted to run the same server would be two canaries of one server (a
        # coupled pair past the cap: more running requests capped back to the same batch).
        if not any(same_server(ranked.prediction, k.prediction) for k in kept):
            kept.append(ranked)
    return kept
