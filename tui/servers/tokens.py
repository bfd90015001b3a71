"""The agent's bearer tokens, each with a scope, in one 0600 file made on the agent's first start.

The agent's token file holds one token per line, ``#`` comments and blank lines allowed::

    # gpufleet agent tokens: "SCOPE TOKEN", or a bare TOKEN (admin)
    read    r3Kx...        Prometheus, dashboards: every GET, the preflight
    operate 9fQa...        consoles that apply, relaunch, roll out (and everything read does)
    admin   Zt0p...        saves profiles on the node too

A bare token (the only form before scopes: a file of an earlier version, or one an operator made
by hand) is an **admin** token, so every file made before keeps working as it did. A read-only
agent (``--readonly``) accepts read tokens only: a token that can write must not work there,
or the copy handed out to a dashboard of a read-only agent would be a write token elsewhere.

The agent refuses a token file that other users could read while it holds an operate or admin
token, or that another user could write (or owns): as ssh refuses a private key others can read.
Seen: a 0644 file of admin tokens was served without a word.

A client (the console, the pipeline) reads a token file to *send* a token: a file with one bare
token is that token; a file of scoped lines (the agent's own) gives its strongest token.
Comparison is constant-time (``hmac.compare_digest``) against every token, whichever matches.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from tui.inputs import TOKEN_LIMIT, InputError, read_text
from tui.outputs import append_record, create_new, make_dir, open_writable, write_all, write_reason

Scope = Literal["read", "operate", "admin"]
"""What a token may do: read < operate < admin."""
SCOPES: tuple[Scope, ...] = get_args(Scope)
"""Every scope, weakest first."""
TOKEN_BYTES = 32
"""Entropy of a new token (``secrets.token_urlsafe``: 43 URL-safe characters)."""
MAX_TOKEN_FILE_BYTES = TOKEN_LIMIT
"""A token file larger than this is not a token file."""
MAX_TOKENS = 64
"""Most tokens one agent's file may hold."""


class TokenError(ValueError):
    """The token file cannot be read, made or used (the message names the file)."""


@dataclass(frozen=True, slots=True)
class AgentToken:
    """One token the agent accepts."""

    value: str
    """The secret."""
    scope: Scope
    """What it may do."""


def allows(scope: Scope, needed: Scope) -> bool:
    """Whether a token of ``scope`` may do what needs ``needed``."""
    return SCOPES.index(scope) >= SCOPES.index(needed)


def _text(path: Path) -> str:
    try:
        return read_text(path, MAX_TOKEN_FILE_BYTES, "a token file")
    except FileNotFoundError:
        raise TokenError(f"--token-file={path}: not a file") from None
    except InputError as error:
        raise TokenError(f"--token-file={path}: {error.problem}") from None


def _word_ok(word: str) -> bool:
    return bool(word) and word.isprintable() and not any(c.isspace() for c in word)


def parse_tokens(text: str, path: Path) -> tuple[AgentToken, ...]:
    """The tokens of a token file's text.

    Raises:
        TokenError: a line that is not ``TOKEN`` or ``SCOPE TOKEN``, an unknown scope, a token
            listed twice, none at all, or more than ``MAX_TOKENS`` (naming the file and line).
    """
    found: list[AgentToken] = []
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        where = f"--token-file={path}:{number}"
        if len(words) == 1:
            scope, value = "admin", words[0]
        elif len(words) == 2:
            scope, value = words
        else:
            raise TokenError(f"{where}: must be TOKEN or SCOPE TOKEN ({', '.join(SCOPES)})")
        if scope not in SCOPES:
            raise TokenError(f"{where}: scope {scope[:20]!r} is not one of {', '.join(SCOPES)}")
        if not _word_ok(value):
            raise TokenError(f"{where}: the token must be printable, without spaces")
        if any(t.value == value for t in found):
            raise TokenError(f"{where}: this token is listed twice")
        found.append(AgentToken(value, scope))  # type: ignore[arg-type]
    if not found:
        raise TokenError(f"--token-file={path}: must hold a token (printable, no spaces)")
    if len(found) > MAX_TOKENS:
        raise TokenError(f"--token-file={path}: holds {len(found)} tokens (at most {MAX_TOKENS})")
    return tuple(found)


def read_tokens(path: Path) -> tuple[AgentToken, ...]:
    """Every token an agent's token file holds, with its scope.

    Raises:
        TokenError: missing, not a regular file, too large, or a bad line (naming the file).
    """
    return parse_tokens(_text(path), path)


def read_token(path: Path) -> str:
    """The token a client sends: the file's one token, or its strongest (admin, then operate,
    then read) when it lists several.

    Raises:
        TokenError: missing, unreadable, too large, empty or a bad line.
    """
    tokens = read_tokens(path)
    return max(tokens, key=lambda t: SCOPES.index(t.scope)).value


