"""The console with a hand-written replacement switched off (``GPUFLEET_PLAIN``, ``tui.plain``),
measured in the same alternation as the console as it is: what each replacement buys.

A replacement keeps its place where the console needs at least ``EARN_BAR`` times its CPU
without it, in every pair of runs (each run of the variant over the console's run beside it in
the rotation: the machine's drift between rotations cancels); it does not where every pair is
below the bar; otherwise the run cannot tell (more runs, or that variant alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.harness import Stat
from bench.ptyrun import PtyCost
from tui import plain

EARN_BAR = 1.10
"""Console CPU without a replacement over the console's with it: at least 10 % more keeps it."""

AS_IS = "gpufleet"
"""The console as it is (every replacement on): the program the variants are paired with."""


def variant_name(switches: str) -> str:
    """The program's name in the tables: ``plain keepalive``."""
    return f"plain {switches}"


def variant_env(switches: str) -> dict[str, str]:
    """The environment that switches ``switches`` off in the console."""
    return {plain.ENV: switches}


def checked(switches: Sequence[str]) -> list[str]:
    """``switches`` as given (each a ``GPUFLEET_PLAIN`` value: ``keepalive``, ``render``,
    ``batch,keepalive``), refused at once when one names no switch.

    Raises:
        plain.PlainError: one line naming the allowed names.
    """
    for value in switches:
        plain.parse(value)
    return list(switches)


MIN_PAIRS = 2
"""Pairs of runs a verdict needs (one pair is one draw of the machine's noise)."""


def verdict(pairs: Stat | None) -> str:
    """Whether the pairs of runs show the replacement earning its place (``EARN_BAR``)."""
    if pairs is None:
        return "–"
    if pairs.runs < MIN_PAIRS:
        return f"cannot tell ({pairs.runs} pair)"
    if pairs.low >= EARN_BAR:
        return "earns its place"
    if pairs.high < EARN_BAR:
        return "does not earn its place"
    return f"cannot tell (pairs on both sides of {EARN_BAR:.2f})"


def earned_table(costs: Mapping[str, Sequence[PtyCost]]) -> list[str]:
    """A Markdown table: for each ``plain ...`` program of ``costs`` (runs in rotation order),
    its CPU, its pairs over the console as it is, the verdict, and what else it changes (the
    bytes sent to the terminal, the CPU to start)."""
    variants = [name for name in costs if name.startswith("plain ")]
    if AS_IS not in costs or not variants:
        return []
    rows = [
        f"What each replacement buys: the console's CPU with it switched off over the console's "
        f"as it is, each run over the `{AS_IS}` run of its rotation (kept where every pair is "
        f">= {EARN_BAR:.2f})",
        "",
        "| program | CPU s/min | over as is, paired | verdict | bytes/s to the terminal "
        "| CPU s to start |",
        "|---|---|---|---|---|---|",
    ]
    cpu = {name: [c.cpu_per_minute for c in runs] for name, runs in costs.items()}
    for name in [AS_IS, *variants]:
        pairs = None if name == AS_IS else Stat.paired(cpu[name], cpu[AS_IS])
        paired = pairs.text("{:.2f}") if pairs is not None else "–"
        judged = "–" if name == AS_IS else verdict(pairs)
        sent = Stat.of([c.bytes_per_second for c in costs[name]]).text("{:.0f}")
        start = Stat.of([c.start_cpu_s for c in costs[name]]).text("{:.2f}")
        rows.append(
            f"| {name} | {Stat.of(cpu[name]).text('{:.2f}')} | {paired} | {judged} | {sent} "
            f"| {start} |"
        )
    return rows
