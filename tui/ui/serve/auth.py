"""The served console's token: where it comes from, and the check on every request.

The token arrives once in the URL (``/?token=...``, the URL ``gpufleet serve`` prints); the
answer moves it into an HttpOnly, SameSite=Strict cookie and redirects to the same page without
it, so it leaves the address bar and the history. Every later request (the page, its scripts, the
websocket that drives the console) must carry the cookie or the token; tokens are compared in
constant time. A request from another origin (a page elsewhere opening our websocket with the
browser's cookie) is refused whatever it carries.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from tui.inputs import TOKEN_LIMIT, InputError, read_text

TOKEN_ENV = "GPUFLEET_SERVE_TOKEN"
"""Environment variable that gives the token (instead of a generated one)."""

MIN_TOKEN_CHARS = 16
"""A shorter token given by file or environment is refused: guessable."""

CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
)
"""The page loads nothing from anywhere else (textual-serve's page links a web font)."""


class TokenError(ValueError):
    """The token file or variable cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class Token:
    """The secret a browser must present, and where it came from."""

    value: str
    """The token itself."""
    generated: bool
    """True when made here (then printed once); False when read from a file or variable."""
    source: str
    """Where it came from, for the start message (never the token itself)."""


def load_token(token_file: Path | None, environ: Mapping[str, str] = os.environ) -> Token:
    """The token from ``token_file``, else ``$GPUFLEET_SERVE_TOKEN``, else a new random one.

    Args:
        token_file: A file whose first line is the token, or None.
        environ: The environment to read ``TOKEN_ENV`` from.

    Returns:
        The token.

    Raises:
        TokenError: the file cannot be read, or the token is shorter than ``MIN_TOKEN_CHARS``
            or holds whitespace.
    """
    if token_file is not None:
        try:
            # The one door: a FIFO or /dev/zero is refused at once, at most TOKEN_LIMIT read.
            lines = read_text(token_file, TOKEN_LIMIT, "a token file").splitlines()
        except FileNotFoundError as error:
            raise TokenError(
                f"--token-file: {str(token_file)!r} cannot be read ({error.strerror})"
            ) from None
        except InputError as error:
            raise TokenError(f"--token-file={error}") from None
        value, source = (lines[0].strip() if lines else ""), f"--token-file {token_file}"
        field = "--token-file"
    elif environ.get(TOKEN_ENV):
        value, source, field = environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}", TOKEN_ENV
    else:
        return Token(secrets.token_urlsafe(24), True, "generated")
    if len(value) < MIN_TOKEN_CHARS or any(ch.isspace() for ch in value):
        raise TokenError(
            f"{field}: the token must be at least {MIN_TOKEN_CHARS} characters without spaces"
        )
    return Token(value, False, source)


def token_matches(expected: str, given: str) -> bool:
    """Constant-time comparison (``hmac.compare_digest``) of two tokens."""
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


def cookie_name(port: int) -> str:
    """The cookie of the server on ``port`` (cookies ignore ports: two servers on one host)."""
    return f"gpufleet_token_{port}"


def token_gate(token: str, cookie: str) -> Middleware:
    """An aiohttp middleware that lets through only requests that carry ``token``.

    Args:
        token: The secret.
        cookie: The name of the cookie that carries it after the first page.

    Returns:
        The middleware: 401 without a token, 403 with a wrong one or from another origin.
    """

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            raise web.HTTPForbidden(text="gpufleet serve: requests from another origin refused\n")
        given = [v for v in (request.query.get("token"), request.cookies.get(cookie)) if v]
        if not given:
            raise web.HTTPUnauthorized(
                text="gpufleet serve: a token is required: open the URL gpufleet serve printed\n"
            )
        if not any(token_matches(token, value) for value in given):
            raise web.HTTPForbidden(text="gpufleet serve: wrong token\n")
        if "token" in request.query and request.method == "GET" and not _upgrade(request):
            query = [(key, value) for key, value in request.query.items() if key != "token"]
            moved = web.HTTPSeeOther(location=str(request.rel_url.with_query(query)))
            moved.set_cookie(cookie, token, httponly=True, samesite="Strict", path="/")
            moved.headers["Referrer-Policy"] = "no-referrer"
            raise moved
        response = await handler(request)
        if not response.prepared:  # the websocket's answer is already on its way
            response.headers["Content-Security-Policy"] = CSP
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["Cache-Control"] = "no-store"
        return response

    return check


def _upgrade(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"
