"""Read-only mode in the screens: every binding that changes the fleet is disabled, and says so.

Every screen with a binding that ``tui.ui.readonly.binding_changes_fleet`` is a ``ReadOnlyGate``:
its ``check_action`` disables (None) such a binding while the app is read-only, before the
screen's own ``check_operation`` is asked; its ``active_bindings`` keep the disabled keys out of
the Footer, which says "read-only" in words instead (``tui.ui.footer``), and in the command
palette and the help, each marked disabled. ``tests/console/test_ui_readonly.py`` checks every
binding of every screen against it.

A key pressed while its binding is disabled says why (``why_key_is_off``, which the app
notifies): the screen's ``why_disabled`` names read-only mode, else the screen's own
``disabled_reason``, written beside its ``check_operation`` from the same table.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from textual.actions import parse
from textual.binding import ActiveBinding, Binding, BindingsMap
from textual.dom import DOMNode
from textual.screen import Screen, ScreenResultType

from tui.ui.host import host_of
from tui.ui.readonly import BINDING_INTENTS, READ_ONLY, Intent, binding_changes_fleet

READ_ONLY_REASON = f"the console is {READ_ONLY} (it only watches)"
"""Why a key that changes the fleet does nothing in read-only mode."""


def app_is_read_only(node: DOMNode) -> bool:
    """Whether the app ``node`` belongs to runs read-only (``FleetApp.readonly``)."""
    host = host_of(node)
    return host is not None and host.readonly


def class_bindings(cls: type[DOMNode]) -> tuple[Binding, ...]:
    """Every binding declared by ``cls`` and its bases (compound keys expanded)."""
    found: list[Binding] = []
    for klass in reversed(cls.__mro__):
        found.extend(Binding.make_bindings(klass.__dict__.get("BINDINGS", ())))
    return tuple(found)


@cache
def _by_action(cls: type[DOMNode]) -> dict[tuple[str, tuple[object, ...]], Binding]:
    """The screen's own bindings by (action name, parameters), as ``check_action`` gets them."""
    table: dict[tuple[str, tuple[object, ...]], Binding] = {}
    for binding in class_bindings(cls):
        namespace, name, parameters = parse(binding.action)
        if not namespace:  # 'app.x' is checked by the app, not by this screen
            table.setdefault((name, parameters), binding)
    return table


def refused_by_read_only(active: ActiveBinding) -> bool:
    """Whether an active binding is disabled because the console is read-only."""
    node = active.node
    return (
        not active.enabled
        and isinstance(node, ReadOnlyGate)
        and app_is_read_only(node)
        and binding_changes_fleet(active.binding.id)
    )


class ReadOnlyGate(Screen[ScreenResultType]):
    """A screen whose fleet-changing bindings are disabled while the app is read-only.

    Subclasses put their own conditions in ``check_operation``, never in ``check_action``. A
    modal screen lists it after its own base (``class X(ModalScreen[T], ReadOnlyGate[T])``):
    Textual inherits CSS along the first base only.
    """

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hidden (False) when ``check_operation`` says it does not apply here; else disabled
        (None) when read-only and the action's binding changes the fleet; else what
        ``check_operation`` says."""
        allowed = self.check_operation(action, parameters)
        if allowed is False:
            return False  # hidden (it does not apply here at all), read-only or not
        binding = _by_action(type(self)).get((action, parameters))
        if binding is not None and app_is_read_only(self) and binding_changes_fleet(binding.id):
            return None
        return allowed

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Whether ``action`` applies now: True, None (shown disabled) or False (hidden)."""
        return True

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why ``check_operation`` disables or hides ``action`` now, in a few words ('' when
        there is nothing worth saying: the key does not apply on this screen at all)."""
        return ""

    def why_disabled(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why ``check_action`` disables ``action``: read-only mode, else the screen's reason."""
        binding = _by_action(type(self)).get((action, parameters))
        if binding is not None and app_is_read_only(self) and binding_changes_fleet(binding.id):
            return READ_ONLY_REASON
        return self.disabled_reason(action, parameters) or "it does not apply now"

    def intent_of(self, action: str, parameters: tuple[object, ...]) -> Intent | None:
        """The intent of the binding that runs ``action`` (None: no binding, or a view)."""
        binding = _by_action(type(self)).get((action, parameters))
        return None if binding is None else BINDING_INTENTS.get(binding.id or "")

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The screen's bindings; the ones read-only mode disables stay out of the Footer (it
        read 'pkKrRtTbco read-only': ``tui.ui.footer`` says read-only in words instead)."""
        active = super().active_bindings
        refused = {key: entry for key, entry in active.items() if refused_by_read_only(entry)}
        if not refused:
            return active
        hidden = {}
        for key, entry in refused.items():
            binding = replace(entry.binding, show=False)
            tooltip = f"{entry.binding.description}: disabled, the console is {READ_ONLY}"
            hidden[key] = entry._replace(binding=binding, tooltip=tooltip)
        return {key: hidden.get(key, entry) for key, entry in active.items()}


def why_key_is_off(screen: Screen[Any], key: str) -> tuple[str, str] | None:
    """What ``key`` would do on ``screen`` and why it does nothing now, or None (it runs, or
    nothing is bound to it, or it does not apply on this screen at all).

    A key whose binding is disabled (shown dimmed, or kept out of the Footer in read-only
    mode) says the screen's ``why_disabled``; one the screen hides for now says its
    ``disabled_reason`` when it has one (``w`` with no operation running).

    Args:
        screen: The screen the key was pressed on.
        key: The key, as ``events.Key.key`` names it.

    Returns:
        (the binding's description, why it is off), or None.
    """
    entry = screen.active_bindings.get(key)
    if entry is not None:
        if entry.enabled:
            return None
        node = entry.node
        _, name, parameters = parse(entry.binding.action)
        why = (
            node.why_disabled(name, parameters)
            if isinstance(node, ReadOnlyGate)
            else "it does not apply now"
        )
        return entry.binding.description, why
    if not isinstance(screen, ReadOnlyGate):
        return None
    for binding in BindingsMap(class_bindings(type(screen))).key_to_bindings.get(key, ()):
        namespace, name, parameters = parse(binding.action)
        if namespace:
            continue
        if screen.check_action(name, parameters) is False:
            why = screen.disabled_reason(name, parameters)
            if why:
                return binding.description, why
    return None
