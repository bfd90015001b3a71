"""Running argv cases through a parser and recording everything it does, as JSON.

The flag-table test runs the same cases through SGLang's own parser and through the one rebuilt
from the table, each in its own interpreter, and compares the records: exit status, stdout
(``--help``), stderr (usage, error line, deprecation warnings), the namespace, and SGLang's
speculative-algorithm check.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
from collections.abc import Callable, Sequence
from typing import Any

from tui.sglang.flagtable.check import speculative_crash


def _plain(value: object) -> Any:
    """A namespace value as JSON (sets sorted, anything else JSON lacks as its repr)."""
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=str)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def run_cases(
    parser: argparse.ArgumentParser,
    cases: Sequence[Sequence[str]],
    spec_error: Callable[[str], str | None],
) -> list[Any]:
    """Parse each argv with ``parser``, as ``prepare_server_args`` does (``parse_args``).

    Args:
        parser: SGLang's parser, or the one rebuilt from the table (the test runs both).
        cases: argv lists.
        spec_error: the error SGLang raises while resolving a ``--speculative-algorithm``
            value, as ``"ValueError: ..."`` (None: accepted).

    Returns:
        Per case: exit status (0: parsed), stdout, stderr, the namespace (JSON) when parsed,
        the speculative-algorithm error for that namespace, and the exception an action raised.
    """
    results = []
    root = logging.getLogger()
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        status, namespace, spec, raised = 0, None, None, None
        # Deprecation warnings are logger warnings: record them with the case's stderr, whatever
        # handlers the process has (SGLang's import configures the root logger, ours does not).
        saved, root.handlers = root.handlers, [logging.StreamHandler(err)]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                parsed = parser.parse_args(list(argv))
                namespace = {k: _plain(v) for k, v in sorted(vars(parsed).items())}
                algorithm = getattr(parsed, "speculative_algorithm", None)
                spec = spec_error(algorithm) if algorithm is not None else None
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 1
            except Exception as exc:  # an action that raises (LoRAPathAction): a traceback
                status, raised = 1, f"{type(exc).__name__}: {exc}"
            finally:
                root.handlers = saved
        results.append(
            {
                "status": status,
                "stdout": out.getvalue(),
                "stderr": err.getvalue(),
                "namespace": namespace,
                "spec_error": spec,
                "raised": raised,
            }
        )
    return results


def table_spec_error(version: str) -> Callable[[str], str | None]:
    def spec_error(name: str) -> str | None:
        crash = speculative_crash(name, version=version)
        return crash.splitlines()[-1] if crash else None

    return spec_error
