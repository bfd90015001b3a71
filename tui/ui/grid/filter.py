"""The grid's ``/`` filter (k9s habit): which panels a few typed words keep.

Every word must match the panel: its GPU index exactly (``3``), or a part of its server's state
(``ready``, ``fail``), or of the profile its server runs (``aggressive``), case-insensitively.
An empty filter keeps every panel.
"""

from __future__ import annotations

from dataclasses import replace

from tui.fleet.snapshot import FleetSnapshot, GpuPanel


def _words(panel: GpuPanel) -> tuple[str, ...]:
    server = panel.server
    state = server.state.value if server is not None else "no server"
    profile = server.profile.name if server is not None and server.profile else ""
    return (state, profile.lower())


def panel_matches(panel: GpuPanel, text: str) -> bool:
    """Whether every word of ``text`` matches the panel (see the module docstring).

    Args:
        panel: One GPU's panel.
        text: The filter as typed.

    Returns:
        True when the panel is kept.
    """
    haystack = _words(panel)
    for word in text.lower().split():
        if word.isdigit():
            if int(word) != panel.gpu_index:
                return False
        elif not any(word in part for part in haystack):
            return False
    return True


def filtered(fleet: FleetSnapshot, text: str) -> FleetSnapshot:
    """The snapshot with only the panels ``text`` keeps (the same object when it keeps all)."""
    if not text.strip():
        return fleet
    kept = tuple(p for p in fleet.panels if panel_matches(p, text))
    if len(kept) == len(fleet.panels):
        return fleet
    return replace(fleet, panels=kept)
