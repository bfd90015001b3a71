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
from dataclasses import dataclass
from typing import Literal

from tui.sglang.flagtable.parser import ParseFailure, RaisingParser, build_parser
from tui.sglang.flagtable.table import PINNED_VERSION, FlagTable, load_table

Kind = Literal[
    "unknown",
    "ambiguous",
    "invalid_choice",
    "invalid_value",
    "missing_value",
    "unexpected_value",
    "required",
    "error",
    "crash",
    "speculative_algorithm",
    "abbreviation",
]

_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")
_AMBIGUOUS = re.compile(r"^ambiguous option: (?P<token>.*?) could match (?P<matches>.*)$")
_REQUIRED = "the following arguments are required: "

TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "json.loads": "a JSON value",
    "json_list_type": "a JSON value",
    "human_readable_int": "an integer, optionally with k/M/G/T or Ki/Mi/Gi/Ti",
    "nullable_str": "a string",
    "parse_cuda_graph_backend_arg": "a CUDA graph backend",
    "parse_cuda_graph_config_arg": "a JSON object of per-phase CUDA graph settings",
}
"""What each converter accepts, in words."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why SGLang would refuse a launch argv (or, for ``abbreviation``, why gpufleet does)."""

    kind: Kind
    """What went wrong."""
    sglang_version: str
    """The SGLang release whose table judged."""
    token: str | None
    """The argv token at fault, as written (``--cuda-graph-max-bs``, ``--max-running-request``)."""
    index: int | None
    """Its position in the argv checked (None: nothing there, e.g. a required flag missing)."""
    option: str | None
    """The flag it concerns, as SGLang spells it (None when there is no such flag)."""
    value: str | None
    """The value at fault, when there is one."""
    allowed: str
    """What SGLang allows there, in words."""
    suggestion: str | None
    """A near flag (difflib) or the full spelling: the "did you mean"."""
    sglang_error: str
    """SGLang's own last line (``sglang serve: error: ...`` or ``ValueError: ...``)."""
    exit_status: int
    """SGLang's exit status: 2 (argparse), 1 (an exception at startup), 0 (it would accept)."""
    reason: str = ""
    """SGLang's reason in short (argparse's message after ``argument --x:``)."""
    judge: str = ""
    """Who refuses, in words: ``SGLang 0.5.23``, or the drop-in for its own flags."""

    def describe(self) -> str:
        """One line: the flag, the value, what SGLang does with it, what is allowed."""
        v = self.judge or f"SGLang {self.sglang_version}"
        hint = f"; did you mean {self.suggestion}?" if self.suggestion else ""
        exits = f"it exits {self.exit_status}"
        if self.kind == "unknown":
            return f"{v} has no flag {self.token} ({exits}: unrecognized arguments){hint}"
        if self.kind == "ambiguous":
            return f"{self.token} is ambiguous in {v} ({exits}): could match {self.allowed}"
        if self.kind == "abbreviation":
            return (
                f"{self.token} is an abbreviation of {self.option}: {v} expands it, but a new "
                f"flag can make it ambiguous (as --cuda-graph-max-bs became){hint}"
            )
        if self.kind == "speculative_algorithm":
            return (
                f"{v} has no speculative algorithm {self.value!r} ({exits}: "
                f"{self.sglang_error}); allowed: {self.allowed}"
            )
        if self.kind == "required":
            return f"{v} requires {self.option} ({exits}: {self.reason})"
        if self.kind == "missing_value":
            return f"{v} refuses {self.token} without a value ({exits}: {self.reason})"
        if self.kind == "unexpected_value":
            return (
                f"{v} refuses {self.token} {self.value!r} ({exits}): {self.option} is a switch "
                "and takes no value; write it alone (true)"
            )
        subject = self.option or self.token or "the argv"
        if self.value is not None:
            subject += f" {self.value!r}"
        allowed = f"; allowed: {self.allowed}" if self.allowed else ""
        return f"{v} refuses {subject} ({exits}: {self.reason}){allowed}{hint}"


@dataclass(frozen=True, slots=True)
class Token:
    """One argv token as argparse will read it."""

    index: int
    """Position in argv."""
    text: str
    """The token."""
    role: Literal["flag", "value", "stray"]
    """An option string, a value consumed by the option before it, or neither."""
    action: argparse.Action | None
    """The action a flag resolves to (None: unknown or ambiguous)."""
    exact: bool
    """A flag spelled exactly as the parser defines it (not a prefix)."""


def _looks_like_flag(text: str) -> bool:
    return text.startswith("-") and text != "-" and not _NEGATIVE.match(text)


