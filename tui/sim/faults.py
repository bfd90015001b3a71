"""``--sim-fault``: failures a test can make a simulated server suffer, on a schedule.

Each fault is ``NAME:AT`` (``AT`` in simulated seconds after the server is ready; wall seconds are
``AT / --sim-speed``, like every other simulated duration), several separated by commas:

* ``stuck:AT`` - the scheduler stops making progress (no decode or prefill step, no batch line,
  no request finishes) while it still answers health probes, so ``/health`` keeps answering 200
  (sgl-project/sglang #30314, #6624, #33858, #4191: a hung batch behind a live server).
* ``hung:AT`` - the scheduler stops altogether: nothing answers, and each ``/health`` fails after
  ``SGLANG_HEALTH_CHECK_TIMEOUT`` with SGLang's ``Health check failed`` line (the server turns
  UnHealthy, so ``/ready`` answers 503).
* ``crash:AT`` - the scheduler raises (CUDA illegal memory access): its traceback, its SIGQUIT to
  the main process, the main process's ``SIGQUIT received`` line and exit 137.
* ``decode-oom:AT`` - the same crash through SGLang's ``Decode out of memory`` path (the ERROR line,
  then the RuntimeError traceback).
* ``retract:AT:N`` - the KV pool fills: SGLang's ``KV cache pool is full. Retract requests.``
  WARNING, N running requests go back to the queue (pressure, not a failure).
* ``slow:AT:F`` - the scheduler runs F times slower from then on (every prefill and decode step
  takes F times as long: a throttled or shared GPU): it still serves, at 1/F of its rate, its
  queue grows and its latencies rise; what an imbalance check should single out.
* ``slow-health:S`` - from readiness on, each health probe's generation takes S wall seconds
  (not scaled: it is what a client's timeout meets), so ``/health`` answers after the first 1 s
  check past S, or 503 when S reaches the health timeout.

A long prefill needs no fault: a request with a huge prompt is prefilled in
``chunked_prefill_size`` chunks at the model's prefill rate, one ``Prefill batch`` line each.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

KINDS = ("stuck", "hung", "crash", "decode-oom", "retract", "slow", "slow-health")
"""Fault names ``--sim-fault`` accepts."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One scheduled fault."""

    kind: str
    """One of KINDS."""
    at_s: float
    """Simulated seconds after readiness (slow-health: the probe's wall seconds)."""
    count: int = 0
    """retract: how many running requests go back to the queue."""
    factor: float = 1.0
    """slow: how many times slower the scheduler runs (1..100)."""


def parse_faults(text: str) -> tuple[Fault, ...]:
    """Parse a ``--sim-fault`` value.

    Args:
        text: ``NAME:AT[,NAME:AT...]`` (``retract:AT:N``, ``slow:AT:F``).

    Returns:
        The faults, in the order given.

    Raises:
        argparse.ArgumentTypeError: naming the bad part and what is allowed.
    """
    faults = []
    for part in text.split(","):
        name, _, rest = part.strip().partition(":")
        if name not in KINDS:
            raise argparse.ArgumentTypeError(
                f"unknown fault {name!r} in {text!r}; choose from {', '.join(KINDS)}"
            )
        fields = rest.split(":") if rest else []
        want = 2 if name in ("retract", "slow") else 1
        if len(fields) != want:
            shape = {"retract": "retract:AT:N", "slow": "slow:AT:F"}.get(name, f"{name}:AT")
            raise argparse.ArgumentTypeError(f"{part.strip()!r}: expected {shape}")
        try:
            at = float(fields[0])
            count = int(fields[1]) if name == "retract" else 0
            factor = float(fields[1]) if name == "slow" else 1.0
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{part.strip()!r}: AT must be a number of seconds, N a whole number and F a number"
            ) from None
        if not 0 <= at <= 86400 or count < 0 or not 1 <= factor <= 100:
            raise argparse.ArgumentTypeError(
                f"{part.strip()!r}: AT must be in [0, 86400] seconds, N >= 0 and F in [1, 100]"
            )
        faults.append(Fault(name, at, count, factor))
    return tuple(faults)
