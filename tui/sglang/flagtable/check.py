"""Would SGLang accept this launch argv? The answer, and why not, without starting anything.

``check_argv`` runs the table's parser (``tui.sglang.flagtable.parser``: SGLang's argparse
semantics, so the verdict is SGLang's) and then what SGLang checks as soon as it resolves its
arguments (``--speculative-algorithm`` names, ``srt/speculative/spec_info.py``). A refusal comes
back as a ``Rejection``: what kind, which argv token, SGLang's own error text and exit status,
what is allowed, and a "did you mean" for near misses.

``strict`` adds gpufleet's own rule for the argv it writes itself: every flag spelled in full.
SGLang accepts a unique prefix (``--max-running-request``), but a prefix is how
``--cuda-graph-max-bs`` broke: 0.5.23 split it into ``-decode``/``-prefill`` and the old spelling
became an ambiguous prefix that takes the GPU down.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import re
from collections.abc import Callable, Sequence

from tui.sglang.flagtable.parser import ParseFailure, build_parser
from tui.sglang.flagtable.rejection import TYPE_WORDS, Kind, Rejection
from tui.sglang.flagtable.table import PINNED_VERSION, FlagTable, load_table
from tui.sglang.flagtable.tokens import Token, looks_like_flag, scan

_AMBIGUOUS = re.compile(r"^ambiguous option: (?P<token>.*?) could match (?P<matches>.*)$")
_REQUIRED = "the following arguments are required: "


SWITCH = "no value: it is a switch (write it alone)"


def _flag_of(
    tokens: list[Token], action: argparse.Action | None, last: bool = False
) -> Token | None:
    flags = [t for t in tokens if t.role == "flag" and action is not None and t.action is action]
    if not flags:
        return None
    return flags[-1] if last else flags[0]


def _value_after(tokens: list[Token], flag: Token | None) -> str | None:
    if flag is None:
        return None
    if "=" in flag.text:
        return flag.text.split("=", 1)[1]
    nxt = next((t for t in tokens if t.index == flag.index + 1), None)
    return nxt.text if nxt is not None and nxt.role == "value" else None


class Checker:
    """Judges argv against one parser: the table's (SGLang) or the simulator's (table + sim)."""

    def __init__(
        self,
        table: FlagTable,
        parser: argparse.ArgumentParser,
        drop_in: str = "",
        complete: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        """Args:
        table: the flag table (version, prog, speculative names).
        parser: a parser built from it with ``raising=True`` (``RaisingParser``), plus any
            flags of a drop-in, like the simulator's.
        drop_in: the drop-in's name, said when one of its own flags is refused.
        complete: what the drop-in does to its argv before parsing (it may only append).
        """
        self.table = table
        self.parser = parser
        self.drop_in = drop_in
        self.complete = complete
        self._own = set(parser._option_string_actions) - set(table.option_strings())
        self._long = sorted(o for o in parser._option_string_actions if o.startswith("--"))

    def _near(self, text: str) -> str | None:
        name = text.split("=", 1)[0]
        close = difflib.get_close_matches(name, self._long, n=1, cutoff=0.6)
        return close[0] if close else None

    def _reject(
        self,
        kind: Kind,
        message: str,
        *,
        at: Token | None = None,
        token: str | None = None,
        option: str | None = None,
        value: str | None = None,
        allowed: str = "",
        suggestion: str | None = None,
        reason: str = "",
        status: int = 2,
    ) -> Rejection:
        """A refusal about token ``at`` (or, not found in argv, the text ``token``)."""
        judge = f"SGLang {self.table.sglang_version}"
        if self.drop_in and option in self._own:
            judge = self.drop_in
        return Rejection(
            kind=kind,
            sglang_version=self.table.sglang_version,
            token=at.text if at is not None else token,
            index=at.index if at is not None else None,
            option=option,
            value=value,
            allowed=allowed,
            suggestion=suggestion,
            sglang_error=f"{self.table.prog}: error: {message}" if status == 2 else message,
            exit_status=status,
            reason=reason or message,
            judge=judge,
        )

    def check(self, argv: Sequence[str], *, strict: bool = False) -> Rejection | None:
        """SGLang's verdict on ``argv`` (the flags after the program).

        Args:
            argv: the flags, e.g. ``["--model-path", "m", "--cuda-graph-max-bs", "256"]``.
            strict: also refuse abbreviated flags (gpufleet's rule for the argv it writes).

        Returns:
            None when accepted, else the first reason SGLang (or the strict rule) refuses it.
        """
        argv = list(argv) if self.complete is None else self.complete(list(argv))
        tokens = scan(self.parser, argv)
        try:
            namespace, extras = self.parser.parse_known_args(argv)
        except ParseFailure as failure:
            return self._from_message(failure.message, tokens)
        except argparse.ArgumentError as error:
            return self._from_argument_error(error, tokens)
        except Exception as exc:  # SGLang's LoRAPathAction asserts: a traceback, exit 1
            return self._reject("crash", f"{type(exc).__name__}: {exc}", status=1)
        if extras:
            return self._unrecognized(extras, tokens)
        if strict and (short := self._abbreviated(tokens)) is not None:
            return short
        return self._speculative(namespace, tokens)

    def _abbreviated(self, tokens: list[Token]) -> Rejection | None:
        for token in tokens:
            if token.role != "flag" or token.exact or token.action is None:
                continue
            name = token.text.split("=", 1)[0]
            full = next(o for o in token.action.option_strings if o.startswith(name))
            return self._reject(
                "abbreviation",
                "",
                at=token,
                option=full,
                allowed="the full flag name",
                suggestion=full,
                status=0,
            )
        return None

    def _from_message(self, message: str, tokens: list[Token]) -> Rejection:
        ambiguous = _AMBIGUOUS.match(message)
        if ambiguous:
            text = ambiguous["token"]
            where = next((t for t in tokens if t.text == text and t.role == "flag"), None)
            return self._reject(
                "ambiguous",
                message,
                at=where,
                token=text,
                allowed=ambiguous["matches"],
                reason="ambiguous option",
            )
        if message.startswith(_REQUIRED):
            missing = message[len(_REQUIRED) :].split(", ")[0]
            option = missing.split("/")[0]
            return self._reject("required", message, option=option, allowed=f"{missing} given")
        return self._reject("error", message)

    def _from_argument_error(self, error: argparse.ArgumentError, tokens: list[Token]) -> Rejection:
        names = error.argument_name
        action = next(
            (a for a in self.parser._actions if names in ("/".join(a.option_strings), a.dest)),
            None,
        )
        flag = _flag_of(tokens, action)
        option = action.option_strings[0] if action is not None and action.option_strings else None
        detail = error.message or ""
        value = _value_after(tokens, flag)
        if detail.startswith("invalid choice:"):
            choices = ", ".join(map(str, action.choices or ())) if action else ""
            return self._reject(
                "invalid_choice",
                str(error),
                at=flag,
                option=option,
                value=value,
                allowed=f"one of {choices}",
                reason="invalid choice",
            )
        if detail.startswith("expected "):
            allowed = detail.removeprefix("expected ")
            return self._reject(
                "missing_value", str(error), at=flag, option=option, allowed=allowed, reason=detail
            )
        if detail.startswith("ignored explicit argument"):
            return self._reject(
                "unexpected_value",
                str(error),
                at=flag,
                option=option,
                value=value,
                allowed=SWITCH,
                reason=detail,
            )
        type_name = getattr(action.type, "__name__", "") if action is not None else ""
        words = TYPE_WORDS.get("json.loads" if type_name == "loads" else type_name, "")
        return self._reject(
            "invalid_value",
            str(error),
            at=flag,
            option=option,
            value=value,
            allowed=words,
            reason=detail,
        )

    def _unrecognized(self, extras: list[str], tokens: list[Token]) -> Rejection:
        message = f"unrecognized arguments: {' '.join(extras)}"
        first = extras[0]
        where = next((t for t in tokens if t.role != "value" and t.text == first), None)
        if where is not None and where.role == "stray" and where.index > 0:
            before = next(t for t in tokens if t.index == where.index - 1)
            if before.role == "flag" and before.action is not None and before.action.nargs == 0:
                return self._reject(
                    "unexpected_value",
                    message,
                    at=Token(where.index, before.text, "flag", before.action, before.exact),
                    option=before.action.option_strings[0],
                    value=first,
                    allowed=SWITCH,
                )
        flag = looks_like_flag(first)
        return self._reject(
            "unknown",
            message,
            at=where,
            allowed="a flag SGLang defines" if flag else "no stray value",
            suggestion=self._near(first) if flag else None,
        )

    def _speculative(self, namespace: argparse.Namespace, tokens: list[Token]) -> Rejection | None:
        name = getattr(namespace, "speculative_algorithm", None)
        if not isinstance(name, str) or self.table.speculative.resolve(name) is not None:
            return None
        action = self.parser._option_string_actions.get("--speculative-algorithm")
        return self._reject(
            "speculative_algorithm",
            "ValueError: " + self.table.speculative.error.format(name=name),
            at=_flag_of(tokens, action, last=True),  # argparse keeps the last one
            option="--speculative-algorithm",
            value=name,
            allowed=", ".join(self.table.speculative.allowed()),
            status=1,
        )


@functools.cache
def sglang_checker(version: str = PINNED_VERSION) -> Checker:
    """The checker of real SGLang ``version`` (cached; raises UnknownVersion)."""
    table = load_table(version)
    return Checker(table, build_parser(table, raising=True, warn_deprecated=False))


def check_argv(
    argv: Sequence[str], *, version: str = PINNED_VERSION, strict: bool = False
) -> Rejection | None:
    """``sglang_checker(version).check(argv, strict=strict)``."""
    return sglang_checker(version).check(argv, strict=strict)


def speculative_crash(name: str | None, *, version: str = PINNED_VERSION) -> str | None:
    """What SGLang prints on stderr when ``--speculative-algorithm`` names no algorithm.

    ``SpeculativeAlgorithm.from_string`` (``srt/speculative/spec_info.py``) raises ValueError
    while ``run_server`` resolves the arguments, after parsing: a traceback and exit 1.

    Args:
        name: the flag's value (None: not given).
        version: the SGLang release.

    Returns:
        The traceback text, or None when SGLang accepts the name.
    """
    spec = load_table(version).speculative
    if name is None or spec.resolve(name) is not None:
        return None
    return (
        "Traceback (most recent call last):\n"
        '  File "sglang/launch_server.py", in <module>\n'
        "    run_server(server_args)\n"
        '  File "sglang/srt/speculative/spec_info.py", in from_string\n'
        '    raise ValueError(f"Unknown speculative algorithm name: {name}")\n'
        f"ValueError: {spec.error.format(name=name)}"
    )
