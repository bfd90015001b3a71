"""The agent's control API over real HTTP: the token (401 without it or with a wrong one, on every
route), read-only mode (403 for every write, nothing run), bad requests named (400), and an
operation asked remotely going through the node's operations core (lock, journal, events)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest
from node_helpers import nodes

from tui.agent.codec import WIRE_COMMANDS as KINDS
from tui.agent.codec import decode, encode
from tui.agent.remap import GPU_FIELDS, remap_gpus
from tui.fleet.snapshot import FleetSnapshot
from tui.ops.events import OpEvent
from tui.retune.events import GpuPhase
from tui.servers.tokens import load_or_create, matches

pytestmark = [pytest.mark.timeout(150)]

READS = ["/metrics", "/api/v1/agent", "/api/v1/snapshot", "/api/v1/profiles", "/api/v1/journal"]
WRITES = [{"kind": kind, "gpus": [0], "profile": "node-base", "gpu": 0} for kind in KINDS]


def test_token_file_is_made_private_and_compared_exactly(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "agent.token"
    (made,) = load_or_create(path)
    token = made.value
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert made.scope == "admin" and path.read_text() == token + "\n"  # bare: a client's file too
    assert len(token) >= 40 and load_or_create(path) == (made,)
    assert matches(f"Bearer {token}", token) and matches(f"bearer {token}", token)
    assert not matches(None, token) and not matches(token, token)
    assert not matches(f"Bearer {token}x", token) and not matches(f"Basic {token}", token)


def test_events_and_results_cross_the_api_typed_and_remapped() -> None:
    event = GpuPhase(3, "loading weights", 1.5)
    back = decode(json.loads(json.dumps(encode(event))), OpEvent)
    assert back == event
    assert remap_gpus(back, lambda g: 100 + g) == GpuPhase(103, "loading weights", 1.5)
    assert decode(encode(FleetSnapshot()), FleetSnapshot) == FleetSnapshot()
    # Every class the codec carries with a field naming GPUs is in the remap table.
    import dataclasses

    from tui.agent.codec import REGISTRY

    for name, cls in REGISTRY.items():
        gpu_fields = {
            f.name for f in dataclasses.fields(cls) if f.name in ("gpu", "gpus", "controls")
        }
        assert gpu_fields <= GPU_FIELDS.get(name, frozenset()) or name in (
            "JournalEntry",  # the node's own journal, read as written there
            "GpuPanel",  # renumbered by the poller itself
            "RetuneCost",  # its ``gpus`` is a count
            "JobEnergy",  # its ``gpus`` is a count
            "AlertFired",  # renumbered, its node named, by the console (``alerts_of``)
        ), name


def test_the_api_refuses_without_the_token_and_writes_when_read_only(tmp_path: Path) -> None:
    with nodes(tmp_path, count=1, gpus=1, agents=False) as (node,):
        node.start_readonly_agent()
        base = f"http://{node.agent_address}"
        token = node.token_file.read_text().strip()
        good = {"authorization": f"Bearer {token}"}
        for path in READS:
            assert httpx.get(base + path, timeout=5).status_code == 401, path
            bad = {"authorization": f"Bearer {token[:-1]}"}
            assert httpx.get(base + path, headers=bad, timeout=5).status_code == 401, path
            assert httpx.get(base + path, headers=good, timeout=5).status_code == 200, path
        unauth = httpx.post(f"{base}/api/v1/operations", json=WRITES[0], timeout=5)
        assert unauth.status_code == 401
        assert unauth.headers["www-authenticate"].startswith("Bearer")
        for write in WRITES:
            answer = httpx.post(f"{base}/api/v1/operations", json=write, headers=good, timeout=5)
            assert answer.status_code == 403, write
            assert "read-only" in answer.json()["error"]
        journal = httpx.get(f"{base}/api/v1/journal", headers=good, timeout=5).json()
        assert [e["type"] for e in journal["entries"]] == ["apply"], "a refused write ran"
        node.stop_agent()

        node.start_agent()
        answer = httpx.post(
            f"{base}/api/v1/operations", json={"kind": "kill"}, headers=good, timeout=5
        )
        assert answer.status_code == 400
        assert answer.json()["error"].startswith("gpus:")
        answer = httpx.post(
            f"{base}/api/v1/operations",
            json={"kind": "kill", "gpus": [0], "mode": "nicely"},
            headers=good,
            timeout=5,
        )
        assert answer.status_code == 400 and answer.json()["error"].startswith("mode:")
        started = httpx.post(
            f"{base}/api/v1/operations",
            json={"kind": "relaunch", "gpus": [0]},
            headers=good,
            timeout=5,
        )
        assert started.status_code == 202
        op = started.json()["id"]
        after, kinds, doc = 0, [], {}
        while True:
            doc = httpx.get(
                f"{base}/api/v1/operations/{op}",
                params={"after": after, "wait": 10},
                headers=good,
                timeout=20,
            ).json()
            kinds += [e["_t"] for e in doc["events"]]
            after = doc["next"]
            if doc["state"] != "running":
                break
        assert doc["state"] == "done", doc["error"]
        assert kinds[0] == "OperationStarted" and kinds[-1] == "OperationFinished"
        assert "GpuReady" in kinds
        journal = httpx.get(f"{base}/api/v1/journal", headers=good, timeout=5).json()
        last = journal["entries"][-1]
        assert last["type"] == "relaunch" and last["by"] == "agent:n1" and last["ok"]
        logs = httpx.get(f"{base}/api/v1/logs/0", params={"lines": 5}, headers=good, timeout=5)
        assert logs.status_code == 200 and len(logs.json()["lines"]) == 5
        assert httpx.get(f"{base}/api/v1/logs/9", headers=good, timeout=5).status_code == 400
