"""The exports' ``tools`` column is what the endpoint received, recorded at run time (``awm.endpoint_tools`` in
``trajectory.json``): an export after the environment's data moved or changed still gives those schemas."""
from __future__ import annotations

import json
import shutil

from awm_engine.cli import main as awm
from awm_engine.data.paths import sample_envs_dir
from awm_engine.train.export import read_records

SCENARIO = "maple_library_lending"


def test_the_tools_column_is_what_the_run_recorded_even_after_the_data_moved(tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(sample_envs_dir(), data)
    run = tmp_path / "run"
    assert awm(["eval", "run", "--data", str(data), "--policy", "oracle", "--scenario", SCENARIO, "--task", "0",
                "-k", "1", "--mode", "native", "--workers", "1", "--quiet", "--out", str(run)]) == 0
    (trajectory,) = run.rglob("trajectory.json")
    recorded = json.loads(trajectory.read_text())["awm"]["endpoint_tools"]
    assert recorded and all(t["type"] == "function" for t in recorded)
    # the data is gone (moved, or changed: either way not what the endpoint received)
    shutil.move(str(data), str(tmp_path / "elsewhere"))
    assert awm(["train", "export", str(run), "--out", str(tmp_path / "s.jsonl")]) == 0
    rows = read_records(tmp_path / "s.jsonl")
    assert rows and all(r["tools"] == recorded for r in rows)
    # meta mode records none: its requests carried no tools
    meta = tmp_path / "meta"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", SCENARIO, "--task", "0", "-k", "1",
                "--workers", "1", "--quiet", "--out", str(meta)]) == 0
    (trajectory,) = meta.rglob("trajectory.json")
    assert json.loads(trajectory.read_text())["awm"]["endpoint_tools"] is None
    capsys.readouterr()
