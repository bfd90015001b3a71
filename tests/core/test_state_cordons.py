"""Cordons: the operations core closes a server to new work; the pipeline reads it cheaply."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tui.state.cordons import (
    CordonWatch,
    address_of,
    cordon,
    read_cordons,
    uncordon,
)
from tui.state.files import StateFileError


@pytest.mark.parametrize(
    ("target", "port", "expected"),
    [
        ("http://localhost:30003", None, "127.0.0.1:30003"),
        ("http://127.0.0.1:30003/", None, "127.0.0.1:30003"),
        ("0.0.0.0", 30003, "127.0.0.1:30003"),
        ("node2.example:31000", None, "node2.example:31000"),
        ("http://[::1]:30001", None, "127.0.0.1:30001"),
    ],
)
def test_address_folds_loopback(target: str, port: int | None, expected: str) -> None:
    assert address_of(target, port) == expected


def test_address_without_port_is_refused() -> None:
    with pytest.raises(ValueError, match="names no port"):
        address_of("http://localhost")


def test_cordon_and_uncordon_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cordons.json"
    cordon(["127.0.0.1:30003", "127.0.0.1:30004"], "relaunch GPU 3", path)
    got = read_cordons(path)
    assert set(got) == {"127.0.0.1:30003", "127.0.0.1:30004"}
    assert got["127.0.0.1:30003"].reason == "relaunch GPU 3"
    uncordon(["127.0.0.1:30003"], path)
    assert set(read_cordons(path)) == {"127.0.0.1:30004"}


@pytest.mark.parametrize("text", ["", "{", "[]", '{"cordons": []}', '{"cordons": {"a": 1}}'])
def test_damaged_file_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cordons.json"
    path.write_text(text)
    with pytest.raises(StateFileError, match=r"cordons\.json"):
        read_cordons(path)


def test_watch_rereads_only_on_change_and_keeps_last_good_set(tmp_path: Path) -> None:
    path = tmp_path / "cordons.json"
    watch = CordonWatch(path)
    assert watch.current() == frozenset()
    cordon(["127.0.0.1:30003"], "stop GPU 3", path)
    assert watch.is_cordoned("127.0.0.1:30003")
    path.write_text("garbage")
    os.utime(path, ns=(1, 1))  # a new stamp even on a coarse clock
    assert watch.current() == frozenset({"127.0.0.1:30003"})
    assert watch.error is not None and "cordons.json" in watch.error
    cordon(["127.0.0.1:30005"], "stop GPU 5", path)  # the writer replaces a damaged file
    assert watch.current() == frozenset({"127.0.0.1:30005"})
    assert watch.error is None
