"""Loopback servers refuse DNS-rebinding Hosts and foreign Origins; env serve takes a bearer token and
refuses a busy port before printing a URL."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli.env_cmd import PORT_BUSY
from awm_engine.runtime.ports import free_port

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_scripted_llm_refuses_foreign_host_and_origin():
    with FakeLLMServer({"responses": [{"content": "ok"}]}) as llm:
        url = llm.url + "/chat/completions"
        assert httpx.post(url, json=BODY).status_code == 200
        assert httpx.post(url, json=BODY, headers={"Host": "evil.example"}).status_code == 421
        assert httpx.post(url, json=BODY, headers={"Host": f"evil.example:{llm.port}"}).status_code == 421
        assert httpx.post(url, json=BODY, headers={"Origin": "http://evil.example"}).status_code == 403
        assert httpx.post(url, json=BODY, headers={"Origin": f"http://localhost:{llm.port}"}).status_code == 200


@pytest.fixture
def served(tmp_path):
    port = free_port()
    env = {**os.environ, "AWM_SERVE_TOKEN": "s3cret-token"}
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario",
                             "maple_library_lending", "--port", str(port), "--out", str(tmp_path / "srv")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket() as s:
            if (tmp_path / "srv" / "session.json").exists() and s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    yield port
    proc.terminate()
    proc.wait(20)


def test_env_serve_guards_host_origin_and_token(served):
    url = f"http://127.0.0.1:{served}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    auth = {"Authorization": "Bearer s3cret-token"}
    assert httpx.post(url, json=init, headers=accept).status_code == 401
    assert httpx.post(url, json=init, headers={**accept, "Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(url, json=init, headers={**accept, **auth, "Host": "rebind.example"}).status_code == 421
    assert httpx.post(url, json=init, headers={**accept, **auth, "Origin": "http://evil.example"}).status_code == 403
    assert httpx.post(url, json=init, headers={**accept, **auth}).status_code == 200

    async def tools():
        from fastmcp import Client

        async with Client(url, auth="s3cret-token") as client:
            return await client.list_tools()

    assert len(asyncio.run(tools())) > 10
    env = {**os.environ}
    env.pop("AWM_SERVE_TOKEN", None)
    check = [sys.executable, "-m", "awm_engine.cli", "env", "check", "--url", url, "--json"]
    denied = subprocess.run(check, capture_output=True, text=True, timeout=60, env=env)
    assert denied.returncode == 1 and "--token" in denied.stderr  # says why
    allowed = subprocess.run([*check, "--token", "s3cret-token"], capture_output=True, text=True, timeout=60, env=env)
    assert allowed.returncode == 0 and len(json.loads(allowed.stdout)["tools"]) > 10


def test_env_serve_on_a_busy_port_exits_before_printing_a_url(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario",
                               "maple_library_lending", "--port", str(port), "--out", str(tmp_path / "srv")],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == PORT_BUSY == 3
    assert "already in use" in proc.stderr and "http://" not in proc.stderr + proc.stdout
    assert not (tmp_path / "srv").exists()  # nothing was created
