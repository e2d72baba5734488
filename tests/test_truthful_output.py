"""CLI output fits its terminal (issue 26 item 6): at 80 columns the scenario key — what ``--scenario`` takes — is never
cut (other columns go first, and a line says which); the live transcript (``awm agent run``, the human player
``--policy human`` included) cuts long text with a visible marker and ``--full`` shows it whole; ``awm replay --json``
points only at files that exist."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from awm_engine.cli import agent_cmd, eval_cmd
from awm_engine.cli import main as awm
from awm_engine.data.names import normalize_scenario_name
from awm_engine.data.run_formats import Observation

ROOT = Path(__file__).resolve().parent.parent
LONG_NAME = "Maple Library Lending And Interlibrary Loan Desk"
LONG_KEY = normalize_scenario_name(LONG_NAME)  # 47 characters


def long_named_data(dst: Path) -> Path:
    dst.mkdir(parents=True)
    for src in (ROOT / "sample_envs").glob("*.jsonl"):
        text = src.read_text().replace("Maple Library Lending", LONG_NAME).replace("maple_library_lending", LONG_KEY)
        (dst / src.name).write_text(text)
    return dst


def test_catalog_list_at_80_columns_keeps_the_key_whole(tmp_path):
    data = long_named_data(tmp_path / "data")
    done = subprocess.run([sys.executable, "-m", "awm_engine.cli", "catalog", "list", "--data", str(data)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"}, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(LONG_KEY in line for line in lines), done.stdout
    assert "…" not in done.stdout
    assert "left out at this width" in done.stdout and "--json" in done.stdout
    # wide enough: every column, no note
    wide = subprocess.run([sys.executable, "-m", "awm_engine.cli", "catalog", "list", "--data", str(data)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=300)
    assert "left out" not in wide.stdout and "code verifiers" in wide.stdout and "solutions" in wide.stdout


def _meta(names: list[str], k: int = 8) -> dict:
    ks = [str(2 ** i) for i in range(k.bit_length()) if 2 ** i <= k]
    agg = {"rollouts": 16, "mean_reward": 0.5, "completion_rate": 0.5, "pass_at_k": {x: 0.75 for x in ks},
           "pass_hat_k": {x: 0.25 for x in ks}, "errors": {"agent_error": 3, "environment_error": 1,
                                                           "internal_error": 0}}
    return {"model": "m", "k": k, "scenarios": {n: agg for n in names}, "overall": {**agg, "rollouts": 32}}


def test_eval_report_at_80_columns_keeps_the_key_whole():
    names = [LONG_KEY, "docusign_electronic_signature_workflows"]
    console = Console(file=io.StringIO(), width=80, color_system=None)
    eval_cmd._print_report(_meta(names), console)
    out = console.file.getvalue()
    assert max(len(line) for line in out.splitlines()) <= 80
    for name in names:
        assert any(name in line for line in out.splitlines()), out
    assert "left out at this width" in out and "pass^8" in out[out.index("left out"):]
    wide = Console(file=io.StringIO(), width=220, color_system=None)
    eval_cmd._print_report(_meta(names), wide)
    assert "left out" not in wide.file.getvalue() and "pass^8" in wide.file.getvalue()


def test_long_results_are_cut_with_a_marker_and_full_shows_them(monkeypatch):
    printed = []
    monkeypatch.setattr(agent_cmd.stderr, "print", lambda text, **kw: printed.append(text))
    text = "x" * 1000 + "END"
    agent_cmd._print_event(Observation(1, "c1", "get_thing", text))
    assert "END" not in printed[-1] and "603 more characters; --full shows them" in printed[-1]
    agent_cmd._print_event(Observation(1, "c1", "get_thing", text), full=True)
    assert "END" in printed[-1] and "more characters" not in printed[-1]
    agent_cmd._print_event(Observation(1, "c1", "get_thing", "short"))
    assert "more characters" not in printed[-1]


def test_human_player_has_full(tmp_path, monkeypatch, capsys):
    """The human player (``awm agent run --policy human``) prints results through the same transcript: --full
    exists for it and shows a long result whole."""
    lines = iter(['list_branches {}\n', 'answer done\n'])
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(lines)))
    monkeypatch.setattr(agent_cmd, "SHOWN_CHARS", {**agent_cmd.SHOWN_CHARS, "result": 20})
    assert awm(["agent", "run", "--scenario", "maple_library_lending", "--task", "0", "--policy", "human",
                "--verify", "none", "--out", str(tmp_path / "cut")]) == 0
    assert "more characters; --full shows them" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.StringIO('list_branches {}\nanswer done\n'))
    assert awm(["agent", "run", "--scenario", "maple_library_lending", "--task", "0", "--policy", "human",
                "--verify", "none", "--full", "--out", str(tmp_path / "full")]) == 0
    assert "more characters" not in capsys.readouterr().err


def test_replay_json_points_only_at_files_that_exist(tmp_path, capsys):
    run = tmp_path / "run"
    assert awm(["agent", "run", "--scenario", "sprintboard_project_tracker", "--task", "0", "--policy", "oracle",
                "--verify", "none", "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert awm(["replay", str(run), "--step", "0", "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)["diff"]
    assert diff["step"] == 0 and "summary" in diff
    for side in ("before", "after"):
        if side in diff:
            assert Path(diff[side]).is_file()
    assert "after" not in diff  # the replayed state at step 0 was a temporary file, removed after the diff
