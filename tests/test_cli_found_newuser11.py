"""What a new user found running every verb on data the authors did not write (one test per finding)."""
from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main
from awm_engine.eval.results import read_records
from tests.conftest import SHARED

CONFIGS = SHARED / "data" / "mcp-universe" / "configs"
STANDINS = str(Path(__file__).with_name("mcpu_standins.py"))


def _other_venv(path: Path) -> Path:
    """A venv of its own (not awm's), as a user's MCP-Universe checkout has: its bin/python is a symlink to the
    runtime; it finds fastmcp through a .pth naming awm's site-packages (in every sandbox's view already)."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    subprocess.run([base, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
    lib = next((path / "lib").glob("python3*")) / "site-packages"
    (lib / "awm_packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return path / "bin" / "python"


def test_an_mcp_server_run_by_the_python_of_another_venv_starts(tmp_path, capsys):
    """`awm bench mcp-universe run` with a server whose command is another venv's bin/python (a symlink to the
    runtime): the link and its venv were not in the sandbox's view, so every task errored `server … could not start:
    MCPError: Connection closed` (FileNotFoundError in the server log)."""
    if not (CONFIGS / "web_search.yaml").is_file():
        pytest.skip(f"MCP-Universe configs not found at {CONFIGS} (../shared is absent)")
    python = _other_venv(tmp_path / "venv")
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {name: {"command": str(python), "args": [STANDINS, name]}
                                                   for name in ("playwright", "date")}}))
    script = {"model": "scripted", "rules": [{"match": "3P% of Bronny James", "responses": [
        {"content": json.dumps({"thought": "-", "answer": {"Bronny James": "28.1", "Markieff Morris": "30.4"}})}]}]}
    out = tmp_path / "run"
    with FakeLLMServer(script) as llm:
        code = main(["bench", "mcp-universe", "run", "--mcp-universe", str(CONFIGS), "--task",
                     "playwright_sports_task_0001", "--servers", str(servers), "--model", "scripted",
                     "--base-url", llm.url, "--simulation", "--out", str(out), "--quiet"])
    capsys.readouterr()
    (record,) = read_records(out / "results.jsonl")
    assert record["status"] == "ok", record.get("error")
    assert code == 0


def test_the_window_warning_of_train_export_counts_only_the_rollouts_exported(tmp_path):
    """`awm train export` of two runs, one rollout not verified (skipped): it warned `1 of 2 rollouts ran with another
    history window` — as if the other had run with --window 3, when it was only left out."""
    from test_exit_codes import awm

    scenario = "maple_library_lending"
    unverified = awm("eval", "run", "--policy", "immediate", "--scenario", scenario, "--task", "0", "--verify", "none",
                     "--out", str(tmp_path / "a"), "--quiet")
    assert unverified.returncode == 0, unverified.stderr
    solved = awm("eval", "run", "--policy", "oracle", "--scenario", scenario, "--task", "1", "--out", str(tmp_path / "b"),
                 "--quiet")
    assert solved.returncode == 0, solved.stderr
    export = awm("train", "export", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "x.jsonl"))
    assert export.returncode == 0, export.stderr
    assert "skipped a/maple_library_lending/0/0" in export.stderr
    assert "from 1 rollouts" in export.stdout
    assert "1 of 1 rollouts exported ran with another history window" in export.stderr, export.stderr


def test_an_eval_run_never_mixes_with_an_agent_run_already_in_its_directory(tmp_path):
    """`awm eval run --out DIR` where `awm agent run --out DIR` had run: it ran and wrote its results beside the agent
    run's trajectory and events (`awm replay DIR` showed the agent run, `awm train export DIR` only the evaluation),
    while `awm agent run` refuses an evaluation run's directory."""
    from test_exit_codes import awm

    out = tmp_path / "run"
    first = awm("agent", "run", "--scenario", "maple_library_lending", "--task", "3", "--policy", "oracle",
                "--out", str(out))
    assert first.returncode == 0, first.stderr
    before = sorted(p.name for p in out.iterdir())
    again = awm("eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--task", "3",
                "--out", str(out))
    assert again.returncode == 2, (again.returncode, again.stderr)
    assert "already holds a run" in again.stderr and "Traceback" not in again.stderr
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


@pytest.mark.parametrize("what", ["empty", "eval-run"])
def test_gen_status_of_a_directory_that_is_no_generation_run(tmp_path, what):
    """`awm gen status DIR` of an empty directory or an evaluation run printed `generation run DIR` and two empty
    tables, exit 0 — as for a run that generated nothing — where a missing DIR says `no generation run` (exit 2)."""
    from test_exit_codes import awm

    out = tmp_path / "dir"
    out.mkdir()
    if what == "eval-run":
        (out / "results.jsonl").write_text("")
        (out / "metadata.json").write_text("{}")
    for argv in (["gen", "status", str(out)], ["gen", "status", str(out), "--json"]):
        result = awm(*argv)
        assert result.returncode == 2, (result.returncode, result.stdout)
        assert "no generation run" in result.stderr and result.stdout == "" and "Traceback" not in result.stderr


def test_a_human_run_replays_in_the_mode_it_was_recorded_in(tmp_path):
    """The README's played run (`--policy human`, native calls) replayed with `awm agent run --policy replay --replay
    runs/me`: replayed in the default meta mode, its first call was read as an empty final answer — `stop:
    final_answer after 1 turns`, `label: others` — where the recording had renewed the loan (complete)."""
    from test_exit_codes import ROOT

    played = tmp_path / "me"
    calls = 'list_my_loans {"status": "active"}\nrenew_loan {"loan_id": 3}\nanswer Renewed: the new due date is 2026-04-03.\n'
    human = subprocess.run([sys.executable, "-m", "awm_engine.cli", "agent", "run", "--scenario", "maple_library_lending",
                            "--task", "3", "--policy", "human", "--out", str(played)], input=calls, capture_output=True,
                           text=True, cwd=ROOT, timeout=300)
    assert "label: complete" in human.stdout, human.stderr
    from test_exit_codes import awm

    again = awm("agent", "run", "--scenario", "maple_library_lending", "--task", "3", "--policy", "replay",
                "--replay", str(played), "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    assert "label: complete  reward: 1.0" in again.stdout, (again.stdout, again.stderr)
    assert "after 3 turns" in again.stderr
    forced = awm("agent", "run", "--scenario", "maple_library_lending", "--task", "3", "--policy", "replay",
                 "--replay", str(played), "--mode", "meta", "--out", str(tmp_path / "forced"))
    assert "recorded in native mode" not in forced.stderr and "was made in native mode" in forced.stderr


def test_eval_report_says_when_a_results_line_cannot_be_read(tmp_path):
    """`awm eval report` of a run whose results.jsonl has a line that is not a record (a disk error, a hand edit):
    it printed `oracle · k=2 · 3 rollouts` with nothing on stderr — a smaller run than was made, silently."""
    from test_exit_codes import awm

    out = tmp_path / "run"
    made = awm("eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--task", "3", "--task", "4",
               "-k", "2", "--out", str(out), "--quiet")
    assert made.returncode == 0, made.stderr
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    lines[1] = "garbage\n"
    (out / "results.jsonl").write_text("".join(lines))
    report = awm("eval", "report", str(out))
    assert report.returncode == 0 and "3 rollouts" in report.stdout, report.stdout
    assert "1 line(s) of" in report.stderr and "--resume" in report.stderr, report.stderr
    as_json = awm("eval", "report", str(out), "--json")
    json.loads(as_json.stdout)  # the warning stays on stderr


def test_eval_compare_says_when_the_runs_cover_different_tasks(tmp_path):
    """`awm eval compare` of an oracle run on one task and an immediate run on all ten: the overall row showed
    Δ -1.000 (or any number) as if the two runs were comparable, with no word that they cover different tasks."""
    from test_exit_codes import awm

    one = awm("eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--task", "3",
              "--out", str(tmp_path / "one"), "--quiet")
    ten = awm("eval", "run", "--policy", "immediate", "--scenario", "maple_library_lending",
              "--out", str(tmp_path / "ten"), "--quiet")
    assert one.returncode == 0 and ten.returncode == 0, (one.stderr, ten.stderr)
    compared = awm("eval", "compare", str(tmp_path / "one"), str(tmp_path / "ten"))
    assert compared.returncode == 0, compared.stderr
    assert "cover different tasks" in compared.stderr and "1 vs 10 tasks" in compared.stderr, compared.stderr
    same = awm("eval", "compare", str(tmp_path / "ten"), str(tmp_path / "ten"), "--json")
    json.loads(same.stdout)
    assert "different" not in same.stderr, same.stderr


def test_awm_verify_never_gives_a_stopped_episode_a_verdict(tmp_path):
    """An `awm agent run` stopped with Ctrl-C is saved as `abandoned`, "never verified" (docs); `awm verify RUN` then
    verified it anyway: `label others, reward 0.0`, exit 0, and wrote verify.json — a verdict on no answer."""
    from test_exit_codes import awm

    run = tmp_path / "run"
    immediate = awm("agent", "run", "--scenario", "maple_library_lending", "--task", "3", "--policy", "immediate",
                    "--verify", "none", "--out", str(run))
    assert immediate.returncode == 0, immediate.stderr
    trajectory = json.loads((run / "trajectory.json").read_text())  # as Ctrl-C leaves it
    trajectory["awm"].update(stop_reason="abandoned", final_answer="", error="stopped before the episode ended")
    (run / "trajectory.json").write_text(json.dumps(trajectory))
    verified = awm("verify", str(run))
    assert verified.returncode == 1, (verified.returncode, verified.stdout)
    assert "no verdict" in verified.stderr and "abandoned" in verified.stderr and "Traceback" not in verified.stderr
    assert not (run / "verify.json").exists()


def test_train_export_says_why_a_stopped_run_is_skipped(tmp_path):
    """`awm train export` of an `awm agent run` stopped by Ctrl-C said `skipped …: abandoned: the player left the
    episode` — there was no player."""
    from test_exit_codes import awm

    run = tmp_path / "run"
    assert awm("agent", "run", "--scenario", "maple_library_lending", "--task", "3", "--policy", "immediate",
               "--out", str(run)).returncode == 0
    trajectory = json.loads((run / "trajectory.json").read_text())  # as Ctrl-C leaves it
    trajectory["awm"].update(stop_reason="abandoned", final_answer="", error="stopped before the episode ended")
    (run / "trajectory.json").write_text(json.dumps(trajectory))
    export = awm("train", "export", str(run), "--out", str(tmp_path / "x.jsonl"))
    assert export.returncode == 1, export.stderr
    assert "stopped before it ended" in export.stderr and "the player left the episode" not in export.stderr


def test_a_server_that_cannot_start_points_at_its_output(tmp_path):
    """'Connection closed' says nothing: the error names the server's log, where what it printed says why."""
    import asyncio

    from awm_engine.bench.mcp_universe import servers
    from awm_engine.bench.mcp_universe.episode import McpServersEpisode
    from awm_engine.runtime.episode import EnvLoadError

    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "broken.py").write_text("import sys\nsys.exit('no such module: weather_api')\n")
    defs = servers.parse_servers({"mcpServers": {"w": {"command": sys.executable,
                                                       "args": [str(tmp_path / "srv" / "broken.py")]}}}, env={})
    run_dir = tmp_path / "run"

    async def go():
        with pytest.raises(EnvLoadError) as caught:
            episode = await McpServersEpisode.start([defs["w"]], run_dir, timeout=60)
            await episode.close()
        return str(caught.value)

    message = asyncio.run(go())
    log = run_dir / "servers" / "w.log"
    assert f"(its output: {log})" in message
    assert "no such module: weather_api" in log.read_text()


def test_gen_status_of_downloaded_data_is_finished(tmp_path, capsys):
    """AWM data as downloaded has rows and no events: a scenario whose every task has a verifier row is finished
    (it was 'verifier pending', and the TUI would not open it from the generation screen); one with a task left
    without a verifier is not."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(Path(__file__).resolve().parent.parent / "sample_envs", data)
    assert main(["gen", "status", str(data), "--json"]) == 0
    finished = {s["scenario"]: s["finished"] for s in json.loads(capsys.readouterr().out)["scenarios"]}
    assert finished and all(finished.values()), finished
    rows = (data / "gen_verifier.jsonl").read_text().splitlines()
    dropped = json.loads(rows[0])
    (data / "gen_verifier.jsonl").write_text("\n".join(rows[1:]) + "\n")
    assert main(["gen", "status", str(data), "--json"]) == 0
    scenarios = {s["scenario"]: s for s in json.loads(capsys.readouterr().out)["scenarios"]}
    left = scenarios[dropped["scenario"]]
    assert not left["finished"] and left["stages"]["verifier"]["state"] == "pending"
    assert all(s["finished"] for k, s in scenarios.items() if k != dropped["scenario"])
