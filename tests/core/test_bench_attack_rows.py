"""Every attack row of issue 36 can fail (``bench.attacks``): each is run once against a
deliberately broken build (``bench.broken_builds``: a ``sitecustomize`` that patches the one check
out of every command the workspace runs) and must say FAIL. A row that passes whatever the build
checks nothing: the "+24 s clock" rows passed with the shift at -9.6e8 s too (they moved only
``create_time``, which identity no longer reads), and the drain-mode "foreign pgid" row never
reached the pgid (the drain ended before it escalated). ``python -m bench.attacks`` runs the same
rows against gpufleet as it is, where they pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.attack_kit import Row, Workspace, time_namespace
from bench.attacks import clock_rows, pgid_rows
from bench.attacks_network import BROKEN_FOR, ROWS

pytestmark = [pytest.mark.timeout(600)]


def _failed(rows: list[Row], starting: str) -> list[Row]:
    chosen = [r for r in rows if r.attack.startswith(starting)]
    assert chosen, [r.attack for r in rows]
    return chosen


@pytest.mark.parametrize(
    ("broken", "rows_of"),
    [
        ("no-timens", "+24 s clock step"),  # identity read as the namespace shows it
        ("trust-record", "foreign process recorded"),  # identity that trusts the record
    ],
)
def test_the_clock_rows_fail_on_a_build_without_the_check(
    tmp_path: Path, broken: str, rows_of: str
) -> None:
    if time_namespace(24.0) is None:
        pytest.skip("no time namespace can be made here (unshare --time)")
    ws = Workspace(tmp_path / "clock", 1, broken=broken)
    try:
        rows = clock_rows(ws)
    finally:
        ws.cli(["sim-fleet", "stop", "--mode", "kill"], timeout=60)
        ws.cleanup()
    chosen = _failed(rows, rows_of)
    assert len(chosen) == 3 and not any(r.ok for r in chosen), [(r.attack, r.ok) for r in rows]


def test_the_foreign_pgid_rows_fail_when_the_record_s_group_is_trusted(tmp_path: Path) -> None:
    """The drain row's server is frozen: its stop reaches the group, where the broken build
    signals the foreign one."""
    ws = Workspace(tmp_path / "pgid", 1, broken="trust-pgid")
    try:
        rows = pgid_rows(ws)
    finally:
        ws.cli(["sim-fleet", "stop", "--mode", "kill"], timeout=60)
        ws.cleanup()
    chosen = _failed(rows, "live pid + foreign pgid")
    assert len(chosen) == 3 and not any(r.ok for r in chosen), [
        (r.attack, r.signalled) for r in rows
    ]
    assert any("(frozen)" in r.attack and "->0" in r.signalled for r in chosen)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_network_row_fails_on_a_build_without_its_check(tmp_path: Path, name: str) -> None:
    ws = Workspace(tmp_path / name, 1, broken=BROKEN_FOR[name])
    try:
        row = ROWS[name](ws)
    finally:
        ws.cli(["sim-fleet", "stop", "--mode", "kill"], timeout=60)
        ws.cleanup()
    assert not row.ok, row
