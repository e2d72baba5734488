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


def test_an_unknown_tool_in_env_call_names_the_closest_and_every_tool(capsys):
    from awm_engine.cli import main as awm

    assert awm(["env", "call", "maple_library_lending", "list_branchs"]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == "Unknown tool: list_branchs"  # the text a model sees stays the reference's
    assert "did you mean: list_branches" in err
    assert "search_titles" in err and "tools:" in err


def test_env_test_names_a_scenario_without_code_once(tmp_path, capsys):
    import json

    from tinyenv import make_env_dir

    from awm_engine.cli import main as awm

    data = make_env_dir(tmp_path / "data", {"Codeless": "", "Fine": ""})
    rows = [json.loads(line) for line in (data / "gen_envs.jsonl").read_text().splitlines()]
    (data / "gen_envs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["scenario"] != "Codeless"))
    awm(["env", "test", "--data", str(data), "--scenario", "codeless"])
    out = capsys.readouterr().out
    assert "codeless: no environment code" in out and "codeless: codeless:" not in out
