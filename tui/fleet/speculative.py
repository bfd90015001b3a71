"""Speculative decoding as a server runs it: the draft's accept length and rate and its steps,
or none when it runs no draft.

From ``/metrics`` (``spec_accept_length``, ``spec_accept_rate``, ``spec_num_steps``) and
``/server_info`` (the algorithm, its steps and draft tokens, ``avg_spec_accept_length`` once the
draft ran). SGLang 0.5.17 exports the gauges without a draft too, as 0.0 (and ``spec_num_steps``
0): a server runs a draft when ``/server_info`` names an algorithm or it reports steps or an
accept length of at least 1 (one verify yields at least the verified token).
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.servers.payloads import ServerInfo, ServerLoad


@dataclass(frozen=True, slots=True)
class SpecDecode:
    """A server's draft at one moment."""

    algorithm: str | None
    """``EAGLE``, ``NEXTN``...; None when only ``/metrics`` said a draft runs."""
    accept_length: float | None
    """Tokens gained per verify (>= 1), None before the first verify."""
    accept_rate: float | None
    """Share of the draft tokens accepted, 0..1."""
    steps: int | None
    """Draft steps per verify in use."""
    draft_tokens: int | None
    """Tokens a verify checks."""


def speculative(
    load: ServerLoad | None, info: ServerInfo | None, logged_accept: float | None = None
) -> SpecDecode | None:
    """The server's draft, or None when it runs none (or nothing was read).

    Args:
        load: The last ``/metrics`` reading.
        info: The last ``/server_info``.
        logged_accept: The accept length its log's Decode line printed (older servers).
    """
    algorithm = info.spec_algorithm if info is not None else None
    steps = load.spec_num_steps if load is not None else None
    accept = load.accept_len if load is not None else None
    accept = accept if accept is not None else logged_accept
    if accept is None and info is not None:
        accept = info.spec_accept_length
    if algorithm is None and not steps and (accept is None or accept < 1.0):
        return None
    rate = load.spec_accept_rate if load is not None else None
    return SpecDecode(
        algorithm=algorithm,
        accept_length=accept if accept is not None and accept >= 1.0 else None,
        accept_rate=rate if accept is not None and accept >= 1.0 else None,
        steps=steps or (info.spec_num_steps if info is not None else None),
        draft_tokens=info.spec_draft_tokens if info is not None else None,
    )
