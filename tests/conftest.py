"""Project-wide test fixtures: every test gets its own state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui import paths


@pytest.fixture(autouse=True)
def isolated_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point gpufleet's state (fleet record, journal, simulated GPUs) at a fresh directory."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv(paths.STATE_ENV, str(state))
    monkeypatch.delenv(paths.SIM_GPU_ENV, raising=False)
    return state
