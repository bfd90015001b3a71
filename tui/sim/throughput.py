"""The simulator's throughput model, as a pure function tests and the canary compare against.

Model (one server, decode-bound, continuous batching)::

    step_time(b)   = (t0 + t1 * b) / speed          # one forward (target verify + draft) for b reqs
    tokens/step    = b * A                          # A = speculative accept length (1 without spec)
    output tok/s   = b * A / step_time(b)           # rises with b, flattens towards A * speed / t1
    requests/s     = output tok/s / mean output length

``t0`` (fixed cost per step: weights read, kernel launches) and ``t1`` (per-request cost: state and
KV reads) come from the ModelSpec. For qwen3.6-27b on a B200, t0 = 16 ms, t1 = 0.55 ms, A = 3.0:
16 running -> 24.8 ms per step, ~1,935 tok/s, ~0.87 req/s at a 2,220-token mean output; that is the
seed's baseline (≈13,500 tok/s and ≈6.1 req/s over 7 GPUs). 40 running -> ~3,160 tok/s (x1.63 for
x2.5 concurrency), 64 -> ~3,750: more concurrency helps with diminishing returns. The scheduler
charges prefill at the model's prefill rate (decode pauses meanwhile), which this model leaves
out: prompts are short next to ~2,200-token outputs.

Three of SGLang's trade-offs make the optimum more than "the largest concurrency that fits" (each
is off at the seed's settings, so the calibration above is unchanged):

- **The KV pool.** Where the running cap times one request's whole reservation (prompt plus
  ``max_new_tokens``) exceeds ``max_total_num_tokens``, SGLang admits against a decaying
  ``new_token_ratio`` and retracts when decode runs out (``tui.sim.kvpool``, each rule cited):
  fewer requests run and retracted ones are prefilled again. That rate has no closed form, so
  ``expected_rate`` then runs the simulator's own scheduler on virtual time
  (``tui.sim.steady``): the servers, the tests and the bench's grid share one code. On the
  seed's B200 each 40 more Mamba slots lift the cap by 8 and take ~160,000 KV tokens, so past
  ~320 slots (64 running) the pool starves the batch: 360 slots at fraction 0.88 run 72
  requests on ~29,000 tokens and make ~2,300 tok/s, not ~3,900.

- **Speculative steps** (EAGLE chain, topk 1: draft tokens d = steps + 1). Each request gains
  ``A(d) = accept_length * chain(d) / chain(d_ref)`` tokens per step, ``chain(d) = 1 + a + ... +
  a^(d-1)`` (a = ``draft_accept_rate``: a token counts only if every draft before it was
  accepted). Each step costs ``draft_step_s`` per extra draft step (SGLang 0.5.23
  ``srt/speculative/eagle_worker_v2.py`` drafts in ``for i in range(self.speculative_num_steps)``,
  one draft forward each) and the target's verify reads d tokens per request
  (``srt/speculative/eagle_info.py``: ``draft_token_num`` tokens per request), so the per-request
  term scales by d / d_ref. More steps win at a small batch and lose at a large one, which is why
  SGLang's own adaptive speculation allows up to 7 steps at batch 1 but at most 3 from batch 8
  (``srt/speculative/adaptive_spec_params.py`` ``DEFAULT_ADAPTIVE_CONFIG``).
- **CUDA-graph ceiling.** A decode batch larger than the captured maximum runs eagerly
  (``srt/model_executor/runner/decode_cuda_graph_runner.py`` ``can_run_graph``:
  ``is_bs_supported = cuda_graph_bs <= self.max_bs``), paying ``eager_overhead_s`` per step in
  kernel launches; the decode line then says ``cuda graph: False``. The plan's
  ``cuda_graph_max_bs`` is the captured maximum (``--cuda-graph-max-bs-decode``, capped by the
  effective max running requests), so it only bites when set below the running batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.sglang.models import ModelSpec
from tui.sglang.plan_types import MemoryPlan
from tui.sim.steady import kv_binds, steady_run

DEFAULT_MEAN_OUTPUT_TOKENS = 2220
"""Mean output length when a request does not bound it (seed: 13,500 tok/s / 6.1 req/s)."""


@dataclass(frozen=True, slots=True)
class RateEstimate:
    """Steady-state rates of one server at a fixed number of running requests."""

    running: int
    """Requests decoding together."""
    step_s: float
    """Wall seconds per decode step."""
    output_tokens_per_s: float
    """Generated tokens per wall second."""
    requests_per_s: float
    """Completed requests per wall second at the given mean output length."""


def _chain(rate: float, draft_tokens: int) -> float:
    """Expected accepted tokens of a chain of ``draft_tokens`` (1 + a + ... + a^(d-1))."""
    return sum(rate**i for i in range(max(draft_tokens, 1)))


def accept_length(model: ModelSpec, plan: MemoryPlan) -> float:
    """Tokens each request gains per step: 1 without spec, else the chain's accept length at the
    plan's draft tokens (``model.accept_length`` at the reference draft tokens)."""
    if not plan.speculative:
        return 1.0
    ref = _chain(model.draft_accept_rate, model.reference_draft_tokens)
    return model.accept_length * _chain(model.draft_accept_rate, plan.num_draft_tokens) / ref


def cuda_graph(plan: MemoryPlan | None, running: int) -> bool:
    """Whether a decode batch of ``running`` requests replays a CUDA graph (False: eager)."""
    return plan is None or plan.cuda_graph_max_bs <= 0 or running <= plan.cuda_graph_max_bs


def step_seconds(
    model: ModelSpec, running: int, speed: float = 1.0, plan: MemoryPlan | None = None
) -> float:
    """Wall time of one decode step with ``running`` requests.

    Args:
        model: the model (its t0 and t1, draft and eager costs).
        running: batch size (>= 1).
        speed: the simulator's ``--sim-speed``.
        plan: the server's plan (speculative draft tokens, CUDA-graph ceiling); None: the
            reference settings.

    Returns:
        Seconds.
    """
    b = max(running, 1)
    base, per = model.decode_base_s, model.decode_per_req_s
    if plan is not None and plan.speculative:
        ref = model.reference_draft_tokens
        base += model.draft_step_s * (plan.num_draft_tokens - ref)
        per *= plan.num_draft_tokens / ref
    if not cuda_graph(plan, b):
        base += model.eager_overhead_s
    return (base + per * b) / speed


def expected_rate(
    plan: MemoryPlan,
    model: ModelSpec,
    running: int | None = None,
    speed: float = 1.0,
    mean_output_tokens: float = DEFAULT_MEAN_OUTPUT_TOKENS,
) -> RateEstimate:
    """Steady-state throughput of one simulated server.

    Args:
        plan: the server's memory plan (its effective max_running_requests and spec setting).
        model: the served model.
        running: requests decoding together (default: a full queue, as many as the cap and
            the KV pool let run; where the pool binds, the scheduler's own virtual-time run,
            ``tui.sim.steady``).
        speed: ``--sim-speed``.
        mean_output_tokens: mean generated tokens per request.

    Returns:
        The estimate.
    """
    if running is None and kv_binds(plan):
        run = steady_run(plan, model)
        tokens = run.output_tokens_per_s * speed
        step = step_seconds(model, max(round(run.running), 1), speed, plan)
        return RateEstimate(max(round(run.running), 1), step, tokens, tokens / mean_output_tokens)
    b = plan.max_running_requests if running is None else min(running, plan.max_running_requests)
    b = max(b, 1)
    step = step_seconds(model, b, speed, plan)
    tokens = b * accept_length(model, plan) / step
    return RateEstimate(b, step, tokens, tokens / mean_output_tokens)
