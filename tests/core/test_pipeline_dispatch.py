"""Dispatch against real loopback OpenAI-compatible servers: failover, recovery, retries."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pipeline_helpers import ProcessServer, openai_server, set_mode, write_prompts

from tui.pipeline.batch_output import output_record
from tui.pipeline.dispatch import Answer, Dispatcher
from tui.pipeline.prompts import PromptFile


@pytest.fixture
def two_servers() -> Iterator[tuple[ProcessServer, ProcessServer]]:
    a, b = openai_server(), openai_server()
    try:
        a.start()
        b.start()
        yield a, b
    finally:
        a.kill()
        b.kill()


def _dispatcher(
    prompts: PromptFile,
    urls: list[str],
    results: list[tuple[int, dict[str, Any]]],
    failures: list[tuple[int, str, int]],
    **kwargs: Any,
) -> Dispatcher:
    options: dict[str, Any] = {
        "per_server_inflight": 8,
        "model": "m",
        "max_tokens": 8,
        "max_retries": 2,
    }
    options.update(kwargs)

    def record(answer: Answer) -> int:
        line, tokens = output_record(
            answer.prompt,
            answer.position,
            answer.content,
            answer.server,
            answer.started_at,
            answer.latency,
        )
        results.append((answer.position, json.loads(line)))
        return tokens

    return Dispatcher(
        urls,
        prompts,
        on_result=record,
        on_failed=lambda i, reason, attempts: failures.append((i, reason, attempts)),
        **options,
    )


async def test_server_killed_and_relaunched_loses_and_duplicates_nothing(
    tmp_path: Path, two_servers: tuple[ProcessServer, ProcessServer]
) -> None:
    a, b = two_servers
    prompts = PromptFile.open(write_prompts(tmp_path / "p.jsonl", 12000))
    results: list[tuple[int, dict[str, Any]]] = []
    failures: list[tuple[int, str, int]] = []
    dispatcher = _dispatcher(prompts, [a.url, b.url], results, failures)
    dispatcher.start_probes()
    assert await dispatcher.wait_any_healthy(10)
    run = asyncio.create_task(dispatcher.run(iter(range(12000)), 12000))
    while len(results) < 200:
        await asyncio.sleep(0.01)
    a.kill()  # in-flight requests on a fail and go back to the queue
    killed_at = len(results)
    while dispatcher.servers[0].healthy:
        await asyncio.sleep(0.01)
    await asyncio.to_thread(a.start)
    await asyncio.wait_for(run, 60)
    await dispatcher.aclose()
    counts = Counter(i for i, _ in results)
    assert sorted(counts) == list(range(12000)) and max(counts.values()) == 1
    assert not failures
    after_restart = [r for _, r in results[killed_at:] if r["server"] == a.url]
    assert after_restart, "the relaunched server got work again"
    chat = next(r for i, r in results if i == 0)
    completion = next(r for i, r in results if i == 1)
    assert "m0" in str(chat["text"]) and "p1" in str(completion["text"])
    assert chat["custom_id"] == prompts.read(0).custom_id
    assert chat["response"]["status_code"] == 200
    assert set(chat) >= {
        "id",
        "custom_id",
        "response",
        "error",
        "index",
        "text",
        "prompt_tokens",
        "completion_tokens",
        "server",
        "started_at",
        "latency_s",
        "finish_reason",
    }


async def test_errors_are_retried_then_recorded_as_failed(
    tmp_path: Path, two_servers: tuple[ProcessServer, ProcessServer]
) -> None:
    a, _ = two_servers
    set_mode(a, "fail400")
    prompts = PromptFile.open(write_prompts(tmp_path / "p.jsonl", 5))
    results: list[tuple[int, dict[str, Any]]] = []
    failures: list[tuple[int, str, int]] = []
    dispatcher = _dispatcher(prompts, [a.url], results, failures, max_retries=2)
    dispatcher.start_probes()
    assert await dispatcher.wait_any_healthy(10)
    await asyncio.wait_for(dispatcher.run(iter(range(5)), 5), 30)
    await dispatcher.aclose()
    assert not results
    assert sorted(i for i, _, _ in failures) == list(range(5))
    assert all("HTTP 400" in reason and attempts == 3 for _, reason, attempts in failures)
    assert httpx.get(a.url + "/_stats").json()["requests"] == 15


async def test_unhealthy_server_gets_no_work(
    tmp_path: Path, two_servers: tuple[ProcessServer, ProcessServer]
) -> None:
    a, b = two_servers
    set_mode(a, "down503")
    prompts = PromptFile.open(write_prompts(tmp_path / "p.jsonl", 200))
    results: list[tuple[int, dict[str, Any]]] = []
    failures: list[tuple[int, str, int]] = []
    dispatcher = _dispatcher(prompts, [a.url, b.url], results, failures)
    dispatcher.start_probes()
    assert await dispatcher.wait_any_healthy(10)
    await asyncio.wait_for(dispatcher.run(iter(range(200)), 200), 30)
    await dispatcher.aclose()
    assert len(results) == 200 and not failures
    assert {r["server"] for _, r in results} == {b.url}
    assert httpx.get(a.url + "/_stats").json()["requests"] == 0
    assert not dispatcher.servers[0].healthy


async def test_no_healthy_server_is_reported(tmp_path: Path) -> None:
    server = openai_server()  # never started: connection refused
    prompts = PromptFile.open(write_prompts(tmp_path / "p.jsonl", 3))
    dispatcher = _dispatcher(prompts, [server.url], [], [])
    dispatcher.start_probes()
    assert not await dispatcher.wait_any_healthy(0.5)
    assert "ConnectError" in dispatcher.servers[0].last_error
    dispatcher.stop()
    await dispatcher.aclose()
