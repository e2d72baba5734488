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
