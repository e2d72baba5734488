"""A battery of raw MCP-over-HTTP exchanges, to compare ``awm env serve`` with the AWM reference's server byte for byte.

``run(url)`` sends each request of ``BATTERY`` (on one maple_library_lending episode: tools ``list_branches`` and
``get_event``) and returns, per exchange, its status, the headers an MCP client reads (content type, session id —
normalized —, allow, location) and the body as text. ``scripts/capture_reference_mcp_wire.py`` ran it against the
reference (the environment's FastAPI app with fastapi-mcp 0.4.0, mcp 1.26.0, uvicorn) to write
``tests/data/reference_mcp_wire.json``; ``tests/test_mcp_wire.py`` runs it against ``awm env serve``.
"""
from __future__ import annotations

import json
from typing import Any

import httpx

H = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
KEPT_HEADERS = ("content-type", "mcp-session-id", "allow", "location", "cache-control")
# exchanges whose body text names the installed pydantic/mcp models: compared by status, code and first line only
MODEL_TEXT = ("batch", "no jsonrpc field")


def _call(rid: Any, name: str, arguments: Any = None, with_args: bool = True) -> dict:
    params: dict = {"name": name}
    if with_args:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def record(name: str, r: httpx.Response) -> dict[str, Any]:
    headers = {k: ("<session>" if k == "mcp-session-id" else r.headers[k]) for k in KEPT_HEADERS if k in r.headers}
    return {"name": name, "status": r.status_code, "headers": headers, "body": r.text}


