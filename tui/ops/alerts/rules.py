"""The alert rules and where alerts go: ``[alerts]`` of the operator's ``settings.toml``.

Every rule is on with its defaults unless the settings say otherwise; a rule's table sets its
threshold, how long its condition must hold before it fires (``for_s``) and how long it must be
false before it clears (``clear_s``: the hysteresis), or turns it off (``enabled = false``)::

    [alerts]
    webhook = "https://hooks.example.com/gpufleet"   # POSTed a JSON body per alert (optional)
    webhook_timeout_s = 5

    [alerts.throughput_low]
    below_percent = 60    # of the GPU's own 1-hour median tok/s
    for_s = 300

    [alerts.gpu_hot]
    enabled = false

    [alerts.capped]       # the one rule off unless turned on
    enabled = true

A key or value that cannot be used is one line naming the file, the key and what is allowed
(``AlertConfigError``); nothing is guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui import paths
from tui.inputs import settings_table


@dataclass(frozen=True, slots=True)
class RuleKind:
    """One kind of rule: what it watches, its threshold's key and range, its defaults."""

    name: str
    """The rule's table under ``[alerts]``."""
    says: str
    """What it fires on, in words (``--help``, the docs)."""
    for_s: float
    """Default seconds the condition holds before it fires."""
    clear_s: float
    """Default seconds the condition is false before it clears."""
    key: str | None = None
    """Its threshold's key (None: it has none)."""
    default: float = 0.0
    """The threshold's default."""
    low: float = 0.0
    """The threshold's smallest allowed value."""
    high: float = 0.0
    """The threshold's largest allowed value."""
    on: bool = True
    """Whether it runs when the settings say nothing of it (``enabled`` turns it on or off)."""


KINDS = (
    RuleKind("crashed", "a server failed or exited (not by an operation)", 0.0, 30.0),
    RuleKind("stuck", "a server answers but makes no progress, or stops answering", 60.0, 30.0),
    RuleKind(
        "throughput_low",
        "a GPU's tok/s below PERCENT of its own 1-hour median while it has requests",
        600.0, 120.0, "below_percent", 50.0, 1.0, 100.0,
    ),
    RuleKind(
        "queue_growing", "a server's queue grew by at least N requests in a minute",
        120.0, 120.0, "by", 20.0, 1.0, 100_000.0,
    ),
    # Off unless turned on: a cap is how a fleet was launched (the demo's Mamba cache caps it
    # by design), fired at every start and seen on the panels; docs/observability.md says why.
    RuleKind(
        "capped", "SGLang capped a server's max running requests below the asked",
        0.0, 0.0, on=False,
    ),
    RuleKind("gpu_hot", "a GPU at or above C degrees", 60.0, 60.0, "above_c", 85.0, 30.0, 120.0),
    RuleKind(
        "gpu_power", "a GPU drawing at least PERCENT of its power limit",
        120.0, 60.0, "above_percent", 98.0, 10.0, 150.0,
    ),
    RuleKind(
        "job_stalled", "the running job completed no prompt, or its status went silent",
        300.0, 0.0,
    ),
)  # fmt: skip
"""Every rule gpufleet knows, in the order they are checked."""

MAX_SECONDS = 86_400.0
"""Longest ``for_s`` or ``clear_s``: a day."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule as configured."""

    name: str
    """Its kind's name (``KINDS``)."""
    for_s: float
    """Seconds the condition holds before it fires."""
    clear_s: float
    """Seconds the condition is false before it clears."""
    threshold: float = 0.0
    """Its threshold (the kind's key; 0 when it has none)."""


@dataclass(frozen=True, slots=True)
class AlertConfig:
    """The alert settings."""

    rules: tuple[Rule, ...]
    """The rules that are on."""
    webhook: str | None = None
    """Where each alert is POSTed (None: nowhere)."""
    webhook_timeout_s: float = 5.0
    """Seconds a POST may take (connect, send, answer)."""


class AlertConfigError(ValueError):
    """The ``[alerts]`` settings cannot be used; the message names the file and the key."""


def default_config() -> AlertConfig:
    """Every rule that is on by default (``RuleKind.on``) with its defaults, no webhook."""
    return AlertConfig(tuple(rule_of(k) for k in KINDS if k.on))


def rule_of(kind: RuleKind) -> Rule:
    """The rule of ``kind`` with its defaults."""
    return Rule(kind.name, kind.for_s, kind.clear_s, kind.default)


def _number(path: Path, key: str, value: Any, low: float, high: float) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high:
        raise AlertConfigError(f"{path}: {key} = {value!r}: must be a number in {low:g}..{high:g}")
    return float(value)


def _rule(path: Path, kind: RuleKind, table: Any) -> Rule | None:
    where = f"alerts.{kind.name}"
    if not isinstance(table, dict):
        raise AlertConfigError(f"{path}: {where} must be a table ([{where}])")
    allowed = ["enabled", "for_s", "clear_s", *([kind.key] if kind.key else [])]
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise AlertConfigError(
            f"{path}: {where}.{unknown[0]} is not a setting (allowed: {', '.join(allowed)})"
        )
    enabled = table.get("enabled", kind.on)
    if not isinstance(enabled, bool):
        raise AlertConfigError(f"{path}: {where}.enabled = {enabled!r}: must be true or false")
    if not enabled:
        return None
    return Rule(
        kind.name,
        _number(path, f"{where}.for_s", table.get("for_s", kind.for_s), 0.0, MAX_SECONDS),
        _number(path, f"{where}.clear_s", table.get("clear_s", kind.clear_s), 0.0, MAX_SECONDS),
        _number(path, f"{where}.{kind.key}", table.get(kind.key, kind.default), kind.low,
                kind.high) if kind.key else 0.0,
    )  # fmt: skip


def load_alert_config(path: Path | None = None) -> AlertConfig:
    """The alert settings of ``settings.toml`` (every rule's defaults where it says nothing).

    Raises:
        AlertConfigError: the file cannot be read or parsed, or a key or value under
            ``[alerts]`` cannot be used (one line naming it and what is allowed).
    """
    path = path or paths.settings_file()
    allowed = ["webhook", "webhook_timeout_s", *sorted(k.name for k in KINDS)]
    alerts = settings_table(path, "alerts", allowed, AlertConfigError)
    if alerts is None:
        return default_config()
    webhook = alerts.get("webhook")
    if webhook is not None and (
        not isinstance(webhook, str) or not webhook.startswith(("http://", "https://"))
    ):
        raise AlertConfigError(f"{path}: alerts.webhook = {webhook!r}: must be an http(s) URL")
    timeout = _number(
        path, "alerts.webhook_timeout_s", alerts.get("webhook_timeout_s", 5.0), 0.5, 60.0
    )
    rules = (_rule(path, kind, alerts.get(kind.name, {})) for kind in KINDS)
    return AlertConfig(tuple(r for r in rules if r is not None), webhook, timeout)
