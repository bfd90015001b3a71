"""Fixtures of the core's tests alone: the pipeline's fake endpoint and S3 server, and a child
process standing for a server on a simulated GPU."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest
from pipeline_helpers import ProcessServer, moto_with_bucket, openai_server, started


@pytest.fixture
def server() -> Iterator[ProcessServer]:
    """The fake OpenAI-compatible endpoint (``pipeline_endpoint.py``), started; stopped after.
    (A module of its own ``server`` fixture, ``test_sglang_live``'s, takes its place there.)"""
    yield from started(openai_server())


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProcessServer]:
    """moto's S3 server with an empty bucket behind a gate, its credentials in the environment."""
    yield from moto_with_bucket(monkeypatch)


@pytest.fixture
def child() -> Iterator[psutil.Process]:
    """A process of this test's own (a sleeping Python), the holder the simulated GPU records;
    killed after."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)
