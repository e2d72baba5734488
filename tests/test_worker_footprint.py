"""What an environment worker loads besides the environment: nothing it never uses (each MB is paid per worker,
and per served environment; docs/serve-performance.md)."""
from __future__ import annotations

import subprocess
import sys

UNUSED_IN_A_WORKER = ("rich", "click", "pygments", "pandas", "textual", "openai", "mcp")


def test_a_worker_loads_no_command_line_or_client_library():
    probe = ("import sys, awm_engine.runtime.worker, httpx; "
             f"print(sorted(m for m in {UNUSED_IN_A_WORKER!r} if m in sys.modules)); "
             "print(callable(httpx.main))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]", out  # e.g. httpx's own command line pulls in click, rich and pygments (4 MB)
    assert out[1] == "True"  # httpx still imports whole: its command line is a stub that says what is missing


UNUSED_BEFORE_SERVING = ("h11", "rich.progress", "rich.table", "awm_engine.eval.runner", "awm_engine.eval.runs",
                         "awm_engine.agent", "openai", "mcp", "jsonschema", "fastapi", "sqlalchemy")


def test_the_serve_parent_imports_nothing_it_does_not_use_before_it_serves():
    """``awm env serve``'s own process: every module it imports is on its cold start's path (the module's load in
    the warm spare runs beside it, so the start itself is what is left)."""
    probe = ("import sys; from awm_engine.cli import build_parser; build_parser(['env', 'serve']); "
             "import awm_engine.cli.env_cmd, awm_engine.runtime.mcp_server, awm_engine.runtime.pool; "
             "from awm_engine.cli.common import input_errors; "
             f"print(sorted(m for m in {UNUSED_BEFORE_SERVING!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
