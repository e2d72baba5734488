"""MCP as the AWM reference's server speaks it, without an MCP framework: one episode's tools over JSON-RPC.

The reference serves an environment with fastapi-mcp 0.4.0 (``FastApiMCP(app).mount_http()``) on ``mcp`` 1.26.0:
a stateful streamable-HTTP transport in JSON-response mode in front of the low-level ``mcp`` server with two
handlers (``tools/list``, ``tools/call``). This module answers every message and HTTP request the way that stack
does — status codes, headers, JSON bodies byte for byte, its error texts and its quirks (an unknown method is
"Invalid request parameters", a request without a session gets a fresh session id in its error's headers, a
terminated session stays known as terminated) — as pinned by ``tests/data/reference_mcp_wire.json``, which was
recorded from the real reference server. It is the serving path of ``awm env serve`` (``mcp_http.py``, inside the
sandboxed worker): no middleware chain, no per-message models, no second HTTP hop.

Not reproduced word for word: the pydantic text of a message that is not JSON-RPC at all (a batch array, a missing
``jsonrpc``), which names the installed ``mcp`` package's model (code and status are the reference's).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # mcp 1.26.0
LATEST_VERSION = "2025-11-25"
DEFAULT_NEGOTIATED_VERSION = "2025-03-26"  # assumed when a request names none
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
JSON = "application/json"
SSE = "text/event-stream"
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
# requests the reference's ``mcp`` knows (a known method without a handler: "Method not found"; an unknown one, or
# known with parameters its model rejects: "Invalid request parameters"), with the parameters each requires
KNOWN_REQUESTS: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "ping": (), "initialize": (("protocolVersion", str), ("capabilities", dict), ("clientInfo", dict)),
    "completion/complete": (("ref", dict), ("argument", dict)), "logging/setLevel": (("level", str),),
    "prompts/get": (("name", str),), "prompts/list": (), "resources/list": (), "resources/templates/list": (),
    "resources/read": (("uri", str),), "resources/subscribe": (("uri", str),),
    "resources/unsubscribe": (("uri", str),), "tools/list": (), "tools/call": (("name", str),),
    "tasks/get": (("taskId", str),), "tasks/result": (("taskId", str),), "tasks/cancel": (("taskId", str),),
    "tasks/list": (),
}
LOG_LEVELS = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
MAX_SESSIONS = 10_000  # sessions kept at once (each request without a session id opens one)
PARAMS_REQUIRED = {"initialize", "completion/complete", "logging/setLevel", "prompts/get", "resources/read",
                   "resources/subscribe", "resources/unsubscribe", "tools/call", "tasks/get", "tasks/result",
                   "tasks/cancel"}

# a tool call: (name, arguments) -> {"text", "is_error", "meta" (None or _meta)}
CallFn = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def dumps(value: Any) -> bytes:
    """JSON as pydantic's ``model_dump_json`` writes it: compact, UTF-8 (no ASCII escapes)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def error_body(code: int, message: str, rid: Any = "server-error", data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or type(value) is int


def classify(raw: Any) -> str | None:
    """What a decoded message is for the reference's JSON-RPC model: request, notification, response, error, or None
    (not JSON-RPC)."""
    if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
        return None
    params_ok = raw.get("params") is None or isinstance(raw.get("params"), dict)
    if isinstance(raw.get("method"), str) and params_ok:
        return "request" if _is_id(raw.get("id")) else "notification"
    if _is_id(raw.get("id")) and isinstance(raw.get("result"), dict):
        return "response"
    err = raw.get("error")
    if _is_id(raw.get("id")) and isinstance(err, dict) and type(err.get("code")) is int and \
            isinstance(err.get("message"), str):
        return "error"
    return None


