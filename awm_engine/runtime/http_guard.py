"""An ASGI guard for the HTTP servers awm runs on loopback (MCP environments, the scripted LLM).

A web page can reach a loopback server through DNS rebinding (its own host name resolving to 127.0.0.1)
or a cross-origin request; the guard answers 421 to any ``Host`` that is not a loopback name of this
server, 403 to any ``Origin`` that is not this server's own (and to a browser's request that its
``Sec-Fetch-Site`` says comes from another site: a cross-site GET carries no ``Origin``), and — when a token is
set — 401 to a request without ``Authorization: Bearer <token>``.
"""
from __future__ import annotations

from _operator import _compare_digest as compare_digest  # hmac's, without hmac's imports (built-in modules only:
# ``runtime/lean_front.py`` loads this file)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(port: int) -> set[str]:
    return {f"{name}:{port}" for name in LOOPBACK_NAMES} | set(LOOPBACK_NAMES)


def allowed_origins(port: int) -> set[str]:
    return {f"{scheme}://{name}:{port}" for scheme in ("http", "https") for name in LOOPBACK_NAMES}


class LoopbackGuard:
    def __init__(self, app, port: int, token: str | None = None):  # app: an ASGI application
        self.app = app
        self.port = port
        self.token = token
        self.hosts = allowed_hosts(port)
        self.origins = allowed_origins(port)

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        refused = refusal(headers, self.hosts, self.origins, self.token)
        if refused is not None:
            await _reply(send, *refused)
            return
        await self.app(scope, receive, send)


def refusal(headers: dict[str, str], hosts: set[str], origins: set[str],
            token: str | None) -> tuple[int, str, dict[str, str]] | None:
    """Why a request with these (lower-cased) headers is refused — status, text, extra headers — or None."""
    if headers.get("host", "").lower() not in hosts:
        return 421, "Misdirected Request: this server answers only to its loopback address", {}
    origin = headers.get("origin")
    if origin is not None and origin.lower() not in origins:
        return 403, "Forbidden Origin", {}
    # a browser leaves Origin out of a plain cross-site GET (an <img>, a no-cors fetch) but says where it comes from
    # in Sec-Fetch-Site, which no page can set: only this server's own pages and the user's own navigation pass
    if headers.get("sec-fetch-site", "same-origin").lower() not in ("same-origin", "none"):
        return 403, "Forbidden: a cross-site request", {}
    if token is not None:
        given = headers.get("authorization", "")
        if not compare_digest(given.encode(), f"Bearer {token}".encode()):
            return 401, "Unauthorized: a bearer token is required", {"www-authenticate": "Bearer"}
    return None


async def _reply(send, status: int, text: str, extra: dict[str, str] | None = None) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
