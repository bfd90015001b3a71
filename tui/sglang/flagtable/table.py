"""SGLang's flag table: every option its launch parser defines, as SGLang's own code built it.

The table is generated from SGLang's real parser (``python -m tui.sglang.flagtable.generate``)
and shipped as JSON beside this module, one file per pinned version. It records, per option: the
option strings (long and short), dest, action, type (by name), choices, nargs, const, default
(when JSON can hold it), required, metavar and help; and, for the whole parser, its ``prog`` and
``allow_abbrev``, plus what SGLang checks right after parsing (the speculative algorithm names).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

PINNED_VERSION = "0.5.23"
"""The SGLang version gpufleet's flag knowledge is pinned to (profiles default to it)."""

SCHEMA = 1
"""Version of the JSON layout below."""

_DIR = Path(__file__).resolve().parent

Json = Any
"""A value JSON can hold (None, bool, int, float, str, list, dict)."""

SPEC_ERROR = "Unknown speculative algorithm name: {name}"
"""SGLang 0.5.23's text for an unknown ``--speculative-algorithm`` (the table records its own)."""


class UnknownVersion(LookupError):
    """No flag table is shipped for the SGLang version asked for."""


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One ``add_argument`` of SGLang's parser, as recorded from the built action."""

    option_strings: tuple[str, ...]
    """Every spelling, e.g. ``("--model-path", "--model")``; BooleanOptionalAction's ``--no-``."""
    dest: str
    """Namespace attribute the value lands in."""
    action: str = "store"
    """argparse's name (store, store_true, boolean_optional, help...) or SGLang's action class."""
    type: str | None = None
    """Type converter by name: str, int, float, json.loads, or an SGLang function's name."""
    choices: tuple[Json, ...] | None = None
    """Allowed values, in SGLang's order (sorted when SGLang gives a set)."""
    choices_ordered: bool = True
    """False when SGLang's choices are a set (its error text then lists them in hash order)."""
    nargs: int | str | None = None
    """argparse nargs: None, 0, '?', '*', '+' or a count."""
    const: Json = None
    """argparse const."""
    default: Json = None
    """The default, when JSON can hold it (else None and ``default_repr`` says what it was)."""
    default_repr: str | None = None
    """repr() of a default JSON cannot hold."""
    required: bool = False
    """argparse required."""
    metavar: str | tuple[str, ...] | None = None
    """argparse metavar (shapes the usage text)."""
    help: str | None = None
    """SGLang's help text, as written (argparse ``%(default)s`` left unexpanded)."""
    action_kwargs: tuple[tuple[str, Json], ...] = ()
    """Extra keywords of SGLang's own action classes (new_flag, const_value, error_message)."""

    @property
    def takes_value(self) -> bool:
        """Whether the option consumes a value (anything but a switch)."""
        return self.nargs != 0

    def to_json(self) -> dict[str, Json]:
        """This flag as a JSON object, keys at their default value left out."""
        out: dict[str, Json] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("option_strings", "dest") or value != f.default:
                if isinstance(value, tuple) and f.name == "action_kwargs":
                    value = dict(value)
                elif isinstance(value, tuple):
                    value = list(value)
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Json]) -> FlagSpec:
        """The inverse of ``to_json``."""
        kw = dict(data)
        kw["option_strings"] = tuple(kw["option_strings"])
        if kw.get("choices") is not None:
            kw["choices"] = tuple(kw["choices"])
        if isinstance(kw.get("metavar"), list):
            kw["metavar"] = tuple(kw["metavar"])
        kw["action_kwargs"] = tuple(sorted(kw.get("action_kwargs", {}).items()))
        return cls(**kw)


@dataclass(frozen=True, slots=True)
class SpecAlgorithms:
    """What ``SpeculativeAlgorithm.from_string`` (``srt/speculative/spec_info.py``) accepts."""

    names: tuple[str, ...] = ()
    """The enum's member names (matched after ``.upper()``)."""
    aliases: tuple[tuple[str, str], ...] = ()
    """Reserved aliases and the member they resolve to (NEXTN -> EAGLE)."""
    error: str = SPEC_ERROR
    """SGLang's ValueError text for any other name, ``{name}`` as given."""

    def resolve(self, name: str) -> str | None:
        """The member ``name`` resolves to, or None when SGLang raises ValueError for it."""
        upper = name.upper()
        if upper in self.names:
            return upper
        return dict(self.aliases).get(upper)

    def allowed(self) -> tuple[str, ...]:
        """Every name SGLang accepts, members then aliases."""
        return self.names + tuple(alias for alias, _ in self.aliases)


