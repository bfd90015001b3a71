"""The agent's token file with scopes: a bare token (every file made before scopes) is admin, a
``SCOPE TOKEN`` line is that scope; a client sends the strongest; ``gpufleet agent token SCOPE``
adds one; a bad line is one error naming the file and the line."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tui.agent import cli as agent_cli
from tui.servers.tokens import (
    AgentToken,
    TokenError,
    add_token,
    allows,
    check_private,
    load_or_create,
    match,
    read_token,
    read_tokens,
)


def test_a_bare_token_is_admin_and_scoped_lines_are_their_scope(tmp_path: Path) -> None:
    old = tmp_path / "old.token"
    old.write_text("tok-of-an-earlier-version\n")
    assert read_tokens(old) == (AgentToken("tok-of-an-earlier-version", "admin"),)
    assert read_token(old) == "tok-of-an-earlier-version"
    scoped = tmp_path / "scoped.token"
    scoped.write_text("# who has what\nread r-1\n\noperate o-2\n")
    assert read_tokens(scoped) == (AgentToken("r-1", "read"), AgentToken("o-2", "operate"))
    assert read_token(scoped) == "o-2"  # a client sends the strongest
    assert match("Bearer r-1", read_tokens(scoped)) == AgentToken("r-1", "read")
    assert match("Bearer r-", read_tokens(scoped)) is None and match(None, ()) is None
    assert allows("admin", "operate") and allows("read", "read") and not allows("operate", "admin")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("write w-1\n", "bad.token:1: scope 'write' is not one of read, operate, admin"),
        ("read a b\n", "bad.token:1: must be TOKEN or SCOPE TOKEN"),
        ("read a\nadmin a\n", "bad.token:2: this token is listed twice"),
        ("# nothing\n\n", "bad.token: must hold a token"),
    ],
)
def test_a_bad_token_file_is_one_line_naming_the_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.token"
    path.write_text(text)
    with pytest.raises(TokenError) as caught:
        read_tokens(path)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_agent_token_adds_a_scoped_token_and_prints_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "keys" / "agent.token"
    assert agent_cli.main(["token", "read", "--token-file", str(path)]) == 0
    printed = capsys.readouterr().out.strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert agent_cli.main(["token", "operate", "--token-file", str(path)]) == 0
    second = capsys.readouterr().out.strip()
    assert read_tokens(path) == (AgentToken(printed, "read"), AgentToken(second, "operate"))
    assert len(printed) >= 40 and printed != second
    assert add_token(path, "admin") in path.read_text()
    with pytest.raises(SystemExit) as refused:
        agent_cli.main(["token", "sudo", "--token-file", str(path)])
    assert refused.value.code == 2


@pytest.mark.parametrize(
    ("text", "mode", "says"),
    [
        ("admin-tok\n", 0o644, "is 0644, readable by other users, and holds an admin token"),
        ("operate o-1\nread r-1\n", 0o640, "is 0640, readable by other users, and holds an"),
        ("read r-1\n", 0o664, "is 0664, writable by other users: they could add an admin token"),
    ],
)
def test_a_token_file_other_users_can_use_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, mode: int, says: str
) -> None:
    """As ssh refuses a private key others can read: the agent does not start on a token file
    others could read a write token from, or write one into (it used to, without a word)."""
    path = tmp_path / "agent.token"
    path.write_text(text)
    path.chmod(mode)
    status = agent_cli.main(["--token-file", str(path), "--profile", "sim-baseline", "--port", "9"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and err.count("\n") == 0, err
    assert says in err and f"chmod 600 {path}" in err, err
    assert agent_cli.main(["token", "read", "--token-file", str(path)]) == 2
    assert path.read_text() == text  # nothing appended to it


def test_a_token_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent.token"
    path.write_text("admin-tok\n")
    path.chmod(0o600)
    if os.geteuid() != 0:
        pytest.skip("only root can give the file to another user")
    os.chown(path, 65534, 65534)
    with pytest.raises(TokenError, match="is owned by uid 65534, not this user"):
        check_private(path, read_tokens(path))


def test_a_token_file_of_read_tokens_only_may_be_readable(tmp_path: Path) -> None:
    """A file of read tokens only (a dashboard's) may be readable by others: nothing it holds
    changes the fleet."""
    path = tmp_path / "read.token"
    path.write_text("read r-1\n")
    path.chmod(0o644)
    assert load_or_create(path, "read") == (AgentToken("r-1", "read"),)
