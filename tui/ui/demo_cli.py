"""``gpufleet demo``: the simulated fleet, a pipeline and the console (integrated by the lead)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    """Say that the demo is not wired yet.

    Args:
        argv: Ignored.

    Returns:
        1.
    """
    print("gpufleet demo: not yet: the simulated fleet and the console are being joined")
    return 1
