"""The simulated scheduler's batch lines: what SGLang's scheduler prints after a prefill batch
and every ``--decode-log-interval`` decode steps (SGLang 0.5.23
``srt/managers/scheduler_components/metrics_reporter.py`` ``report_prefill_stats`` /
``report_decode_stats``), filled from the scheduler's state; the text is
``tui.sim.logfmt``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.sim import logfmt
from tui.sim.throughput import cuda_graph

if TYPE_CHECKING:
    from tui.sim.scheduler import SimScheduler

ACCEPT_JITTER = 0.08
"""How far a decode line's accept length strays from the model's mean (real lines vary)."""


def prefill_stats(
    sch: SimScheduler,
    new_seq: int,
    tokens: int,
    running_before: int,
    seconds: float,
    graphed: bool = False,
) -> str:
    """The ``Prefill batch`` line of a batch that just ran.

    Args:
        sch: The scheduler, after the batch.
        new_seq: Requests the batch began.
        tokens: Tokens it prefilled.
        running_before: Requests running before it.
        seconds: Its wall duration.
        graphed: It replayed a prefill CUDA graph (SGLang 0.5.17 captures them).

    Returns:
        The message.
    """
    pending = sum(r.prefill_left for r in sch.waiting)
    if sch.prefilling is not None:
        pending += sch.prefilling.prefill_left
    return logfmt.prefill_line(
        sch.plan,
        new_seq=new_seq,
        new_token=tokens,
        cached_token=0,
        token_usage=sch.token_usage(),
        mamba_usage=sch.mamba_usage(),
        running=running_before,
        queued=len(sch.waiting),
        pending=pending,
        input_throughput=tokens / max(seconds, 1e-9),
        cuda_graph=graphed,
    )


def decode_stats(sch: SimScheduler, gen_throughput: float) -> str:
    """The ``Decode batch`` line for the running batch.

    Args:
        sch: The scheduler.
        gen_throughput: Tokens per second over the interval the line closes.

    Returns:
        The message.
    """
    spec = sch.plan.speculative
    return logfmt.decode_line(
        sch.plan,
        running=len(sch.running),
        tokens=sch.used_tokens(),
        token_usage=sch.token_usage(),
        mamba_num=sch.mamba_num(),
        mamba_usage=sch.mamba_usage(),
        # Never below 1: a step keeps at least the token it verified (1.00, rate 0.00, as a
        # real 0.5.17 printed with a draft that was never right).
        accept_len=max(1.0, sch.accept + sch.rng.uniform(-ACCEPT_JITTER, ACCEPT_JITTER))
        if spec
        else 1.0,
        gen_throughput=gen_throughput,
        queued=len(sch.waiting),
        cuda_graph=sch.graphs and cuda_graph(sch.plan, len(sch.running)),
    )
