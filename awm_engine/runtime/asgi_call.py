"""Call an ASGI app in-process, encoding the request exactly as an ``httpx`` client would.

fastapi-mcp calls the FastAPI app through ``httpx.ASGITransport`` (base URL ``http://apiserver``,
``raise_app_exceptions=False``). This does the same without a client object, so it works from any
thread or event loop: httpx builds the URL (path, query encoding) and the JSON body; an exception
escaping the app after Starlette answered keeps that answer, and one before any answer gives 500.
Either way the exception is kept (``AsgiResponse.error``): Starlette's ``ServerErrorMiddleware`` sends
its ``Internal Server Error`` and re-raises, so the answer stays byte-identical and the traceback is known.

The requests almost every call makes (a path of plain characters, plain query values, no header parameters, a JSON
body or none) are encoded here directly, as httpx encodes them (``_plain_request``, pinned equal to httpx on a
generated corpus by ``tests/test_asgi_encoding.py``); any other request goes through ``httpx.Request`` itself. A
worker that only makes plain requests never imports httpx (5.7 MB of each served environment's memory, and
about 50 µs per call).
"""
from __future__ import annotations

import json
import re
import traceback
from dataclasses import dataclass
from typing import Any, NamedTuple

from awm_engine.runtime import indent_json
from awm_engine.runtime.protocol import TRACEBACK_LIMIT, clip

BASE_URL = "http://apiserver"
HOST = b"apiserver"
# what httpx leaves as it is: unreserved characters, in a path also "/", with no "." or ".." segment (httpx
# normalizes those away) and no "//" at its start (a network location to a URL parser)
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9\-_~/.]*")
_PLAIN_QUERY = re.compile(r"[A-Za-z0-9\-_~.]*")
_CONTENT_LENGTH_ZERO = ("POST", "PUT", "PATCH")  # httpx says Content-Length: 0 for these when there is no body


class EncodedRequest(NamedTuple):
    """What the ASGI scope is made of, as ``httpx.Request`` has it: the method, the URL's decoded path, its raw path
    and query, the header pairs (their names as httpx spells them) and the body."""
    method: str
    path: str
    raw_path: bytes
    query: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


@dataclass
class AsgiResponse:
    status: int
    body: bytes
    error: BaseException | None = None  # what the app raised while answering (an unhandled exception)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _plain_path(path: str) -> bool:
    return _PLAIN_PATH.fullmatch(path) is not None and not path.startswith("//") and \
        "/./" not in path + "/" and "/../" not in path + "/"


def _plain_value(value: Any) -> str | None:
    """A query value as httpx writes it, when that is the text itself (None: it would be encoded, or is a list)."""
    if isinstance(value, str):
        return value if _PLAIN_QUERY.fullmatch(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _plain_request(method: str, path: str, query: dict[str, Any], headers: dict[str, Any],
                   body: Any) -> EncodedRequest | None:
    """The request httpx would build, when it is plain enough to spell here (None: ask httpx)."""
    if headers or not _plain_path(path):
        return None
    pairs = []
    for key, value in (query or {}).items():
        text = _plain_value(value)
        if text is None or not isinstance(key, str) or not key or _PLAIN_QUERY.fullmatch(key) is None:
            return None
        pairs.append(f"{key}={text}")
    method = method.upper()
    raw = [(b"Host", HOST)]
    if body is not None:  # httpx's encode_json, the same call (and so the same errors: NaN, a lone surrogate)
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        raw += [(b"Content-Length", str(len(content)).encode()), (b"Content-Type", b"application/json")]
    else:
        content = b""
        if method in _CONTENT_LENGTH_ZERO:
            raw.append((b"Content-Length", b"0"))
    return EncodedRequest(method, path, path.encode("ascii"), "&".join(pairs).encode("ascii"), raw, content)


def _httpx_request(method: str, path: str, query: dict[str, Any], headers: dict[str, Any],
                   body: Any) -> EncodedRequest:
    import httpx  # only for requests ``_plain_request`` does not spell

    kwargs: dict[str, Any] = {"params": query or None, "headers": {k: str(v) for k, v in headers.items()}}
    if body is not None:
        kwargs["json"] = body
    request = httpx.Request(method.upper(), BASE_URL + path, **kwargs)
    url = request.url
    return EncodedRequest(request.method, url.path, url.raw_path.split(b"?")[0], url.query, list(request.headers.raw),
                          request.read())


def encode_request(method: str, path: str, query: dict[str, Any], headers: dict[str, Any],
                   body: Any) -> EncodedRequest:
    """The request fastapi-mcp's httpx client sends for a call (what it raises, for arguments none can carry)."""
    return _plain_request(method, path, query, headers, body) or _httpx_request(method, path, query, headers, body)


async def asgi_request(app: Any, request: EncodedRequest) -> AsgiResponse:
    body = request.body
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": "http", "path": request.path, "raw_path": request.raw_path, "query_string": request.query,
        "root_path": "", "headers": [(k.lower(), v) for k, v in request.headers],
        "client": ("127.0.0.1", 123), "server": ("apiserver", 80), "extensions": {},
    }
    sent_body = False
    status: int | None = None
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    try:
        await app(scope, receive, send)
    except Exception as exc:  # noqa: BLE001 - same as raise_app_exceptions=False
        if status is None:
            return AsgiResponse(500, b"", exc)
        return AsgiResponse(status, b"".join(chunks), exc)
    return AsgiResponse(status if status is not None else 500, b"".join(chunks))


def format_traceback(exc: BaseException, module_file: str | None = None) -> str:
    """``exc`` with its traceback (and its causes), from the first frame in ``module_file`` (the environment's
    code) when there is one: the framework frames above the handler say nothing about the bug."""
    tb = exc.__traceback__
    frame = tb
    while module_file and frame is not None and frame.tb_frame.f_code.co_filename != module_file:
        frame = frame.tb_next
    return clip("".join(traceback.format_exception(type(exc), exc, frame or tb)), TRACEBACK_LIMIT)


def response_text(response: AsgiResponse) -> str:
    """fastapi-mcp's rendering: JSON bodies as ``json.dumps(indent=2, ensure_ascii=False)``, else text."""
    try:
        value = json.loads(response.body)
    except ValueError:
        return response.text
    try:
        return indent_json.dumps(value)
    except Exception:  # noqa: BLE001 - json.dumps below gives the same text or its own error
        pass
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except ValueError:
        return response.text
