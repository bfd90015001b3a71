"""Why SGLang would refuse a launch argv: a ``Rejection``, and its one line for an operator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
