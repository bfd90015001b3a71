"""The one door for files (``tui.inputs``): regular files only, opened without blocking, read up
to a bound; JSON and TOML parsed strictly (no NaN, no 1e999, not 100,000 brackets deep)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from tui.inputs import InputError, open_stream, parse_json, parse_toml, read_bytes, read_json

pytestmark = [pytest.mark.timeout(30)]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_the_door_refuses_what_is_not_a_regular_file_at_once(fifo: Path, tmp_path: Path) -> None:
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a device"), (tmp_path, "a dir")):
        with pytest.raises(InputError) as caught:
            read_bytes(path, 1024, "a token file")
        assert str(caught.value).startswith(f"{path}: is {kind}"), caught.value
        assert "\n" not in str(caught.value)
        with pytest.raises(InputError):
            open_stream(path, "a log")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2049)
    with pytest.raises(InputError, match=r"big: is larger than 2 KiB: not a token file$"):
        read_bytes(big, 2048, "a token file")
    assert read_bytes(big, 4096, "a token file") == b"x" * 2049
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "missing", 10, "x")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"port": NaN}', "NaN is not a number JSON allows"),
        ('{"port": Infinity}', "Infinity is not a number JSON allows"),
        ('{"port": 1e999}', "1e999 is out of range"),
        ("[" * 100_000 + "]" * 100_000, "nests deeper than 64 levels"),
        ("[" * 65 + "]" * 65, "nests deeper than 64 levels"),
    ],
)
def test_json_is_read_strictly(text: str, why: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=why):
        parse_json(text)
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(InputError, match=f"^{path}: is not valid JSON"):
        read_json(path, 1 << 20, "a document")
    assert parse_json("[" * 64 + "]" * 64) is not None
    assert math.isnan(parse_json('{"x": NaN}', finite=False)["x"])


def test_toml_too_deep_is_refused() -> None:
    with pytest.raises(ValueError, match="deeper than 64"):
        parse_toml("a = " + "[" * 100 + "]" * 100)
