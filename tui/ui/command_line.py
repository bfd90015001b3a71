"""The ``:`` command line (k9s habit): parse ``apply NAME 3,5``, ``canary NAME 2``, ``logs 4``...

Pure (no Textual): the command bar (``tui.ui.command_bar``) reads the line, this module turns it
into a ``CommandLine`` or a one-line ``CommandError`` naming the bad word and what is allowed; the
main screen performs it through the same flows (confirmations, intents) as its keys, so
read-only mode and the port's capabilities apply to a typed command exactly as to its key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.ops.commands import Kind


class CommandError(ValueError):
    """A line that is not a command, in one line naming the word and what is allowed."""


@dataclass(frozen=True, slots=True)
class Verb:
    """One command word."""

    usage: str
    """Its arguments, for the help line and the errors."""
    intent: Kind | None
    """The operation family it performs (None: it only shows something)."""
    summary: str
    """What it does, in a few words."""


VERBS: dict[str, Verb] = {
    "apply": Verb("apply NAME [GPUS]", Kind.RELAUNCH, "relaunch GPUs (default all) with NAME"),
    "canary": Verb("canary NAME GPU", Kind.CANARY, "try NAME on one GPU, the others as control"),
    "rollout": Verb("rollout NAME [BATCH]", Kind.ROLLOUT, "roll NAME out BATCH GPUs at a time"),
    "rollback": Verb("rollback", Kind.ROLLBACK, "return to each GPU's previous profile"),
    "kill": Verb("kill GPUS", Kind.KILL, "stop the servers (asks how)"),
    "relaunch": Verb("relaunch GPUS", Kind.RELAUNCH, "relaunch the servers (asks the profile)"),
    "tune": Verb("tune [GPU]", Kind.TUNE, "open the tuning form (default all GPUs)"),
    "logs": Verb("logs GPU", None, "open the GPU's detail and log"),
    "journal": Verb("journal", Kind.JOURNAL, "show the journal"),
}
"""Every command, by its word."""


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A parsed command line."""

    verb: str
    """The command word (a key of ``VERBS``)."""
    profile: str | None = None
    """The profile it names, when it takes one."""
    gpus: tuple[int, ...] = ()
    """The GPUs it names (in order, no repeats)."""
    batch: int = 1
    """A rollout's GPUs at a time."""

    @property
    def intent(self) -> Kind | None:
        """The operation family it performs (None: it only shows something)."""
        return VERBS[self.verb].intent


def parse_gpus(word: str, fleet: Sequence[int]) -> tuple[int, ...]:
    """``3,5``, ``0-2,6`` or ``all`` -> GPU indices of the fleet.

    Raises:
        CommandError: naming the word and the fleet's GPUs.
    """
    allowed = f"GPUs of the fleet: {', '.join(str(g) for g in fleet)}"
    if word == "all":
        return tuple(fleet)
    out: list[int] = []
    try:
        for part in word.split(","):
            first, _, last = part.partition("-")
            low, high = int(first), int(last or first)
            if high < low:
                raise ValueError
            out.extend(g for g in range(low, high + 1) if g not in out)
    except ValueError:
        raise CommandError(f"{word!r} is not a GPU list like 3,5 or 0-2 or all") from None
    outside = [g for g in out if g not in fleet]
    if outside:
        raise CommandError(f"GPU {outside[0]} is not in the fleet; {allowed}")
    return tuple(out)


def _profile(word: str, profiles: Sequence[str]) -> str:
    if word not in profiles:
        known = ", ".join(profiles) or "none"
        raise CommandError(f"no profile {word!r}; profiles: {known}")
    return word


def _one_gpu(word: str, fleet: Sequence[int]) -> int:
    gpus = parse_gpus(word, fleet)
    if len(gpus) != 1:
        raise CommandError(f"{word!r}: one GPU, e.g. {fleet[0] if fleet else 0}")
    return gpus[0]


def parse_command(line: str, fleet: Sequence[int], profiles: Sequence[str]) -> CommandLine:
    """Parse one command line.

    Args:
        line: What was typed after ``:``.
        fleet: The fleet's GPU indices.
        profiles: The profile names the backend knows.

    Returns:
        The command.

    Raises:
        CommandError: An unknown word, a missing or extra argument, an unknown profile or GPU,
            in one line that names it and what is allowed.
    """
    words = line.split()
    if not words:
        raise CommandError(f"type a command: {', '.join(VERBS)}")
    verb, args = words[0].lower(), words[1:]
    if verb not in VERBS:
        raise CommandError(f"unknown command {verb!r}; commands: {', '.join(VERBS)}")
    usage = VERBS[verb].usage
    need = len([w for w in usage.split()[1:] if not w.startswith("[")])
    most = len(usage.split()) - 1
    if not need <= len(args) <= most:
        raise CommandError(f"usage: {usage}")
    if verb == "apply":
        gpus = parse_gpus(args[1], fleet) if len(args) > 1 else tuple(fleet)
        return CommandLine(verb, _profile(args[0], profiles), gpus)
    if verb == "canary":
        return CommandLine(verb, _profile(args[0], profiles), (_one_gpu(args[1], fleet),))
    if verb == "rollout":
        batch = args[1] if len(args) > 1 else "1"
        if not batch.isdigit() or not 1 <= int(batch) <= max(len(fleet), 1):
            raise CommandError(f"BATCH {batch!r}: allowed 1..{max(len(fleet), 1)}")
        return CommandLine(verb, _profile(args[0], profiles), batch=int(batch))
    if verb in ("kill", "relaunch"):
        return CommandLine(verb, gpus=parse_gpus(args[0], fleet))
    if verb in ("logs", "tune") and args:
        return CommandLine(verb, gpus=(_one_gpu(args[0], fleet),))
    return CommandLine(verb)


def suggestions(profiles: Sequence[str]) -> list[str]:
    """Completions for the command bar: every word, and every word with every profile."""
    out = [f"{verb} " if VERBS[verb].usage != verb else verb for verb in VERBS]
    for verb in ("apply", "canary", "rollout"):
        out += [f"{verb} {name} " for name in profiles]
    return out
