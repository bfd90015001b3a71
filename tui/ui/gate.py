"""Read-only mode in the screens: every binding that changes the fleet is disabled, and says so.

Every screen with a binding that ``tui.ui.readonly.binding_changes_fleet`` is a ``ReadOnlyGate``:
its ``check_action`` disables (None: shown dimmed, not hidden) such a binding while the app is
read-only, before the screen's own ``check_operation`` is asked; its ``active_bindings`` put the
disabled keys together under one "read-only" label, which is what the Footer and the command
palette show. ``tests/test_ui_readonly.py`` checks every binding of every screen against it.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from textual.actions import parse
from textual.binding import ActiveBinding, Binding
from textual.dom import DOMNode
from textual.screen import Screen, ScreenResultType

from tui.ui.readonly import BINDING_INTENTS, READ_ONLY, binding_changes_fleet
from tui.ui.sources import Intent

READ_ONLY_GROUP = Binding.Group(READ_ONLY, compact=True)
"""The Footer shows the disabled keys side by side, first, under this one label (at 80 columns
the viewing keys still fit after it)."""


def app_is_read_only(node: DOMNode) -> bool:
    """Whether the app ``node`` belongs to runs read-only (``FleetApp.readonly``)."""
    return getattr(node.app, "readonly", False) is True


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

    def intent_of(self, action: str, parameters: tuple[object, ...]) -> Intent | None:
        """The intent of the binding that runs ``action`` (None: no binding, or a view)."""
        binding = _by_action(type(self)).get((action, parameters))
        return None if binding is None else BINDING_INTENTS.get(binding.id or "")

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The screen's bindings, the ones read-only mode disables first and labelled so."""
        active = super().active_bindings
        refused = {key: entry for key, entry in active.items() if refused_by_read_only(entry)}
        if not refused:
            return active
        lone = len({entry.binding.action for entry in refused.values()}) == 1
        labelled = {}
        for key, entry in refused.items():
            binding = entry.binding
            # The Footer labels a group of two or more keys once; a lone key says it itself.
            if lone:
                binding = replace(binding, description=f"{binding.description} ({READ_ONLY})")
            else:
                binding = replace(binding, group=READ_ONLY_GROUP)
            tooltip = f"{entry.binding.description}: disabled, the console is {READ_ONLY}"
            labelled[key] = entry._replace(binding=binding, tooltip=tooltip)
        kept = {key: entry for key, entry in active.items() if key not in refused}
        return labelled | kept
