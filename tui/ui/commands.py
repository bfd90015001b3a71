"""The command palette lists every enabled key of the screen it was opened from.

In read-only mode the keys that would change the fleet are listed too, each saying why it is
disabled; choosing one runs nothing and says so again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.binding import ActiveBinding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.ui.gate import refused_by_read_only
from tui.ui.readonly import READ_ONLY


class BindingCommands(Provider):
    """One command per enabled, described binding, run through the same action as the key."""

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        seen: set[str] = set()
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            refused = refused_by_read_only(active)
            if not (active.enabled or refused) or not binding.description:
                continue
            if binding.action in seen:
                continue
            seen.add(binding.action)
            keys = binding.key_display or key
            title = binding.tooltip or binding.description  # the Footer's word may be short
            if refused:
                yield title, f"key: {keys} · disabled: {READ_ONLY}", partial(self._refuse, title)
            else:
                yield title, f"key: {keys}", partial(self._run, active)

    async def _run(self, active: ActiveBinding) -> None:
        await self.app.run_action(active.binding.action, active.node)

    def _refuse(self, title: str) -> None:
        self.app.notify(
            f"{title} changes the fleet or the job; this console is {READ_ONLY}",
            title="Disabled",
            severity="warning",
        )

    async def discover(self) -> Hits:
        """Every command, for the empty search."""
        for title, help_text, run in self._commands():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        """Commands whose description matches ``query``."""
        matcher = self.matcher(query)
        for title, help_text, run in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)
