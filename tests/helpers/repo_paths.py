"""Where the repository's files are, for the tests of every folder and their helpers (each two
levels below the root: ``tests/<folder>/<module>.py``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (``profiles/``, ``bench/``, the Makefile)."""

FIXTURES = ROOT / "tests" / "fixtures"
"""The tests' fixed inputs: logs, model configs, a real SGLang's recordings, a fake server."""
