"""One request inside the simulated scheduler, and how long its output will be."""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field

from tui.sim.throughput import DEFAULT_MEAN_OUTPUT_TOKENS

HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"
"""SGLang's rid prefix of ``/health`` probes (``srt/entrypoints/http_server.py``)."""


@dataclass(eq=False)
class SimRequest:
    """One request inside the scheduler (mutable: it is prefilled, then decodes)."""

    rid: str
    """Request id."""
    prompt_tokens: int
    """Input length."""
    target_tokens: int
    """Tokens it will generate."""
    capped: bool
    """True when ``target_tokens`` came from the request's max tokens (finish_reason length)."""
    done: asyncio.Future[None]
    """Resolved when the last token is generated."""
    log_metrics: bool = True
    """False for health probes (SGLang's ``log_metrics=False``: not in the token counters)."""
    created: float = field(default_factory=time.monotonic)
    """Submission time (wall, monotonic)."""
    prefilled: int = 0
    """Prompt tokens prefilled so far (a long prompt is prefilled in chunks)."""
    generated: float = 0.0
    """Tokens generated so far (fractional: accept length is a mean)."""
    first_token_at: float | None = None
    """When decoding started."""

    @property
    def is_health_check(self) -> bool:
        """A ``/health`` probe's one-token generation."""
        return self.rid.startswith(HEALTH_CHECK_RID_PREFIX)

    @property
    def prefill_left(self) -> int:
        """Prompt tokens (and, after a retraction, generated ones) still to prefill."""
        return max(self.prompt_tokens + int(self.generated) - self.prefilled, 0)


def sample_output_tokens(
    rng: random.Random, max_tokens: int | None, ignore_eos: bool
) -> tuple[int, bool]:
    """Output length: exactly ``max_tokens`` with ignore_eos, else a lognormal draw it caps.

    Args:
        rng: the scheduler's random source.
        max_tokens: the request's bound, or None.
        ignore_eos: generate exactly ``max_tokens``.

    Returns:
        (tokens, hit_the_bound).
    """
    if ignore_eos and max_tokens is not None:
        return max_tokens, True
    sigma = 0.5
    mu = math.log(DEFAULT_MEAN_OUTPUT_TOKENS) - sigma * sigma / 2
    drawn = max(16, int(rng.lognormvariate(mu, sigma)))
    if max_tokens is not None and drawn >= max_tokens:
        return max(max_tokens, 1), True
    return drawn, False
