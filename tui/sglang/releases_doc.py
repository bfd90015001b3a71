"""The differences between the SGLang releases gpufleet knows, as the Markdown tables of
``docs/sglang-versions.md``: ``python -m tui.sglang.releases_doc`` (the flags' from each
release's flag table, the rest from ``tui.sglang.releases.CLAIMS``; a test keeps the doc equal).
"""

from __future__ import annotations

import itertools

from tui.sglang.flagtable.table import known_versions, load_table
from tui.sglang.releases import CLAIMS, aliases


def markdown_table() -> str:
    """The claims that differ between releases, as a Markdown table (one column per release)."""
    versions = known_versions()
    head = "| | " + " | ".join(versions) + " |\n|---|" + "---|" * len(versions) + "\n"
    rows = []
    for claim in CLAIMS:
        if claim.since is None and claim.until is None:
            continue
        marks = " | ".join("yes" if claim.holds(v) else "-" for v in versions)
        rows.append(f"| {claim.says} | {marks} |")
    return head + "\n".join(rows) + "\n"


def markdown_flags() -> str:
    """How the releases' parsers differ, from their flag tables, as a Markdown table."""
    versions = known_versions()
    tables = [load_table(v) for v in versions]
    first_algorithms = set(tables[0].speculative.names)

    def alias(table_version: str, option: str) -> str:
        new = aliases(table_version).get(option)
        if new is not None:
            return f"alias of `{new}`"
        known = load_table(table_version).option_strings()
        matches = [o for o in known if o.startswith(option)]
        return "ambiguous prefix" if len(matches) > 1 else "unknown flag"

    rows = {
        "flags defined": [str(len(t.flags)) for t in tables],
        "option strings added / removed since the previous release": ["-"]
        + [
            f"+{len(set(b.option_strings()) - set(a.option_strings()))} / "
            f"-{len(set(a.option_strings()) - set(b.option_strings()))}"
            for a, b in itertools.pairwise(tables)
        ],
        "`--cuda-graph-max-bs`": [alias(v, "--cuda-graph-max-bs") for v in versions],
        "`--mamba-scheduler-strategy`": [alias(v, "--mamba-scheduler-strategy") for v in versions],
        "declared fallbacks (`Arg(fallback=...)`)": [
            ", ".join(f"`{k}`" for k, _ in t.fallbacks) or "-" for t in tables
        ],
        "speculative algorithms beyond 0.5.17's": [
            ", ".join(n for n in t.speculative.names if n not in first_algorithms) or "-"
            for t in tables
        ],
        "`--mamba-full-memory-ratio` when not given": [
            str(t.resolved_default("mamba_full_memory_ratio")) for t in tables
        ],
        "`--decode-log-interval` default (Decode lines every N iterations)": [
            str(t.resolved_default("decode_log_interval")) for t in tables
        ],
        "`--cuda-graph-config` refuses a retired backend": [
            "yes" if dict(t.type_data).get("cuda_graph_config_checks_backend") else "-"
            for t in tables
        ],
    }
    head = "| | " + " | ".join(versions) + " |\n|---|" + "---|" * len(versions) + "\n"
    return head + "\n".join(f"| {k} | " + " | ".join(v) + " |" for k, v in rows.items()) + "\n"


def markdown_removed() -> str:
    """The option strings each release no longer has, as a Markdown list (what breaks a
    profile written for the previous release)."""
    versions = known_versions()
    out = []
    for old, new in itertools.pairwise(versions):
        gone = sorted(set(load_table(old).option_strings()) - set(load_table(new).option_strings()))
        if gone:
            out.append(f"* {new} (gone since {old}): " + ", ".join(f"`{o}`" for o in gone) + "\n")
    return "".join(out)


def markdown_same() -> str:
    """The claims every release shares, as a Markdown list."""
    return "".join(f"* {c.says}\n" for c in CLAIMS if c.since is None and c.until is None)


if __name__ == "__main__":
    print(markdown_flags())
    print(markdown_removed())
    print(markdown_table())
    print(markdown_same(), end="")
