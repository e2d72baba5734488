"""Nothing of awm stays in the temporary directory: not after a sandbox refusal, not after SIGTERM (the verb cleans up
as after Ctrl-C), and what a SIGKILLed awm process left (its pool and view directories, its workers' quota mounts)
goes at the next pool start. Every wait here is on a condition (a file appearing, the process exiting), never on a
fixed time."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCENARIO = "maple_library_lending"  # of the bundled sample_envs


def awm(*argv: str) -> list[str]:
    return [sys.executable, "-m", "awm_engine.cli", *argv]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("AWM_UNSAFE_NO_SANDBOX", "AWM_SANDBOX")}
    return {**env, "TMPDIR": str(tmpdir), "AWM_CACHE_DIR": str(tmp_path / "cache"), **extra}


def wait_for(condition, proc: subprocess.Popen, what: str, deadline: float = 180.0):
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        found = condition()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode} before {what}: {proc.stderr.read()}")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"never {what}")


@pytest.mark.parametrize("verb", [["env", "call", SCENARIO, "list_books"], ["env", "test", "--scenario", SCENARIO],
                                  ["env", "doctor", SCENARIO]], ids=["call", "test", "doctor"])
def test_a_sandbox_refusal_leaves_nothing_in_the_temporary_directory(tmp_path, verb):
    env = clean_env(tmp_path, AWM_SANDBOX="off-namespaces")
    done = subprocess.run(awm(*verb), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stderr
    assert "untrusted code was not run" in done.stderr
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []
