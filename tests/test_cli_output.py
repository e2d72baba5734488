"""CLI narration is never wrapped: a long path printed on stderr stays whole when stderr is not a terminal."""
from __future__ import annotations

import subprocess
import sys


def test_long_paths_in_narration_are_never_wrapped(tmp_path):
    out = tmp_path / ("a-rather-long-directory-name-" * 4) / "run"
    proc = subprocess.run([sys.executable, "-m", "awm_engine.cli", "eval", "run", "--policy", "oracle", "--scenario",
                           "maple_library_lending", "--task", "0", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"run directory: {out.resolve()}" in proc.stderr.splitlines()
