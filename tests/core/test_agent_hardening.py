"""No way in through the agent (issue 31), over real HTTP on loopback against a real agent of a
simulated node:

- operations take profile names, never paths (``/any/path.toml``, ``../../etc/passwd``);
- a profile applied or saved through the API may not set loader or interpreter variables
  (``LD_PRELOAD``, ``PYTHONPATH``) nor an ``engine.python`` outside the node's allow-list;
- token scopes: read < operate < admin, and a read-only agent accepts read tokens only;
- a body over the limit is refused (413) while it is read, never buffered whole;
- 200 concurrent clients of ``/api/v1/counters`` all answered, the agent's memory flat.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from node_helpers import Node, nodes, server_pid
from repo_paths import ROOT

from tui import paths
from tui.agent import cli as agent_cli

pytestmark = [pytest.mark.timeout(150)]

SHIPPED = ROOT / "profiles"
TOKENS = {"read": "read-token-0123456789", "operate": "operate-token-0123456789"}
ADMIN = "admin-token-0123456789"


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One simulated node (1 GPU) whose agent has a read, an operate and an admin token, and
    whose settings allow one extra interpreter."""
    tmp = tmp_path_factory.mktemp("hardening")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(paths.STATE_ENV, str(tmp / "unused-state"))
        patch.setenv(paths.CONFIG_ENV, str(tmp / "config"))
        (tmp / "config").mkdir()
        (tmp / "config" / "settings.toml").write_text('[agent]\npython = ["/opt/allowed/python"]\n')
        with nodes(tmp, count=1, gpus=1, agents=False) as (one,):
            one.token_file.write_text(
                f"# scoped\nread {TOKENS['read']}\noperate {TOKENS['operate']}\n{ADMIN}\n"
            )
            evil = (one.root / "profiles" / "node-base.toml").read_text()
            evil = evil.replace('name = "node-base"', 'name = "node-evil"')
            (one.root / "profiles" / "node-evil.toml").write_text(
                evil + '\n[env]\nLD_PRELOAD = "/tmp/evil.so"\n'
            )
            one.start_agent()
            yield one


def base(node: Node) -> str:
    return f"http://{node.agent_address}"


def save_profile(node: Node, name: str, profile: dict[str, object]) -> httpx.Response:
    """PUT ``profile`` as the node's profile ``name`` with the admin token; the answer."""
    return httpx.put(
        f"{base(node)}/api/v1/profiles/{name}",
        json={"profile": profile},
        headers=bearer(ADMIN),
        timeout=10,
    )


def journal_types(node: Node) -> list[str]:
    answer = httpx.get(f"{base(node)}/api/v1/journal", headers=bearer(ADMIN), timeout=10)
    return [e["type"] for e in answer.json()["entries"]]


