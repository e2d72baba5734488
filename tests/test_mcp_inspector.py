"""The official MCP Inspector CLI (``@modelcontextprotocol/inspector``, npm; ``make inspector`` installs the pinned
version into tools/inspector) lists the tools of ``awm env serve`` and calls one (issue 25)."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.test_mcp_serve import start_server

INSPECTOR = Path(__file__).resolve().parents[1] / "tools" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"

pytestmark = pytest.mark.skipif(not INSPECTOR.exists(), reason="the MCP Inspector is not installed (make inspector "
                                                                "needs npm)")


def inspector(url: str, *args: str) -> dict:
    out = subprocess.run([str(INSPECTOR), "--cli", url, "--transport", "http", *args], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_the_mcp_inspector_lists_and_calls_a_tool(tmp_path):
    port, out, proc = start_server(tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        tools = inspector(url, "--method", "tools/list")["tools"]
        assert "list_branches" in {t["name"] for t in tools}
        result = inspector(url, "--method", "tools/call", "--tool-name", "list_branches")
        assert result.get("isError") in (None, False)
        assert "Downtown Central Library" in result["content"][0]["text"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
