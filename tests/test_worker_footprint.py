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
