"""The shipped demo (scripts/scripted_model_demo.py) does what the README says: the scripted model solves a sample
task live, in meta and in native mode, and the scripted server's output goes to a log, not the terminal."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from awm_engine.runtime.ports import free_port

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("mode", ["meta", "native"])
def test_the_scripted_model_solves_a_sample_task_live(mode, tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "scripted_model_demo.py"), "--mode", mode,
                           "--port", str(free_port())], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "label: complete" in done.stdout and "reward: 1.0" in done.stdout
    assert (tmp_path / "runs" / f"scripted-{mode}" / "trajectory.json").is_file()
    assert (tmp_path / "fake-llm.log").is_file()
    assert "Uvicorn running" not in done.stdout + done.stderr  # the server's output is in the log only
