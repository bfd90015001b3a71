"""SGLang's flag table: every option its launch parser defines, as SGLang's own code built it.

The table is generated from SGLang's real parser (``python -m tui.sglang.flagtable.generate``)
and shipped as JSON beside this module, one file per release. It records, per option: the
option strings (long and short), dest, action, type (by name), choices, nargs, const, default
(when JSON can hold it), required, metavar and help; and, for the whole parser, its ``prog`` and
``allow_abbrev``, plus what SGLang checks right after parsing (the speculative algorithm names).

The newest release's file holds its whole table; every older release's file is a delta against
the next newer one (``"delta_of"``): its header in full, and its flags as runs of the newer
table's rows (``[start, end]``) and rows of its own. Releases share most of their ~500 flags, so
the seven tables take ~240 KB instead of ~1.1 MB, and a file's rows read as what that release
had that the next one changed.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

PINNED_VERSION = "0.5.23"
"""The newest SGLang release gpufleet knows: a profile without ``engine.sglang_version`` targets
it, and its table is the one shipped whole (the others are deltas down from it)."""

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

    def resolved_default(self, dest: str) -> Json:
        """The value SGLang uses for ``dest`` when the flag is not given: its declared fallback
        (``Arg(fallback=...)``, 0.5.20 on), else the flag's default (up to 0.5.19 the default
        was the value itself: ``--mamba-full-memory-ratio`` 0.9 either way)."""
        fallbacks = dict(self.fallbacks)
        if dest in fallbacks:
            return fallbacks[dest]
        flag = self.by_dest().get(dest)
        return flag.default if flag is not None else None

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
    def from_json(cls, doc: dict[str, Json], base: FlagTable | None = None) -> FlagTable:
        """The inverse of ``to_json`` (and of ``dumps(base)``, given the same ``base``).

        Raises:
            ValueError: a document of another schema, or a delta without its base.
        """
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"flag table schema {doc.get('schema')!r}: expected {SCHEMA}")
        spec = doc.get("speculative_algorithms", {})
        delta_of = doc.get("delta_of")
        if delta_of is not None and (base is None or base.sglang_version != delta_of):
            raise ValueError(f"a delta of SGLang {delta_of}'s table needs that table")
        if delta_of is not None and base is not None:
            flags = _apply_delta(base, doc["flags"])
        else:
            flags = tuple(FlagSpec.from_json(f) for f in doc["flags"])
        return cls(
            sglang_version=doc["sglang_version"],
            prog=doc["parser"]["prog"],
            allow_abbrev=doc["parser"]["allow_abbrev"],
            flags=flags,
            speculative=SpecAlgorithms(
                names=tuple(spec.get("names", ())),
                aliases=tuple(sorted(spec.get("aliases", {}).items())),
                error=spec.get("error", SPEC_ERROR),
            ),
            type_data=tuple(sorted(doc.get("type_data", {}).items())),
            fallbacks=tuple(sorted(doc.get("fallbacks", {}).items())),
            python=doc.get("python", ""),
        )

    def dumps(self, base: FlagTable | None = None) -> str:
        """The shipped file's text: the header indented, then one flag per line (readable diffs).

        Args:
            base: the next newer release's table: write this one as a delta against it (runs
                of its rows, ``[start, end]``, and this release's own rows).
        """
        doc = self.to_json()
        flags = doc.pop("flags")
        if base is not None:
            first = {"schema": doc.pop("schema"), "sglang_version": doc.pop("sglang_version")}
            doc = first | {"delta_of": base.sglang_version} | doc
            flags = _delta_rows([f.to_json() for f in base.flags], flags)
        text = json.dumps(doc, indent=2, sort_keys=False)
        rows = ",\n".join("    " + json.dumps(f, ensure_ascii=False) for f in flags)
        return text[:-2] + ',\n  "flags": [\n' + rows + "\n  ]\n}\n"


def _delta_rows(base: list[dict[str, Json]], rows: list[dict[str, Json]]) -> list[Json]:
    """``rows`` as runs of ``base`` (``[start, end]``, end excluded) and rows of their own."""
    texts = [json.dumps(r, sort_keys=True) for r in rows]
    matcher = difflib.SequenceMatcher(
        None, [json.dumps(r, sort_keys=True) for r in base], texts, autojunk=False
    )
    out: list[Json] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out.extend([[i1, i2]] if tag == "equal" else rows[j1:j2])
    return out


def _apply_delta(base: FlagTable, entries: list[Json]) -> tuple[FlagSpec, ...]:
    """The flags a delta file's entries describe over ``base``'s (``_delta_rows`` inverted).

    Raises:
        ValueError: a run outside the base table, or an entry of neither kind.
    """
    out: list[FlagSpec] = []
    for entry in entries:
        if isinstance(entry, dict):
            out.append(FlagSpec.from_json(entry))
        elif isinstance(entry, list) and len(entry) == 2 and 0 <= entry[0] <= entry[1]:
            if entry[1] > len(base.flags):
                raise ValueError(f"run {entry} beyond the {len(base.flags)} flags of the base")
            out.extend(base.flags[entry[0] : entry[1]])
        else:
            raise ValueError(f"flag table entry {entry!r}: expected a row or [start, end]")
    return tuple(out)


def version_key(version: str) -> tuple[int, ...]:
    """``"0.5.17"`` -> ``(0, 5, 17)``: releases in order (a part that is no number counts 0)."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def table_path(version: str) -> Path:
    """The shipped table file of SGLang ``version`` (it may not exist)."""
    return _DIR / f"sglang_{version.replace('.', '_')}.json"


def known_versions() -> tuple[str, ...]:
    """SGLang versions with a shipped table, oldest first."""
    found = [p.stem.removeprefix("sglang_").replace("_", ".") for p in _DIR.glob("sglang_*.json")]
    return tuple(sorted(found, key=version_key))


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
    doc = json.loads(path.read_text())
    delta_of = doc.get("delta_of")
    if delta_of is None:
        return FlagTable.from_json(doc)
    if version_key(delta_of) <= version_key(version):
        raise ValueError(f"{path.name}: a delta of {delta_of}, not of a newer release")
    return FlagTable.from_json(doc, load_table(delta_of))


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
