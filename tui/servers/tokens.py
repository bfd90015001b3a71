"""The agent's bearer token: one secret in a 0600 file, made on the agent's first start.

The agent reads it to check every request; the console and the pipeline read the same file (or a
copy) to send it. Comparison is constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

TOKEN_BYTES = 32
"""Entropy of a new token (``secrets.token_urlsafe``: 43 URL-safe characters)."""
MAX_TOKEN_FILE_BYTES = 4096
"""A token file larger than this is not a token file."""


class TokenError(ValueError):
    """The token file cannot be read, made or used (the message names the file)."""


def read_token(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace removed).

    Raises:
        TokenError: missing, unreadable, too large, empty or not one printable word.
    """
    try:
        if not path.is_file():
            raise TokenError(f"--token-file={path}: not a file")
        if path.stat().st_size > MAX_TOKEN_FILE_BYTES:
            raise TokenError(f"--token-file={path}: larger than {MAX_TOKEN_FILE_BYTES} bytes")
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise TokenError(f"--token-file={path}: cannot be read ({error})") from None
    if not token or not token.isprintable() or any(c.isspace() for c in token):
        raise TokenError(f"--token-file={path}: must hold one token (printable, no spaces)")
    return token


def load_or_create(path: Path) -> str:
    """The token in ``path``; made (0600, ``secrets.token_urlsafe``) when the file is missing.

    Raises:
        TokenError: the file exists but is unusable, or cannot be created.
    """
    if path.exists():
        return read_token(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two agents starting at once never overwrite each other's token.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_token(path)
    except OSError as error:
        raise TokenError(f"--token-file={path}: cannot be created ({error})") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_urlsafe(TOKEN_BYTES) + "\n")
    return read_token(path)


def matches(presented: str | None, token: str) -> bool:
    """Whether the ``Authorization`` header value ``presented`` carries ``token``.

    Args:
        presented: The header's value (``Bearer <token>``), or None when absent.
        token: The agent's token.

    Returns:
        True only for ``Bearer`` and the exact token, compared in constant time.
    """
    if presented is None:
        return False
    scheme, _, value = presented.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())
