"""``awm env serve`` answers every exchange of the probe battery exactly as the AWM reference's server does (status,
the headers an MCP client reads, the body byte for byte), as recorded from the real reference server (fastapi-mcp
0.4.0 on mcp 1.26.0) in tests/data/reference_mcp_wire.json by scripts/capture_reference_mcp_wire.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from awm_engine.runtime.ports import free_port
from tests import mcp_wire_probe
from tests.test_mcp_serve import wait_for_port

FIXTURE = Path(__file__).parent / "data" / "reference_mcp_wire.json"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wire")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "AWM_SERVE_EXTRAS"}
    env["AWM_CACHE_DIR"] = str(tmp / "cache")
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario",
                             json.loads(FIXTURE.read_text())["scenario"], "--port", str(port), "--out",
                             str(tmp / "session")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for_port(port, proc)
        yield mcp_wire_probe.run(f"http://127.0.0.1:{port}/mcp"), tmp / "session"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


def test_every_exchange_equals_the_reference_servers(served):
    seen, _ = served
    reference = json.loads(FIXTURE.read_text())["exchanges"]
    assert [e["name"] for e in seen] == [e["name"] for e in reference]
    for ours, theirs in zip(seen, reference):
        assert mcp_wire_probe.comparable(ours) == mcp_wire_probe.comparable(theirs), ours["name"]


def test_the_battery_covers_what_a_client_sees(served):
    """The fixture is not trivially equal: calls answer the environment's JSON, errors say why, sessions matter."""
    reference = {e["name"]: e for e in json.loads(FIXTURE.read_text())["exchanges"]}
    assert '"branches"' in json.loads(reference["call ok"]["body"])["result"]["content"][0]["text"]
    assert reference["unknown session"]["status"] == 404
    assert reference["GET stream"]["status"] is None  # the reference never answers a GET stream
    seen, session = served
    calls = [json.loads(line) for line in (session / "calls.jsonl").read_text().splitlines()]
    assert [c["tool"] for c in calls[:2]] == ["list_branches", "list_branches"]
    assert any(c["status"] == 500 and "Traceback" in c["traceback"] for c in calls)


def test_the_worker_reads_plain_heads_itself_and_hands_the_rest_to_h11():
    from awm_engine.runtime.mcp_http import parse_head

    method, target, version, headers = parse_head(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8001\r\n"
                                                  b"Content-Length: 2\r\nAccept: a\r\nAccept: b")
    assert (method, target, version) == ("POST", "/mcp", "HTTP/1.1")
    assert headers == {"host": "127.0.0.1:8001", "content-length": "2", "accept": "a, b"}
    for bad in (b"POST /mcp HTTP/2\r\nHost: x",                      # not HTTP/1.x
                b"POST  /mcp HTTP/1.1\r\nHost: x",                   # two spaces
                b"POST /mcp HTTP/1.1\r\nHost: x\r\n folded",         # obsolete line folding
                b"POST /mcp HTTP/1.1\r\nHost: x\r\nHost: y",         # two hosts
                b"POST /mcp HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1",
                b"POST /mcp HTTP/1.1\r\nBad Name: x",                # a space in a name
                b"POST /mcp HTTP/1.1\r\nX: a\x00b"):                 # a control character
        assert parse_head(bad) is None, bad


def test_a_chunked_request_and_a_malformed_one_get_h11s_answers(served):
    import socket as socket_module

    _, session = served
    port = json.loads((session / "session.json").read_text())["url"].rsplit(":", 1)[1].split("/")[0]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n").encode()

    def exchange(data: bytes) -> bytes:
        with socket_module.create_connection(("127.0.0.1", int(port)), timeout=30) as sock:
            sock.sendall(data)
            sock.shutdown(socket_module.SHUT_WR)
            out = b""
            while chunk := sock.recv(65536):
                out += chunk
            return out

    chunked = exchange(head + b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n".encode() + body +
                       b"\r\n0\r\n\r\n")
    assert chunked.startswith(b"HTTP/1.1 200 ") and b'"serverInfo"' in chunked
    # the parent checks a connection's first request; a malformed second one reaches the worker, whose h11 says 400
    plain = head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    both = exchange(plain + f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX: 1\r\n folded\r\n\r\n".encode())
    first, second = both.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"200 ") and second.startswith(b"400 ")
