"""The fleet a search can run on: at least two running GPUs, all on one profile."""

from __future__ import annotations

from typing import Any

from tui.autotune.options import SearchRefused
from tui.state.fleet_state import read_fleet, read_records


def searchable_fleet(gpu: int | None) -> tuple[list[int], int, dict[str, Any]]:
    """The running GPUs, the canary GPU, and the profile document they all run.

    Args:
        gpu: The canary GPU asked for (None: the lowest running GPU).

    Returns:
        (running GPUs, canary GPU, the one profile document they run).

    Raises:
        SearchRefused: fewer than 2 running GPUs, a canary GPU that does not run, or GPUs on
            different profiles (naming each GPU's).
    """
    gpus = sorted(read_records())
    if len(gpus) < 2:
        raise SearchRefused(
            f"autotune needs at least 2 running GPUs (one canary, one control); found {gpus}"
        )
    chosen = gpu if gpu is not None else gpus[0]
    if chosen not in gpus:
        raise SearchRefused(f"--gpu {chosen}: not a running GPU (running: {gpus})")
    state = read_fleet()
    docs = {g: state[g].current for g in gpus if g in state}
    first = docs.get(gpus[0])
    if first is None or any(d != first for d in docs.values()):
        names = {g: (d or {}).get("name") for g, d in docs.items()}
        raise SearchRefused(
            "the GPUs run different profiles ("
            + ", ".join(f"{g}: {n}" for g, n in sorted(names.items()))
            + "); roll them to one profile first"
        )
    return gpus, chosen, dict(first)
