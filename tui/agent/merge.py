"""One result for an operation that ran on several nodes (the console's screens show one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tui.retune.events import ApplyResult, ThroughputComparison
from tui.rollout.rollout import RolloutResult


def merge_applies(results: Sequence[ApplyResult]) -> ApplyResult:
    """One result for an apply that ran on several nodes: every node's reports; the throughput
    of the first node (each node measured its own GPUs)."""
    if len(results) == 1:
        return results[0]
    first = results[0]
    previous: dict[int, str | None] = {}
    for r in results:
        previous.update(r.previous_profiles)
    return replace(
        first,
        gpus=tuple(g for r in results for g in r.gpus),
        reports=tuple(rep for r in results for rep in r.reports),
        previous_profiles=previous,
        started_at=min(r.started_at for r in results),
        finished_at=max(r.finished_at for r in results),
        refused=tuple(x for r in results for x in r.refused),
    )


def merge_rollouts(results: Sequence[RolloutResult]) -> RolloutResult:
    """One result for a rollout that walked several nodes in turn."""
    first = results[0]
    if len(results) == 1:
        return first

    def every(name: str) -> tuple[int, ...]:
        return tuple(g for r in results for g in getattr(r, name))

    return replace(
        first,
        planned=every("planned"),
        steps=tuple(s for r in results for s in r.steps),
        done=every("done"),
        failed=every("failed"),
        stayed=every("stayed"),
        restored=every("restored"),
        skipped=every("skipped"),
        failure=next((r.failure for r in results if r.failure), None),
        finished_at=results[-1].finished_at,
        refused=tuple(x for r in results for x in r.refused),
        verdict=_node_verdicts(results),
    )


def _node_verdicts(results: Sequence[RolloutResult]) -> ThroughputComparison | None:
    """Each node measured its own fleet before and after its own walk: their windows differ,
    so one pooled verdict would compare different minutes. Each node's is said instead."""
    said = [
        f"GPUs {','.join(str(g) for g in r.planned)}: {r.verdict.describe()}"
        for r in results
        if r.verdict is not None
    ]
    if not said:
        return None
    return ThroughputComparison((), (), "not measured", note="per node: " + "; ".join(said))
