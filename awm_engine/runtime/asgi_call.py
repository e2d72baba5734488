"""Call an ASGI app in-process, encoding the request exactly as an ``httpx`` client would.

fastapi-mcp calls the FastAPI app through ``httpx.ASGITransport`` (base URL ``http://apiserver``,
``raise_app_exceptions=False``). This does the same without a client object, so it works from any
thread or event loop: httpx builds the URL (path, query encoding) and the JSON body; an exception
escaping the app after Starlette answered keeps that answer, and one before any answer gives 500.
Either way the exception is kept (``AsgiResponse.error``): Starlette's ``ServerErrorMiddleware`` sends
its ``Internal Server Error`` and re-raises, so the answer stays byte-identical and the traceback is known.
"""
from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any

import httpx

from awm_engine.runtime.protocol import TRACEBACK_LIMIT, clip

BASE_URL = "http://apiserver"


@dataclass
class AsgiResponse:
    status: int
    body: bytes
    error: BaseException | None = None  # what the app raised while answering (an unhandled exception)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def encode_request(method: str, path: str, query: dict[str, Any], headers: dict[str, Any],
                   body: Any) -> httpx.Request:
    kwargs: dict[str, Any] = {"params": query or None, "headers": {k: str(v) for k, v in headers.items()}}
    if body is not None:
        kwargs["json"] = body
    return httpx.Request(method.upper(), BASE_URL + path, **kwargs)


async def asgi_request(app: Any, request: httpx.Request) -> AsgiResponse:
    body = request.read()
    url = request.url
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": "http", "path": url.path, "raw_path": url.raw_path.split(b"?")[0], "query_string": url.query,
        "root_path": "", "headers": [(k.lower(), v) for k, v in request.headers.raw],
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
        return json.dumps(json.loads(response.body), indent=2, ensure_ascii=False)
    except ValueError:
        return response.text