def validation_text(raw: Any) -> str:
    """The text of the reference's 400 for a message that is not JSON-RPC: pydantic's, for a root model named
    ``JSONRPCMessage`` over the installed ``mcp``'s four message models (as ``mcp`` 1.26.0 has it). Never taken by a
    real client; imported only then."""
    global _message_model
    try:
        if _message_model is None:
            from mcp import types
            from pydantic import RootModel

            union = types.JSONRPCRequest | types.JSONRPCNotification | types.JSONRPCResponse | types.JSONRPCError
            _message_model = type("JSONRPCMessage", (RootModel[union],), {"__module__": __name__})
        _message_model.model_validate(raw)
    except ImportError:
        return "Validation error: not a JSON-RPC 2.0 message"
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError is the expected one
        return f"Validation error: {exc}"
    return "Validation error: not a JSON-RPC 2.0 message"


_message_model: Any = None


def _params_valid(method: str, params: dict[str, Any] | None) -> bool:
    if params is None:
        return method not in PARAMS_REQUIRED
    for name, kind in KNOWN_REQUESTS[method]:
        if not isinstance(params.get(name), kind):
            return False
    if method == "initialize":
        info = params["clientInfo"]
        return isinstance(info.get("name"), str) and isinstance(info.get("version"), str)
    if method == "tools/call":
        return params.get("arguments") is None or isinstance(params.get("arguments"), dict)
    if method == "logging/setLevel":
        return params["level"] in LOG_LEVELS
    if method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "tasks/list"):
        return params.get("cursor") is None or isinstance(params.get("cursor"), str)
    return True


@dataclass
class Session:
    id: str
    terminated: bool = False
    listening: bool = False  # a GET stream is open on it
    closed: Any = None  # an asyncio.Event set when the session ends (lazily made)


@dataclass
class HttpReply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    # a GET stream: nothing is sent (the reference sends no byte, not even the status line, until an event, and it
    # has none to send); the connection stays open until this session ends or the client goes
    hold: Session | None = None