def test_operations_take_names_never_paths(node: Node, tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text((node.root / "profiles" / "node-evil.toml").read_text())
    before, pid = journal_types(node), server_pid(node)
    for profile in (str(outside), "../../../../etc/passwd", "node-base.toml", "/etc/passwd"):
        for kind in ("apply", "canary", "rollout"):
            answer = httpx.post(
                f"{base(node)}/api/v1/operations",
                json={"kind": kind, "profile": profile, "gpu": 0},
                headers=bearer(ADMIN),
                timeout=10,
            )
            assert answer.status_code == 400, (profile, answer.text)
            error = answer.json()["error"]
            assert error.startswith("profile: ") and "not a path" in error, error
            assert "TOML" not in error  # nothing was read, let alone parsed
    assert journal_types(node) == before and server_pid(node) == pid


def test_loader_variables_and_foreign_interpreters_are_refused(node: Node) -> None:
    pid = server_pid(node)
    answer = httpx.post(
        f"{base(node)}/api/v1/operations",
        json={"kind": "apply", "profile": "node-evil"},
        headers=bearer(ADMIN),
        timeout=10,
    )
    assert answer.status_code == 400, answer.text
    assert "env.LD_PRELOAD: not allowed through the agent" in answer.json()["error"]
    doc = httpx.get(
        f"{base(node)}/api/v1/profiles/node-base", headers=bearer(ADMIN), timeout=10
    ).json()["profile"]
    for name in ("PYTHONPATH", "LD_LIBRARY_PATH", "PATH", "TRITON_PTXAS_PATH", "OPENSSL_CONF"):
        bad = {**doc, "name": "node-x", "env": {name: "/tmp/evil"}}
        answer = save_profile(node, "node-x", bad)
        assert answer.status_code == 400 and f"env.{name}:" in answer.json()["error"], answer.text
    fine = {**doc, "name": "node-x", "env": {"SGLANG_ENABLE_TORCH_COMPILE": "0"}}
    answer = save_profile(node, "node-x", fine)
    assert answer.status_code == 200, answer.text
    # A real-SGLang profile: its interpreter must be on the node's allow-list.
    real = json.loads(json.dumps(doc))
    real["engine"] = {"kind": "sglang", "python": "/tmp/evil/python"}
    real["name"] = "node-real"
    real["server"] = {k: v for k, v in real["server"].items() if k != "extra_flags"}
    answer = save_profile(node, "node-real", real)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert "engine.python = '/tmp/evil/python': not allowed" in error
    assert "/opt/allowed/python" in error
    real["engine"]["python"] = "/opt/allowed/python"
    answer = save_profile(node, "node-real", real)
    assert answer.status_code == 200, answer.text
    assert server_pid(node) == pid


def test_token_scopes(node: Node) -> None:
    url = f"{base(node)}/api/v1"
    bad_op = {"kind": "kill"}  # past the guard it is a 400 (no gpus): nothing runs
    doc = httpx.get(f"{url}/profiles/node-base", headers=bearer(ADMIN), timeout=10).json()
    save = {"profile": {**doc["profile"], "name": "node-y"}}
    expected = {
        "read": (200, 403, 403),
        "operate": (200, 400, 403),
        ADMIN: (200, 400, 200),
    }
    for who, (read, operate, admin) in expected.items():
        token = TOKENS.get(who, who)
        assert httpx.get(f"{url}/snapshot", headers=bearer(token), timeout=10).status_code == read
        answer = httpx.post(f"{url}/operations", json=bad_op, headers=bearer(token), timeout=10)
        assert answer.status_code == operate, (who, answer.text)
        answer = httpx.put(f"{url}/profiles/node-y", json=save, headers=bearer(token), timeout=10)
        assert answer.status_code == admin, (who, answer.text)
        if admin == 403:
            assert "this token's scope is" in answer.json()["error"]
    assert httpx.get(f"{url}/snapshot", headers=bearer("nope"), timeout=10).status_code == 401


def test_a_read_only_agent_accepts_read_tokens_only(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = node.root / "bare.token"
    bare.write_text(ADMIN + "\n")
    bare.chmod(0o600)
    status = agent_cli.main(["--readonly", "--token-file", str(bare), "--port", "9"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and err.count("\n") == 0 and "holds no read token" in err, err
    node.stop_agent()
    try:
        node.start_agent("--readonly")
        url = f"{base(node)}/api/v1"
        assert httpx.get(f"{url}/snapshot", headers=bearer(TOKENS["read"]), timeout=10).is_success
        for token in (TOKENS["operate"], ADMIN):
            answer = httpx.get(f"{url}/snapshot", headers=bearer(token), timeout=10)
            assert answer.status_code == 403 and "read tokens only" in answer.json()["error"]
        write = httpx.post(
            f"{url}/operations", json={"kind": "kill"}, headers=bearer(TOKENS["read"]), timeout=10
        )
        assert write.status_code == 403 and "read-only" in write.json()["error"]
    finally:
        node.stop_agent()
        node.start_agent()


def _rss(node: Node) -> int:
    assert node.agent is not None
    return int(psutil.Process(node.agent.pid).memory_info().rss)


def test_a_large_body_is_refused_while_it_is_read(node: Node) -> None:
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        chunk = b" " * (1 << 20)
        for _ in range(400):  # 400 MiB, chunked: no Content-Length to refuse it by
            sent += len(chunk)
            yield chunk

    before = _rss(node)
    with contextlib.suppress(httpx.WriteError, httpx.RemoteProtocolError):
        answer = httpx.post(
            f"{base(node)}/api/v1/operations", content=body(), headers=bearer(ADMIN), timeout=60
        )
        assert answer.status_code == 413, answer.text
    assert sent < 200 << 20, f"the agent read {sent >> 20} MiB of a body over 64 KiB"
    assert _rss(node) - before < 32 << 20
    declared = httpx.post(
        f"{base(node)}/api/v1/operations",
        content=b"{" + b" " * (100 << 10) + b"}",
        headers=bearer(ADMIN),
        timeout=10,
    )
    assert declared.status_code == 413 and "larger than 65536 bytes" in declared.json()["error"]


def test_two_hundred_concurrent_counters_clients_are_all_answered(node: Node) -> None:
    url = f"{base(node)}/api/v1/counters?gpus=0"

    async def burst() -> list[int]:
        # One client, 200 connections at once (a client each would cost the test, not the
        # agent, a TLS context apiece).
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(timeout=30, limits=limits, verify=False) as client:
            answers = await asyncio.gather(
                *(client.get(url, headers=bearer(TOKENS["read"])) for _ in range(200))
            )
        return [a.status_code for a in answers]

    before = _rss(node)
    codes = asyncio.run(burst())
    assert codes == [200] * 200
    # Before: a client, a TLS context and a fleet-state read per request (+190 MiB at 200).
    assert _rss(node) - before < 40 << 20


def test_an_operation_carrying_its_profile_needs_admin_and_the_policy(node: Node) -> None:
    """A profile sent itself (the tuning form's apply), not by a saved name, decides what the
    node runs as saving one does: an operate token is refused in one line, and an admin token's
    profile is held to the same policy as a saved one; nothing runs either way."""
    url = f"{base(node)}/api/v1"
    doc = httpx.get(f"{url}/profiles/node-base", headers=bearer(ADMIN), timeout=10).json()
    edited = {**doc["profile"], "name": "node-edited"}
    before, pid = journal_types(node), server_pid(node)
    apply = {"kind": "apply", "profile": edited, "gpus": [0], "measure": False}
    answer = httpx.post(
        f"{url}/operations", json=apply, headers=bearer(TOKENS["operate"]), timeout=10
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == (
        "profile: 'node-edited' is not this node's saved profile of that name: running a new "
        "profile needs an admin token (this one's scope is operate)"
    )
    evil = {**edited, "env": {"LD_PRELOAD": "/tmp/evil.so"}}
    answer = httpx.post(
        f"{url}/operations", json={**apply, "profile": evil}, headers=bearer(ADMIN), timeout=10
    )
    assert answer.status_code == 400, answer.text
    assert "env.LD_PRELOAD: not allowed through the agent" in answer.json()["error"]
    assert journal_types(node) == before and server_pid(node) == pid