@dataclass(frozen=True, slots=True)
class FlagTable:
    """SGLang's launch parser for one version."""

    sglang_version: str
    """The SGLang release the table was generated from."""
    prog: str
    """The parser's prog (the ``usage:`` and ``error:`` lines start with it)."""
    allow_abbrev: bool
    """argparse allow_abbrev: unique prefixes of long options are accepted."""
    flags: tuple[FlagSpec, ...]
    """Every action, in SGLang's registration order (the usage lists them in it)."""
    speculative: SpecAlgorithms = field(default_factory=SpecAlgorithms)
    """Speculative algorithm names, checked when the server resolves its arguments."""
    type_data: tuple[tuple[str, Json], ...] = ()
    """Data SGLang's own type converters consult (cuda-graph phases and keys)."""
    fallbacks: tuple[tuple[str, Json], ...] = ()
    """Dest -> the value SGLang uses when a flag left at None is not resolved otherwise
    (``Arg(fallback=...)`` in ``srt/arg_groups/fields/*``, e.g. mamba_full_memory_ratio 0.9)."""
    python: str = ""
    """The Python that ran the generator (argparse's texts are the interpreter's)."""

    def option_strings(self) -> tuple[str, ...]:
        """Every option string, in order."""
        return tuple(s for f in self.flags for s in f.option_strings)

    def by_option(self) -> dict[str, FlagSpec]:
        """Option string -> flag."""
        return {s: f for f in self.flags for s in f.option_strings}

    def by_dest(self) -> dict[str, FlagSpec]:
        """Dest -> the first flag storing into it."""
        out: dict[str, FlagSpec] = {}
        for f in self.flags:
            out.setdefault(f.dest, f)
        return out

    def fallback(self, dest: str) -> Json:
        """SGLang's fallback for ``dest`` (None when it declares none)."""
        return dict(self.fallbacks).get(dest)

    def data(self, name: str) -> Json:
        """One entry of ``type_data`` (KeyError when absent)."""
        return dict(self.type_data)[name]

    def to_json(self) -> dict[str, Json]:
        """The whole table as one JSON document."""
        return {
            "schema": SCHEMA,
            "sglang_version": self.sglang_version,
            "python": self.python,
            "parser": {"prog": self.prog, "allow_abbrev": self.allow_abbrev},
            "speculative_algorithms": {
                "names": list(self.speculative.names),
                "aliases": dict(self.speculative.aliases),
                "error": self.speculative.error,
            },
            "type_data": dict(self.type_data),
            "fallbacks": dict(self.fallbacks),
            "flags": [f.to_json() for f in self.flags],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Json]) -> FlagTable:
        """The inverse of ``to_json``.

        Raises:
            ValueError: a document of another schema.
        """
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"flag table schema {doc.get('schema')!r}: expected {SCHEMA}")
        spec = doc.get("speculative_algorithms", {})
        return cls(
            sglang_version=doc["sglang_version"],
            prog=doc["parser"]["prog"],
            allow_abbrev=doc["parser"]["allow_abbrev"],
            flags=tuple(FlagSpec.from_json(f) for f in doc["flags"]),
            speculative=SpecAlgorithms(
                names=tuple(spec.get("names", ())),
                aliases=tuple(sorted(spec.get("aliases", {}).items())),
                error=spec.get("error", SPEC_ERROR),
            ),
            type_data=tuple(sorted(doc.get("type_data", {}).items())),
            fallbacks=tuple(sorted(doc.get("fallbacks", {}).items())),
            python=doc.get("python", ""),
        )

    def dumps(self) -> str:
        """The shipped file's text: the header indented, then one flag per line (readable diffs)."""
        doc = self.to_json()
        flags = doc.pop("flags")
        head = json.dumps(doc, indent=2, sort_keys=False)
        rows = ",\n".join("    " + json.dumps(f, ensure_ascii=False) for f in flags)
        return head[:-2] + ',\n  "flags": [\n' + rows + "\n  ]\n}\n"


def table_path(version: str) -> Path:
    """The shipped table file of SGLang ``version`` (it may not exist)."""
    return _DIR / f"sglang_{version.replace('.', '_')}.json"


def known_versions() -> tuple[str, ...]:
    """SGLang versions with a shipped table, oldest first."""
    found = []
    for path in _DIR.glob("sglang_*.json"):
        found.append(path.stem.removeprefix("sglang_").replace("_", "."))
    return tuple(
        sorted(found, key=lambda v: tuple(int(p) if p.isdigit() else 0 for p in v.split(".")))
    )


@functools.cache
def load_table(version: str = PINNED_VERSION) -> FlagTable:
    """The shipped table of SGLang ``version`` (read once per process).

    Args:
        version: an SGLang release, e.g. ``"0.5.23"``.

    Returns:
        The table.

    Raises:
        UnknownVersion: none is shipped for that version (the message lists the ones that are).
    """
    path = table_path(version)
    if not path.is_file():
        known = ", ".join(known_versions()) or "none"
        raise UnknownVersion(
            f"no SGLang flag table for version {version!r} (gpufleet has: {known}; "
            "generate one with python -m tui.sglang.flagtable.generate)"
        )
    return FlagTable.from_json(json.loads(path.read_text()))


def differences(expected: FlagTable, actual: FlagTable) -> list[str]:
    """Every way ``actual`` differs from ``expected``, one line each (empty: the same).

    Args:
        expected: e.g. what SGLang's real parser gives now.
        actual: e.g. the shipped table.

    Returns:
        Lines naming the option and the field that differ.
    """
    out: list[str] = []
    for name in ("sglang_version", "prog", "allow_abbrev", "speculative", "type_data", "fallbacks"):
        a, b = getattr(expected, name), getattr(actual, name)
        if a != b:
            out.append(f"{name}: {b!r} != {a!r}")
    old = {f.option_strings[0]: f for f in expected.flags}
    new = {f.option_strings[0]: f for f in actual.flags}
    for key in old.keys() - new.keys():
        out.append(f"{key}: missing from the table")
    for key in new.keys() - old.keys():
        out.append(f"{key}: not defined by SGLang's parser")
    for key in old.keys() & new.keys():
        a, b = old[key], new[key]
        if a.choices is not None and b.choices is not None and not a.choices_ordered:
            a_cmp = sorted(map(str, a.choices))
            b_cmp = sorted(map(str, b.choices))
            if a_cmp != b_cmp:
                out.append(f"{key}: choices {list(b.choices)!r} != {list(a.choices)!r}")
            a = replace(a, choices=None)
            b = replace(b, choices=None)
        for f in fields(FlagSpec):
            va, vb = getattr(a, f.name), getattr(b, f.name)
            if va != vb:
                out.append(f"{key}: {f.name} {vb!r} != {va!r}")
    order_old = [k for k in old if k in new]
    order_new = [k for k in new if k in old]
    if order_old != order_new:
        out.append("flag order differs from SGLang's registration order")
    return sorted(out)