def check_private(path: Path, tokens: tuple[AgentToken, ...]) -> None:
    """Refuse an agent's token file that another user could use: writable by group or others
    (they could add an admin token), owned by another user than this one or root, or readable
    by group or others while it holds an operate or admin token.

    Raises:
        TokenError: one line naming the file, its mode and what to run.
    """
    try:
        info = os.stat(path)
    except OSError as error:
        raise TokenError(f"--token-file={path}: cannot be read ({error.strerror})") from None
    mode = stat.S_IMODE(info.st_mode)
    fix = f"chmod 600 {path}"
    if info.st_uid not in (os.geteuid(), 0):
        raise TokenError(
            f"--token-file={path}: is owned by uid {info.st_uid}, not this user: its owner could "
            f"add a token (chown it, then {fix})"
        )
    if mode & 0o022:
        raise TokenError(
            f"--token-file={path}: is {mode:04o}, writable by other users: they could add an "
            f"admin token ({fix})"
        )
    strongest = max(tokens, key=lambda t: SCOPES.index(t.scope)).scope if tokens else "read"
    if mode & 0o044 and strongest != "read":
        raise TokenError(
            f"--token-file={path}: is {mode:04o}, readable by other users, and holds an "
            f"{strongest} token ({fix}, as ssh refuses a private key others can read)"
        )


def _new_line(scope: Scope) -> tuple[str, str]:
    token = secrets.token_urlsafe(TOKEN_BYTES)
    # An admin token is written bare: the file is then also a client's token file, as before.
    return token, (token if scope == "admin" else f"{scope} {token}") + "\n"


def load_or_create(path: Path, scope: Scope = "admin") -> tuple[AgentToken, ...]:
    """The tokens in ``path``; when the file is missing, one new token of ``scope`` is made
    (0600, ``secrets.token_urlsafe``).

    Raises:
        TokenError: the file exists but is unusable (``check_private`` included), or cannot be
            created.
    """
    if os.path.lexists(path):
        return _agent_tokens(path)
    try:
        make_dir(path.parent, 0o700)  # made private when made
        # O_EXCL: two agents starting at once never overwrite each other's token.
        fd = create_new(path)
    except FileExistsError:
        return _agent_tokens(path)
    except OSError as error:
        raise TokenError(
            f"--token-file={path}: cannot be created ({write_reason(error)})"
        ) from None
    try:
        write_all(fd, _new_line(scope)[1].encode())
    except OSError as error:
        os.unlink(path)  # ours (O_EXCL): a half token must not be read as one
        raise TokenError(
            f"--token-file={path}: cannot be written ({write_reason(error)})"
        ) from None
    finally:
        os.close(fd)
    return _agent_tokens(path)


def _agent_tokens(path: Path) -> tuple[AgentToken, ...]:
    tokens = read_tokens(path)
    check_private(path, tokens)
    return tokens


def add_token(path: Path, scope: Scope) -> str:
    """Append a new token of ``scope`` to the agent's token file (made 0600 if missing).

    Returns:
        The new token (give it to whoever should have that scope).

    Raises:
        TokenError: the file is unusable, or cannot be written.
    """
    existing = _text(path) if os.path.lexists(path) else ""
    if existing:
        # Never append to a file that is not a token file, nor a secret to one others can read.
        check_private(path, (*parse_tokens(existing, path), AgentToken("", scope)))
    token, line = _new_line(scope)
    if scope == "admin":
        line = f"admin {token}\n"  # explicit once the file holds more than one
    prefix = "\n" if existing and not existing.endswith("\n") else ""
    try:
        make_dir(path.parent, 0o700)
        fd = open_writable(path, append=True)
        try:
            append_record(fd, (prefix + line).encode())
        finally:
            os.close(fd)
    except OSError as error:
        raise TokenError(
            f"--token-file={path}: cannot be written ({write_reason(error)})"
        ) from None
    return token


def _bearer(presented: str | None) -> str | None:
    if presented is None:
        return None
    scheme, _, value = presented.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


def match(presented: str | None, tokens: tuple[AgentToken, ...]) -> AgentToken | None:
    """The token the ``Authorization`` header value ``presented`` carries, if the agent has it.

    Every token is compared (constant time each), whichever matches: the time taken does not
    tell which one, nor how much of one, was right.

    Args:
        presented: The header's value (``Bearer <token>``), or None when absent.
        tokens: The agent's tokens.

    Returns:
        The matching token (with its scope), or None.
    """
    value = _bearer(presented)
    given = (value if value is not None else "").encode()
    found: AgentToken | None = None
    for token in tokens:
        if hmac.compare_digest(given, token.value.encode()) and value is not None:
            found = token
    return found


def matches(presented: str | None, token: str) -> bool:
    """Whether the ``Authorization`` header value ``presented`` carries ``token``.

    Args:
        presented: The header's value (``Bearer <token>``), or None when absent.
        token: The token.

    Returns:
        True only for ``Bearer`` and the exact token, compared in constant time.
    """
    return match(presented, (AgentToken(token, "admin"),)) is not None
