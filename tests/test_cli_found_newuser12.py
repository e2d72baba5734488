"""What new user 12 found running every verb as a user runs it, on data the authors did not write (one test per
finding; each failed before its fix)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from tests.conftest import AWM_REAL

ROOT = Path(__file__).resolve().parent.parent


def _awm_process(*argv: str) -> subprocess.Popen:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "awm_engine.cli", *argv], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(condition, what: str, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_ctrl_c_in_eval_run_says_interrupted_before_where_the_finished_rollouts_are(tmp_path):
    """SIGINT to a running `awm eval run`: it printed `: finished rollouts are in …/results.jsonl; continue with: …`
    — the message began with a bare colon, since an empty KeyboardInterrupt is truthy (`exc or 'interrupted'`)."""
    script = {"responses": [{"content": "All done.", "delay": 600}]}  # the model never answers before the Ctrl-C
    with FakeLLMServer(script) as llm:
        proc = _awm_process("eval", "run", "--policy", "llm", "--model", "scripted", "--base-url", llm.url,
                            "--scenario", "maple_library_lending", "--task", "3", "--out", str(tmp_path / "run"))
        try:
            _wait_for(lambda: llm.requests or proc.poll() is not None, "the rollout's first model request")
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, err
    assert "interrupted: finished rollouts are in" in err, err
    assert "\n: finished" not in "\n" + err, err
