"""Whether each render hook may run on this Textual, and the one place it is installed.

A hook runs only where all three hold; otherwise the console takes Textual's own path, slower
but right (an upgraded Textual must not break the console):

1. ``GPUFLEET_PLAIN`` does not switch it off (``tui.plain``: the benchmark measures each);
2. Textual is the release the hook was checked on (``CHECKED_ON``): a private method may keep
   its name and change what it does;
3. every private name the hook uses is there, with the shape it expects (``RELIES_ON``).

``tests/console/test_ui_render_hooks.py`` pins all three: it fails on another Textual release and
when any name of ``RELIES_ON`` disappears (each is taken away there in turn), and compares each
hook's output with Textual's own.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

import textual

from tui import plain

if TYPE_CHECKING:
    from textual.screen import Screen

Hook = Literal["compositor"]
"""The hooks (each also a ``GPUFLEET_PLAIN`` switch)."""

CHECKED_ON = "8.2.8"
"""The Textual release whose private internals the hooks were read against and tested on
(pyproject allows ``textual>=8.2,<9``; on any other release the hooks stay off). To move it:
read the names in ``RELIES_ON`` in the new release's source, run
tests/console/test_ui_render_hooks.py, tests/console/test_ui_dirty_rows.py and the snapshot tests
with the new value."""


@dataclass(frozen=True, slots=True)
class Reliance:
    """One private name a hook uses."""

    owner: str
    """The class, as ``module:Class``."""
    name: str
    """The attribute."""
    params: tuple[str, ...] = ()
    """A method's parameters (``*`` before a variadic one)."""
    kind: str = ""
    """Or an attribute its ``__init__`` sets: its type (a builtin's name, or ``module:Class``)."""

    def __str__(self) -> str:
        return f"{self.owner.replace(':', '.')}.{self.name}"


_COMPOSITOR = "textual._compositor:Compositor"
_SCREEN = "textual.screen:Screen"

RELIES_ON: dict[Hook, tuple[Reliance, ...]] = {
    "compositor": (
        Reliance(_SCREEN, "_compositor", kind=_COMPOSITOR),
        Reliance(_COMPOSITOR, "render_partial_update", ("self",)),
        Reliance(_COMPOSITOR, "_get_renders", ("self", "crop")),
        Reliance(_COMPOSITOR, "_dirty_regions", kind="set"),
    ),
}
"""Each hook's private names, and the public methods it overrides (their shape is its promise
too); the rest it uses is Textual's public API."""


def _class(owner: str) -> type:
    if ":" not in owner:
        found = getattr(builtins, owner)
    else:
        module, name = owner.split(":")
        found = getattr(importlib.import_module(module), name)
    if not isinstance(found, type):
        raise TypeError(f"{owner} is not a class")
    return found


def _parameters(method: Callable[..., object]) -> tuple[str, ...]:
    params = inspect.signature(method).parameters.values()
    return tuple(
        f"*{p.name}" if p.kind is inspect.Parameter.VAR_POSITIONAL else p.name for p in params
    )


def missing(reliance: Reliance) -> str | None:
    """What is wrong with ``reliance`` on this Textual (None: it is there as expected)."""
    try:
        owner = _class(reliance.owner)
        if reliance.kind:
            value = getattr(owner(), reliance.name)  # Screen(), Widget(), Compositor(): no args
            if not isinstance(value, _class(reliance.kind)):
                return f"{reliance} is a {type(value).__name__}, not a {reliance.kind}"
            return None
        found = _parameters(getattr(owner, reliance.name))
    except Exception as error:  # an import, a look-up, a signature: any of them means "off"
        return f"{reliance}: {type(error).__name__}: {error}"
    if found != reliance.params:
        return f"{reliance} takes ({', '.join(found)}), not ({', '.join(reliance.params)})"
    return None


def problems(hook: Hook) -> list[str]:
    """Why ``hook`` cannot run on this Textual (empty: every name it uses is there)."""
    found = [missing(reliance) for reliance in RELIES_ON[hook]]
    return [why for why in found if why is not None]


@cache
def hook_on(hook: Hook) -> bool:
    """Whether ``hook`` runs in this process (see the module's three conditions; looked at
    once: the names are checked on fresh instances of the classes)."""
    if plain.off(hook) or textual.__version__ != CHECKED_ON:
        return False
    return not problems(hook)


def install_compositor(screen: Screen) -> None:
    """Give ``screen`` the ``DirtyRowsCompositor`` where that hook runs; else it keeps
    Textual's own compositor."""
    if hook_on("compositor"):
        from tui.ui.render.dirty_rows import DirtyRowsCompositor

        screen._compositor = DirtyRowsCompositor()