@dataclass
class WireServer:
    """One episode's MCP server: ``name`` (the reference names it after the app's title), its tools (name,
    description, inputSchema), and ``call`` that runs one tool call."""

    name: str
    tools: list[dict[str, Any]]
    call: CallFn
    version: str = "1.26.0"
    sessions: dict[str, Session] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._tools_result = {"tools": [{"name": t["name"], "description": t.get("description") or "",
                                         "inputSchema": t["inputSchema"]} for t in self.tools]}

    # -- JSON-RPC ---------------------------------------------------------------------------------------------

    async def request(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The answer to one request (``classify(raw) == "request"``)."""
        rid, method, params = raw["id"], raw["method"], raw.get("params")
        if method not in KNOWN_REQUESTS or not _params_valid(method, params):
            return error_body(INVALID_PARAMS, "Invalid request parameters", rid, "")
        if method == "initialize":
            asked = params["protocolVersion"]
            return {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": asked if asked in SUPPORTED_VERSIONS else LATEST_VERSION,
                "capabilities": {"experimental": {}, "tools": {"listChanged": False}},
                "serverInfo": {"name": self.name, "version": self.version}}}
        if method == "ping":
            return {"jsonrpc": "2.0", "id": rid, "result": {}}
        if method == "tools/list":
            return {"jsonrpc": "2.0", "id": rid, "result": self._tools_result}
        if method == "tools/call":
            answer = await self.call(params["name"], params.get("arguments") or {})
            result: dict[str, Any] = {"content": [{"type": "text", "text": answer["text"]}],
                                      "isError": bool(answer["is_error"])}
            if answer.get("meta"):
                result["_meta"] = answer["meta"]
            return {"jsonrpc": "2.0", "id": rid, "result": result}
        return error_body(METHOD_NOT_FOUND, "Method not found", rid)

    async def message(self, raw: Any) -> dict[str, Any] | None:
        """Any decoded message (stdio): the answer to a request, None for anything else."""
        kind = classify(raw)
        if kind == "request":
            return await self.request(raw)
        if kind is None:
            return error_body(INVALID_PARAMS, validation_text(raw), None)
        return None

    # -- streamable HTTP --------------------------------------------------------------------------------------

    def _json(self, status: int, body: dict[str, Any] | None, session: Session | None) -> HttpReply:
        headers = [("content-type", JSON)] + ([(SESSION_HEADER, session.id)] if session else [])
        return HttpReply(status, headers, dumps(body) if body is not None else b"")

    def _error(self, status: int, message: str, session: Session | None, code: int = INVALID_REQUEST) -> HttpReply:
        return self._json(status, error_body(code, message), session)

    async def http(self, method: str, path: str, headers: dict[str, str], body: bytes) -> HttpReply:
        """One HTTP request (``headers`` lower-cased) on the server's MCP path or elsewhere."""
        if path != "/mcp":
            if path == "/mcp/":  # Starlette's redirect to the path without the slash
                return HttpReply(307, [("location", "/mcp")])
            return HttpReply(404, [("content-type", JSON)], b'{"detail":"Not Found"}')
        if method not in ("GET", "POST", "DELETE"):
            return HttpReply(405, [("allow", "POST, DELETE, GET"), ("content-type", JSON)],
                             b'{"detail":"Method Not Allowed"}')
        asked = headers.get(SESSION_HEADER)
        if asked is not None and asked not in self.sessions:
            return self._error(404, "Session not found", None)
        # a request without a session id gets a session of its own, kept whatever the request was (as the reference
        # does; the oldest go beyond MAX_SESSIONS)
        session = self.sessions[asked] if asked is not None else self._new_session()
        if method == "POST" and not headers.get("content-type", "").lower().startswith(JSON):
            return HttpReply(400, [], b"Invalid Content-Type header")
        if session.terminated:
            return self._error(404, "Not Found: Session has been terminated", session)
        if method == "POST":
            return await self._post(session, asked, headers, body)
        if method == "GET":
            accepts = [m.strip() for m in headers.get("accept", "").split(",")]
            if not any(m.startswith(SSE) for m in accepts):
                return self._error(406, "Not Acceptable: Client must accept text/event-stream", session)
            invalid = self._invalid_headers(session, asked, headers)
            if invalid is not None:
                return invalid
            if session.listening:
                return self._error(409, "Conflict: Only one SSE stream is allowed per session", session)
            session.listening = True
            return HttpReply(200, [("cache-control", "no-cache, no-transform"), ("connection", "keep-alive"),
                                   ("content-type", SSE), (SESSION_HEADER, session.id)], hold=session)
        invalid = self._invalid_headers(session, asked, headers)  # DELETE
        if invalid is not None:
            return invalid
        self.end(session)
        return self._json(200, None, session)

    def _invalid_headers(self, session: Session, asked: str | None, headers: dict[str, str]) -> HttpReply | None:
        if asked is None:
            return self._error(400, "Bad Request: Missing session ID", session)
        version = headers.get(VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        if version not in SUPPORTED_VERSIONS:
            return self._error(400, f"Bad Request: Unsupported protocol version: {version}. Supported versions: "
                                    f"{', '.join(SUPPORTED_VERSIONS)}", session)
        return None

    async def _post(self, session: Session, asked: str | None, headers: dict[str, str], body: bytes) -> HttpReply:
        accepts = [m.strip() for m in headers.get("accept", "").split(",")]
        if not any(m.startswith(JSON) for m in accepts):
            return self._error(406, "Not Acceptable: Client must accept application/json", session)
        try:
            raw = json.loads(body)
        except ValueError as exc:  # json.JSONDecodeError, or bytes that are not UTF-8
            return self._error(400, f"Parse error: {exc}", session, PARSE_ERROR)
        kind = classify(raw)
        if kind is None:
            return self._error(400, validation_text(raw), session, INVALID_PARAMS)
        initialize = kind == "request" and raw["method"] == "initialize"
        if not initialize:
            invalid = self._invalid_headers(session, asked, headers)
            if invalid is not None:
                return invalid
        if kind != "request":
            return self._json(202, None, session)
        return self._json(200, await self.request(raw), session)

    def _new_session(self) -> Session:
        session = Session(uuid.uuid4().hex)
        self.sessions[session.id] = session
        while len(self.sessions) > MAX_SESSIONS:
            self.end(self.sessions.pop(next(iter(self.sessions))))
        return session

    def end(self, session: Session) -> None:
        session.terminated = True
        if session.closed is not None:
            session.closed.set()

    def end_all(self) -> None:
        for session in self.sessions.values():
            self.end(session)
