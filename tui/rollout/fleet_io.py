"""What the canary and the rollout share: the fleet's ports, a sampler over it, journal writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from tui.profiles import Profile
from tui.retune.journal import append_entry
from tui.rollout.sampling import MetricsProbe, Sampler
from tui.state.fleet_state import read_records


def running_gpus(profile: Profile) -> list[int]:
    """GPUs of the profile that have a server recorded as running now."""
    records = read_records()
    return [g for g in profile.gpus if g in records]


def fleet_sampler(
    profile: Profile, gpus: Sequence[int], interval_s: float, client: httpx.AsyncClient
) -> Sampler:
    """A sampler over ``gpus``: each GPU's recorded server port, else the profile's port.

    Args:
        profile: Gives the host and the ports of GPUs with no record.
        gpus: GPUs to read.
        interval_s: Sampling cadence.
        client: Shared HTTP client.

    Returns:
        The sampler (not started).
    """
    records = read_records()
    ports = {
        g: records[g].port if g in records else profile.port_for(g)
        for g in gpus
        if g in records or g in profile.gpus
    }
    return Sampler(MetricsProbe(ports, profile.host, client), gpus, interval_s)


def journal(entry: dict[str, Any]) -> None:
    """Append one entry to the journal (``tui.paths.journal_file()``)."""
    append_entry(entry)
