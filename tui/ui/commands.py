"""The command palette lists every enabled key of the screen it was opened from."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from textual.binding import ActiveBinding
from textual.command import DiscoveryHit, Hit, Hits, Provider


class BindingCommands(Provider):
    """One command per enabled, described binding, run through the same action as the key."""

    def _commands(self) -> Iterator[tuple[str, str, ActiveBinding]]:
        seen: set[str] = set()
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if not active.enabled or not binding.description or binding.action in seen:
                continue
            seen.add(binding.action)
            keys = binding.key_display or key
            yield binding.description, f"key: {keys}", active

    async def _run(self, active: ActiveBinding) -> None:
        await self.app.run_action(active.binding.action, active.node)

    async def discover(self) -> Hits:
        """Every command, for the empty search."""
        for title, help_text, active in self._commands():
            yield DiscoveryHit(title, partial(self._run, active), help=help_text)

    async def search(self, query: str) -> Hits:
        """Commands whose description matches ``query``."""
        matcher = self.matcher(query)
        for title, help_text, active in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(title), partial(self._run, active), help=help_text
                )