def _resolve(parser: argparse.ArgumentParser, text: str) -> tuple[list[argparse.Action], bool]:
    """(actions it may mean, exact) for a flag token, as argparse matches long options."""
    options = parser._option_string_actions
    if text in options:
        return [options[text]], True
    name = text.split("=", 1)[0] if "=" in text else text
    if name in options:
        return [options[name]], True
    if not (text.startswith("--") and parser.allow_abbrev):
        return [], False
    found: dict[int, argparse.Action] = {}
    for option, action in options.items():
        if option.startswith(name):
            found.setdefault(id(action), action)
    return list(found.values()), False


def scan(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[Token]:
    """The tokens of ``argv``: flags (resolved as argparse would), their values, strays."""
    tokens: list[Token] = []
    i = 0
    while i < len(argv):
        text = argv[i]
        if text == "--":
            tokens += [Token(j, argv[j], "stray", None, False) for j in range(i, len(argv))]
            break
        if not _looks_like_flag(text):
            tokens.append(Token(i, text, "stray", None, False))
            i += 1
            continue
        actions, exact = _resolve(parser, text)
        action = actions[0] if len(actions) == 1 else None
        tokens.append(Token(i, text, "flag", action, exact))
        i += 1
        if action is None or "=" in text:
            continue
        nargs = action.nargs
        wanted = {None: 1, "?": 1, "*": -1, "+": -1, 0: 0}.get(nargs, nargs)  # type: ignore[arg-type]
        while wanted != 0 and i < len(argv) and not _looks_like_flag(argv[i]):
            tokens.append(Token(i, argv[i], "value", action, False))
            i += 1
            wanted = wanted - 1 if isinstance(wanted, int) and wanted > 0 else wanted
    return tokens


def _flag_of(tokens: list[Token], action: argparse.Action) -> Token | None:
    return next((t for t in tokens if t.role == "flag" and t.action is action), None)


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
        parser: RaisingParser,
        drop_in: str = "",
        complete: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        """Args:
        table: the flag table (version, prog, speculative names).
        parser: a raising parser built from it (plus any flags of a drop-in, like the sim's).
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

    def _reject(self, kind: Kind, message: str, status: int = 2, **kw: object) -> Rejection:
        fields: dict[str, object] = {
            "token": None,
            "index": None,
            "option": None,
            "value": None,
            "allowed": "",
            "suggestion": None,
            "reason": "",
        }
        fields.update(kw)
        error = message if status != 2 else f"{self.table.prog}: error: {message}"
        judge = f"SGLang {self.table.sglang_version}"
        if self.drop_in and fields["option"] in self._own:
            judge = self.drop_in
        return Rejection(
            judge=judge,
            kind=kind,
            sglang_version=self.table.sglang_version,
            sglang_error=error,
            exit_status=status,
            **fields,  # type: ignore[arg-type]
        )

    def check(self, argv: Sequence[str], *, strict: bool = False) -> Rejection | None:
        """SGLang's verdict on ``argv`` (the flags after the program).

        Args:
            argv: the flags, e.g. ``["--model-path", "m", "--cuda-graph-max-bs", "256"]``.
            strict: also refuse abbreviated flags (gpufleet's rule for the argv it writes).

        Returns:
            None when accepted, else the first reason SGLang (or the strict rule) refuses it.
        """
        argv = list(argv)
        if self.complete is not None:
            argv = self.complete(argv)
        tokens = scan(self.parser, argv)
        try:
            namespace, extras = self.parser.parse_known_args(argv)
        except ParseFailure as failure:
            return self._from_message(failure.message, tokens)
        except argparse.ArgumentError as error:
            return self._from_argument_error(error, tokens)
        except Exception as exc:  # SGLang's LoRAPathAction asserts: a traceback, exit 1
            return self._reject(
                "crash",
                f"{type(exc).__name__}: {exc}",
                status=1,
                reason=f"{type(exc).__name__}: {exc}",
            )
        if extras:
            return self._unrecognized(extras, tokens)
        if strict:
            for token in tokens:
                if token.role == "flag" and not token.exact and token.action is not None:
                    full = max(token.action.option_strings, key=len)
                    name = token.text.split("=", 1)[0]
                    full = next(
                        (o for o in token.action.option_strings if o.startswith(name)), full
                    )
                    return self._reject(
                        "abbreviation",
                        "",
                        status=0,
                        token=token.text,
                        index=token.index,
                        option=full,
                        allowed="the full flag name",
                        suggestion=full,
                    )
        return self._speculative(namespace, tokens)

    def _from_message(self, message: str, tokens: list[Token]) -> Rejection:
        ambiguous = _AMBIGUOUS.match(message)
        if ambiguous:
            text = ambiguous["token"]
            where = next((t for t in tokens if t.text == text and t.role == "flag"), None)
            return self._reject(
                "ambiguous",
                message,
                token=text,
                index=where.index if where else None,
                allowed=ambiguous["matches"],
                reason="ambiguous option",
            )
        if message.startswith(_REQUIRED):
            missing = message[len(_REQUIRED) :].split(", ")[0]
            return self._reject(
                "required",
                message,
                option=missing.split("/")[0],
                allowed=f"{missing} given",
                reason=message,
            )
        return self._reject("error", message, reason=message)

    def _from_argument_error(self, error: argparse.ArgumentError, tokens: list[Token]) -> Rejection:
        action = next(
            (
                a
                for a in self.parser._actions
                if error.argument_name in ("/".join(a.option_strings), a.metavar, a.dest)
            ),
            None,
        )
        flag = _flag_of(tokens, action) if action is not None else None
        option = action.option_strings[0] if action is not None and action.option_strings else None
        message = str(error)
        detail = error.message or ""
        value = _value_after(tokens, flag)
        index = flag.index if flag is not None else None
        if detail.startswith("invalid choice:"):
            choices = ", ".join(map(str, action.choices or ())) if action else "?"
            return self._reject(
                "invalid_choice",
                message,
                token=flag.text if flag else None,
                index=index,
                option=option,
                value=value,
                allowed=f"one of {choices}",
                reason="invalid choice",
            )
        if detail.startswith("expected "):
            return self._reject(
                "missing_value",
                message,
                token=flag.text if flag else None,
                index=index,
                option=option,
                allowed=f"{detail.removeprefix('expected ')}",
                reason=detail,
            )
        if detail.startswith("ignored explicit argument"):
            return self._reject(
                "unexpected_value",
                message,
                token=flag.text if flag else None,
                index=index,
                option=option,
                value=value,
                allowed="no value: it is a switch (write it alone)",
                reason=detail,
            )
        kind_name = getattr(action.type, "__name__", "") if action is not None else ""
        type_name = "json.loads" if kind_name == "loads" else kind_name
        return self._reject(
            "invalid_value",
            message,
            token=flag.text if flag else None,
            index=index,
            option=option,
            value=value,
            allowed=TYPE_WORDS.get(type_name, ""),
            reason=detail,
        )

    def _unrecognized(self, extras: list[str], tokens: list[Token]) -> Rejection:
        message = f"unrecognized arguments: {' '.join(extras)}"
        first = extras[0]
        unmatched = [t for t in tokens if t.role in ("flag", "stray") and t.text == first]
        where = unmatched[0] if unmatched else None
        if where is not None and where.role == "stray" and where.index > 0:
            before = next(t for t in tokens if t.index == where.index - 1)
            if before.role == "flag" and before.action is not None and before.action.nargs == 0:
                return self._reject(
                    "unexpected_value",
                    message,
                    token=before.text,
                    index=where.index,
                    option=before.action.option_strings[0],
                    value=first,
                    allowed="no value: it is a switch (write it alone)",
                    reason=message,
                )
        is_flag = _looks_like_flag(first)
        return self._reject(
            "unknown",
            message,
            token=first,
            index=where.index if where else None,
            allowed="a flag SGLang defines" if is_flag else "no stray value",
            suggestion=self._near(first) if is_flag else None,
            reason=message,
        )

    def _speculative(self, namespace: argparse.Namespace, tokens: list[Token]) -> Rejection | None:
        name = getattr(namespace, "speculative_algorithm", None)
        if not isinstance(name, str) or self.table.speculative.resolve(name) is not None:
            return None
        action = self.parser._option_string_actions.get("--speculative-algorithm")
        flags = [
            t for t in tokens if t.role == "flag" and action is not None and t.action is action
        ]
        flag = flags[-1] if flags else None  # argparse keeps the last one
        allowed = ", ".join(self.table.speculative.allowed())
        return self._reject(
            "speculative_algorithm",
            "ValueError: " + self.table.speculative.error.format(name=name),
            status=1,
            token=flag.text if flag else None,
            index=flag.index if flag else None,
            option="--speculative-algorithm",
            value=name,
            allowed=allowed,
            suggestion=None,
        )


@functools.cache
def sglang_checker(version: str = PINNED_VERSION) -> Checker:
    """The checker of real SGLang ``version`` (cached; raises UnknownVersion)."""
    table = load_table(version)
    return Checker(table, build_parser(table, raising=True, warn_deprecated=False))  # type: ignore[arg-type]


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
