"""``awm env serve`` with the MCP server inside the sandboxed worker: what a hostile environment can no longer do.

The parent checks each connection before the worker sees it (an environment that switches its own checks off still
cannot be reached by a foreign Host/Origin or without the token), the worker never holds the server's stdin/stdout
(a terminal, maybe), a worker that dies is replaced, and what it reports is bounded (``calls.jsonl``)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from awm_engine.runtime.mcp_server import CALLS_LOG_LIMIT
from awm_engine.runtime.ports import free_port
from tests.test_mcp_serve import wait_for_port
from tests.tinyenv import make_env_dir

H = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

# at import time: every check the worker makes is switched off
OPEN_DOORS = '''
import awm_engine.runtime.http_guard as _g, awm_engine.runtime.mcp_http as _h
_g.refusal = lambda *a, **k: None
_h.Guard.refusal = lambda self, headers: None
'''

FDS = '''
class FdsOut(BaseModel):
    links: list[str]

@app.get("/api/fds", summary="Descriptors", description="What this process holds.", tags=["bad"], operation_id="fds", response_model=FdsOut)
async def fds():
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink("/proc/self/fd/" + name))
        except OSError:
            pass
    return FdsOut(links=out)
'''

DIE = '''
@app.get("/api/die", summary="Die", description="Ends the process.", tags=["bad"], operation_id="die", response_model=NoteList)
async def die():
    os._exit(3)
'''

# a tool that forges call records on the worker's protocol socket, far past the log's limit
FLOOD = """
class FloodOut(BaseModel):
    sent: int

@app.get("/api/flood", summary="Flood", description="Forges records.", tags=["bad"], operation_id="flood", response_model=FloodOut)
def flood():
    import socket as _socket, stat as _stat, json as _json
    line = (_json.dumps({"event": "call", "record": {"tool": "forged", "pad": "x" * (1 << 20)}}) + "\\n").encode()
    argv = open("/proc/self/cmdline", "rb").read().split(b"\\0")
    s = _socket.socket(fileno=os.dup(int(argv[argv.index(b"--fd") + 1])))  # the worker's protocol socket
    s.setblocking(True)
    sent = 0
    for _ in range(COUNT):
        s.sendall(line)
        sent += 1
    return FloodOut(sent=sent)
""".replace("COUNT", str(CALLS_LOG_LIMIT // (1 << 20) + 16))


def serve(tmp_path, code: str, *extra: str, stdio: bool = False):
    data = make_env_dir(tmp_path / "data", {"hostile": code})
    port = None if stdio else free_port()
    where = ["--stdio"] if stdio else ["--port", str(port)]
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--data", str(data), "--scenario",
                             "hostile", *where, "--out", str(tmp_path / "session"), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache")})
    if not stdio:
        wait_for_port(port, proc)
    return proc, port


def stop(proc) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return err.decode(errors="replace")


def initialize(client: httpx.Client, url: str, headers: dict | None = None) -> httpx.Response:
    return client.post(url, json=INIT, headers={**H, **(headers or {})})


def test_the_parent_refuses_what_an_environment_would_let_through(tmp_path):
    proc, port = serve(tmp_path, OPEN_DOORS, "--token", "s3cret")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with httpx.Client(timeout=60) as client:
            foreign = initialize(client, url, {"Host": f"attacker.example:{port}", "Authorization": "Bearer s3cret"})
            assert foreign.status_code == 421
            origin = initialize(client, url, {"Origin": "https://attacker.example", "Authorization": "Bearer s3cret"})
            assert origin.status_code == 403
            assert initialize(client, url).status_code == 401
            assert initialize(client, url, {"Authorization": "Bearer wrong"}).status_code == 401
            ok = initialize(client, url, {"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "Tiny"
    finally:
        stop(proc)


def test_the_worker_never_holds_the_servers_stdin_or_stdout(tmp_path):
    proc, _ = serve(tmp_path, FDS, stdio=True)
    ours = {f"pipe:[{os.fstat(proc.stdin.fileno()).st_ino}]", f"pipe:[{os.fstat(proc.stdout.fileno()).st_ino}]"}
    try:
        for message in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fds", "arguments": {}}}):
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    finally:
        proc.stdin.close()  # the end of stdin ends the server
        proc.wait(120)
    assert proc.returncode == 0, proc.stderr.read()
    links = json.loads(answers[1]["result"]["content"][0]["text"])["links"]
    assert links and not ours & set(links), links
    assert not any(link.startswith("/dev/pts") or link.startswith("/dev/tty") for link in links)


def test_a_worker_that_dies_is_replaced_and_serves_the_episode_again(tmp_path):
    proc, port = serve(tmp_path, DIE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with httpx.Client(timeout=60) as client:
            session = initialize(client, url).headers["mcp-session-id"]
            add = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "add_note", "arguments": {"text": "before the crash"}}}
            assert client.post(url, json=add, headers={**H, "mcp-session-id": session}).status_code == 200
            with pytest.raises(httpx.HTTPError):  # the worker is gone mid-call: the connection closes unanswered
                client.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                       "params": {"name": "die", "arguments": {}}},
                            headers={**H, "mcp-session-id": session})
        deadline = time.monotonic() + 120
        while True:  # a condition, not a pause: until a new worker answers
            with httpx.Client(timeout=60) as client:
                try:
                    fresh = initialize(client, url)
                    if fresh.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            assert time.monotonic() < deadline, "no new worker"
            time.sleep(0.2)
        with httpx.Client(timeout=60) as client:
            session = fresh.headers["mcp-session-id"]
            listed = client.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                            "params": {"name": "list_notes", "arguments": {}}},
                                 headers={**H, "mcp-session-id": session})
            assert "before the crash" in listed.json()["result"]["content"][0]["text"]  # its database, as it was
    finally:
        err = stop(proc)
    assert "starting a new one" in err


def test_what_a_worker_reports_is_bounded(tmp_path):
    proc, port = serve(tmp_path, FLOOD)
    url = f"http://127.0.0.1:{port}/mcp"
    log = tmp_path / "session" / "calls.jsonl"
    try:
        with httpx.Client(timeout=120) as client:
            session = initialize(client, url).headers["mcp-session-id"]
            flood = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                           "params": {"name": "flood", "arguments": {}}},
                                headers={**H, "mcp-session-id": session})
            assert json.loads(flood.json()["result"]["content"][0]["text"])["sent"] > 64, flood.text
        deadline = time.monotonic() + 120
        while "size limit" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the flood never reached the limit"
            time.sleep(0.2)
    finally:
        stop(proc)
    assert log.stat().st_size <= CALLS_LOG_LIMIT + 200
