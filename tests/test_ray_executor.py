"""The ray executor: environment workers as Ray actors on a local Ray instance give the same results as the
local executor on the same scripted rollouts, stream into the same run directory and resume the same way."""
from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'awm[ray]'; make test installs it)")

from awm_engine.cli import main as awm  # noqa: E402


def records(run_dir):
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {r["id"]: (r["status"], r.get("label"), r.get("reward"), r.get("stop_reason"), r.get("turns"), r.get("error"))
            for r in rows}


def test_ray_results_equal_local_results_and_resume(tmp_path, capsys):
    common = ["eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--scenario",
              "pinecrest_online_store", "--task", "0", "--task", "3", "-k", "2", "--quiet"]
    assert awm([*common, "--out", str(tmp_path / "local")]) == 0
    assert awm([*common, "--executor", "ray", "--workers", "2", "--out", str(tmp_path / "ray")]) == 0
    capsys.readouterr()
    local, remote = records(tmp_path / "local"), records(tmp_path / "ray")
    assert len(local) == 8 and local == remote
    assert all(v[0] == "ok" and v[2] == 1.0 for v in remote.values())
    one = tmp_path / "ray" / "rollouts" / "maple_library_lending" / "3_1"
    assert (one / "final.db").is_file() and (one / "verify.json").is_file()  # databases came back
    config = json.loads((tmp_path / "ray" / "config.json").read_text())
    assert config["executor"] == "ray"
    # resume: drop two lines, the ray executor reruns exactly those
    lines = (tmp_path / "ray" / "results.jsonl").read_text().splitlines()
    (tmp_path / "ray" / "results.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    assert awm(["eval", "run", "--resume", str(tmp_path / "ray"), "--quiet"]) == 0
    assert records(tmp_path / "ray") == local
