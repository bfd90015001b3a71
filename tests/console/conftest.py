"""Fixtures of the console's tests alone."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def plain_switch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set ``GPUFLEET_PLAIN`` in this test (``tui.plain``): the switches, and the render hooks
    that follow them (``tui.ui.render.hooks``), are read once per process, so both are read
    anew on the way in, at each setting and on the way out."""
    from tui import plain
    from tui.ui.render import hooks

    def read_anew() -> None:
        plain.switched_off.cache_clear()
        hooks.hook_on.cache_clear()

    def switch(value: str) -> None:
        monkeypatch.setenv(plain.ENV, value)
        read_anew()

    read_anew()
    yield switch
    monkeypatch.delenv(plain.ENV, raising=False)
    read_anew()
