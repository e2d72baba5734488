"""What any MCP client sees of ``awm env serve`` equals what the AWM reference's server (the environment's FastAPI
app with fastapi-mcp 0.4.0's ``FastApiMCP(app).mount_http()``) sends (issue 25): plain JSON responses, the server
named after the app's title with the reference's mcp version and no instructions, tools with name, description and
input schema only, results with content and isError only — no traceback, no local path. The traceback goes to
``calls.jsonl``; awm's own client (``AWM_SERVE_EXTRAS=1``) still gets it in ``_meta``."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest

from awm_engine.runtime.mcp_server import FASTAPI_DEFAULT_TITLE, app_title
from awm_engine.runtime.ports import free_port
from tests.test_mcp_serve import SCENARIO, wait_for_port

AWM = [sys.executable, "-m", "awm_engine.cli"]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def serve(tmp_path, extras: bool):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "AWM_SERVE_EXTRAS"}
    if extras:
        env["AWM_SERVE_EXTRAS"] = "1"
    env["AWM_CACHE_DIR"] = str(tmp_path / "cache")
    out = tmp_path / f"session-{extras}"
    proc = subprocess.Popen(AWM + ["env", "serve", "--scenario", SCENARIO, "--port", str(port), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_for_port(port, proc)
    return port, out, proc


def rpc(client: httpx.Client, url: str, session: str | None, method: str, params: dict | None = None,
        rid: int | None = 1) -> httpx.Response:
    body = {"jsonrpc": "2.0", "method": method, **({"id": rid} if rid is not None else {}),
            **({"params": params} if params is not None else {})}
    headers = {**HEADERS, **({"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"} if session else {})}
    return client.post(url, json=body, headers=headers)


def talk(port: int) -> dict:
    url = f"http://127.0.0.1:{port}/mcp"
    with httpx.Client(timeout=60) as client:
        init = rpc(client, url, None, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                     "clientInfo": {"name": "test", "version": "1"}})
        session = init.headers["mcp-session-id"]
        rpc(client, url, session, "notifications/initialized", rid=None)
        tools = rpc(client, url, session, "tools/list", rid=2)
        error = rpc(client, url, session, "tools/call", {"name": "get_event", "arguments": {"event_id": 99999}}, 3)
        return {"init": init, "tools": tools, "error": error}


@pytest.mark.parametrize("extras", [False, True])
def test_an_mcp_client_sees_what_the_reference_server_sends(tmp_path, extras):
    port, out, proc = serve(tmp_path, extras)
    try:
        seen = talk(port)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    for response in seen.values():
        assert response.headers["content-type"] == "application/json"  # plain JSON, not SSE
    info = seen["init"].json()["result"]
    assert info["serverInfo"] == {"name": "Maple Library Lending API", "version": "1.26.0"}
    assert "instructions" not in info
    for tool in seen["tools"].json()["result"]["tools"]:
        assert set(tool) == {"name", "description", "inputSchema"}, tool
    result = seen["error"].json()["result"]
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "Error calling get_event. Status code: 500. "
                                                          "Response: Internal Server Error"}]
    raw = seen["error"].text
    if extras:  # awm's own client: the error's kind, status and traceback in _meta, never in the text
        assert "Traceback" in result["_meta"]["awm"]["traceback"]
    else:
        assert set(result) == {"content", "isError"}
        for leak in ("Traceback", "site-packages", str(out), os.getcwd(), sys.prefix):
            assert leak not in raw
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert "Traceback" in calls[-1]["traceback"]  # kept for awm's front ends and the user


def test_app_title_is_read_from_the_source_never_run():
    assert app_title('from fastapi import FastAPI\napp = FastAPI(title="Shop (Simulated)", version="1")') == \
        "Shop (Simulated)"
    assert app_title("import fastapi\napp = fastapi.FastAPI(title='X')") == "X"
    assert app_title("app = FastAPI()") == FASTAPI_DEFAULT_TITLE
    assert app_title("app = FastAPI(title=NAME)") == FASTAPI_DEFAULT_TITLE
    assert app_title("def broken(:") == FASTAPI_DEFAULT_TITLE
    assert app_title("x = (" * 200 + ")" * 200) == FASTAPI_DEFAULT_TITLE  # too deep to parse: the default