def run(url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def post(c: httpx.Client, name: str, body: Any, session: str | None = None, headers: dict | None = None,
             raw: bytes | None = None, version: str | None = "2025-06-18") -> httpx.Response:
        h = dict(H)
        if session:
            h["mcp-session-id"] = session
            if version:
                h["mcp-protocol-version"] = version
        h.update(headers or {})
        r = c.post(url, content=raw if raw is not None else json.dumps(body), headers=h)
        out.append(record(name, r))
        return r

    with httpx.Client(timeout=60, follow_redirects=False) as c:
        s = post(c, "initialize", INIT).headers.get("mcp-session-id")
        post(c, "tools/list before initialized", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, s)
        post(c, "initialized", {"jsonrpc": "2.0", "method": "notifications/initialized"}, s)
        post(c, "tools/list", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, s)
        post(c, "call ok", _call(4, "list_branches", {}), s)
        post(c, "call ok with an argument", _call(5, "list_branches", {"name": "Central"}), s)
        post(c, "call ok string id", _call("abc", "list_branches", {}), s)
        post(c, "call 500", _call(6, "get_event", {"event_id": 99999}), s)
        post(c, "call unknown tool", _call(7, "no_such_tool", {}), s)
        post(c, "call argument of a wrong type", _call(8, "get_event", {"event_id": "x"}), s)
        post(c, "call missing a required argument", _call(9, "get_event", {}), s)
        post(c, "call without arguments", _call(10, "list_branches", with_args=False), s)
        post(c, "call with arguments null", _call(11, "list_branches", None), s)
        post(c, "call without params", {"jsonrpc": "2.0", "id": 12, "method": "tools/call"}, s)
        post(c, "call with a non-string name", {"jsonrpc": "2.0", "id": 13, "method": "tools/call",
                                                "params": {"name": 5}}, s)
        post(c, "ping", {"jsonrpc": "2.0", "id": 14, "method": "ping"}, s)
        post(c, "unknown method", {"jsonrpc": "2.0", "id": 15, "method": "foo/bar"}, s)
        post(c, "resources/list", {"jsonrpc": "2.0", "id": 16, "method": "resources/list"}, s)
        post(c, "prompts/list", {"jsonrpc": "2.0", "id": 17, "method": "prompts/list"}, s)
        post(c, "logging/setLevel", {"jsonrpc": "2.0", "id": 18, "method": "logging/setLevel",
                                     "params": {"level": "info"}}, s)
        post(c, "logging/setLevel with a bad level", {"jsonrpc": "2.0", "id": 19, "method": "logging/setLevel",
                                                      "params": {"level": "loud"}}, s)
        post(c, "malformed json", None, s, raw=b"{not json")
        post(c, "batch", [{"jsonrpc": "2.0", "id": 20, "method": "ping"}], s)
        post(c, "no jsonrpc field", {"id": 21, "method": "ping"}, s)
        post(c, "id null", {"jsonrpc": "2.0", "id": None, "method": "ping"}, s)
        post(c, "unknown notification", {"jsonrpc": "2.0", "method": "notifications/whatever"}, s)
        post(c, "response message", {"jsonrpc": "2.0", "id": 99, "result": {}}, s)
        post(c, "no session", {"jsonrpc": "2.0", "id": 22, "method": "ping"})
        post(c, "unknown session", {"jsonrpc": "2.0", "id": 23, "method": "ping"}, "deadbeef")
        post(c, "unsupported protocol version header", {"jsonrpc": "2.0", "id": 24, "method": "ping"}, s,
             version="1999-01-01")
        post(c, "no protocol version header", {"jsonrpc": "2.0", "id": 25, "method": "ping"}, s, version=None)
        post(c, "accept json only", {"jsonrpc": "2.0", "id": 26, "method": "ping"}, s,
             headers={"Accept": "application/json"})
        post(c, "accept sse only", {"jsonrpc": "2.0", "id": 27, "method": "ping"}, s,
             headers={"Accept": "text/event-stream"})
        post(c, "accept anything", {"jsonrpc": "2.0", "id": 28, "method": "ping"}, s, headers={"Accept": "*/*"})
        post(c, "content-type text", {"jsonrpc": "2.0", "id": 29, "method": "ping"}, s,
             headers={"Content-Type": "text/plain"})
        post(c, "initialize with an unknown version",
             {**INIT, "params": {**INIT["params"], "protocolVersion": "1999-01-01"}})
        post(c, "initialize 2024-11-05", {**INIT, "params": {**INIT["params"], "protocolVersion": "2024-11-05"}})
        post(c, "initialize without clientInfo",
             {**INIT, "params": {"protocolVersion": "2025-06-18", "capabilities": {}}})
        post(c, "initialize again in the session", INIT, s)
        out.append(record("GET accepting json", c.get(url, headers={"Accept": "application/json",
                                                                    "mcp-session-id": s})))
        out.append(record("GET without a session", c.get(url, headers={"Accept": "text/event-stream"})))
        try:  # the reference sends nothing on a GET stream: not even the status line
            with c.stream("GET", url, headers={"Accept": "text/event-stream", "mcp-session-id": s},
                          timeout=httpx.Timeout(10, read=1.0)) as g:
                out.append({"name": "GET stream", "status": g.status_code, "headers": {}, "body": ""})
        except httpx.ReadTimeout:
            out.append({"name": "GET stream", "status": None, "headers": {}, "body": "no answer within 1 s"})
        out.append(record("PUT", c.request("PUT", url, headers=H)))
        out.append(record("DELETE", c.delete(url, headers={"mcp-session-id": s})))
        post(c, "after DELETE", {"jsonrpc": "2.0", "id": 30, "method": "ping"}, s)
        out.append(record("trailing slash", c.post(url + "/", content=json.dumps(INIT), headers=H)))
        out.append(record("another path", c.post(url.replace("/mcp", "/nowhere"), content=json.dumps(INIT),
                                                 headers=H)))
    return out


def comparable(exchange: dict[str, Any]) -> dict[str, Any]:
    """What must be equal: everything, except the model-named text of ``MODEL_TEXT`` (its first line), the
    redirect's absolute location (Starlette's is absolute) and the order of ``allow`` (Starlette's comes from a set)."""
    e = dict(exchange)
    if "allow" in e["headers"]:
        e["headers"] = {**e["headers"], "allow": sorted(m.strip() for m in e["headers"]["allow"].split(","))}
    if e["name"] in MODEL_TEXT:
        body = json.loads(e["body"])
        body["error"]["message"] = body["error"]["message"].split("\n")[0].split(" for ")[0]
        e["body"] = body
    if "location" in e["headers"]:
        e["headers"] = {**e["headers"], "location": e["headers"]["location"].rsplit("/", 1)[-1]}
    return e
