"""What every test needs: its own state directory and no remembered SGLang release; and the
order of the run (the serial modules marked, the slowest started first).

The tests live in three folders (``core/``, ``console/``, ``e2e/``; the first two have a
conftest of their own for what only they need). The helpers in ``helpers/`` and the repository
root are on sys.path by pytest's ``pythonpath`` (pyproject): ``from ui_helpers import ...`` and
``from bench.simfleet import ...`` work from every folder, under ``pytest`` as under
``python -m pytest``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tui import paths
from tui.profiles.sglang_release import forget


@pytest.fixture(autouse=True)
def isolated_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point gpufleet's state (fleet record, journal, simulated GPUs) at a fresh directory, and
    its settings at an empty one (a developer's own settings.toml must not change a test)."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv(paths.STATE_ENV, str(state))
    monkeypatch.setenv(paths.CONFIG_ENV, str(state / "config"))  # saved profiles stay here
    monkeypatch.delenv(paths.SIM_GPU_ENV, raising=False)
    return state


@pytest.fixture(autouse=True)
def no_remembered_release() -> Iterator[None]:
    """Every test starts with no SGLang release remembered for ``auto`` and leaves none
    (``tui.profiles.sglang_release`` remembers each interpreter's answer per (python, [env]))."""
    forget()
    yield
    forget()


SERIAL_MODULES = frozenset(
    {
        "test_rollout_canary",
        "test_agent_canary",
        "test_retune_e2e",
        "test_autotune_search",
        "test_rollout_fleet_verdict",
        "test_fleet_imbalance",
    }
)
"""Modules whose assertions are verdicts on measured throughput (a canary better or worse, an
apply's before/after, an autotune candidate adopted, a rollout's fleet verdict, seven equal
servers not called an outlier): they run alone (``make test``'s second
pass, ``-m serial``), since a neighbour's simulated fleet on the same two cores makes the
simulator CPU-bound and moves the very throughput they compare. Everything else runs three at
a time (pytest-xdist, ``make test``): the suite mostly waits on real servers starting,
draining and serving."""


SLOW_FIRST = (
    "test_pipeline_fault",
    "test_e2e_retune",
    "test_e2e_demo",
    "test_pipeline_status",
    "test_rollout_rolling",
    "test_rollout_rollback",
    "test_agent_console",
    "test_agent_api",
    "test_pipeline_bad_inputs",
)
"""The longest modules (``--durations``), started first: ``--dist loadfile`` hands modules out in
collection order, and one started last would run alone while the other worker idles."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a ``SERIAL_MODULES`` module ``serial``; the slowest modules first (both
    by the file's name, whatever its folder)."""
    for item in items:
        if item.path.stem in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: order kept within
