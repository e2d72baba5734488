"""Batch evaluation: oracle pass@k, crash + resume, metrics by hand, failing endpoints, report/compare."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.eval.batch import EvalConfig
from awm_engine.eval.metrics import pass_at_k, pass_hat_k, summarize
from awm_engine.eval.report import COMPARED, aggregates, compare_runs, fmt, markdown, pass_ks, run_metadata
from awm_engine.eval.results import ResultsIndex, read_records
from awm_engine.eval.runs import NotAnEvalRun, find_eval_runs, find_rollout_runs, list_eval_runs
from awm_tui.app import AwmApp

AWM = [sys.executable, "-m", "awm_engine.cli"]


def test_oracle_on_every_sample_task_k4(tmp_path, capsys):
    out = tmp_path / "run"
    assert awm(["eval", "run", "--policy", "oracle", "-k", "4", "--concurrency", "16", "--out", str(out),
                "--quiet"]) == 0
    capsys.readouterr()
    records = read_records(out / "results.jsonl")
    assert len(records) == 200 and len({r["id"] for r in records}) == 200
    assert awm(["eval", "report", str(out), "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    overall = meta["overall"]
    assert overall["completion_rate"] == 1.0 and overall["mean_reward"] == 1.0
    assert overall["pass_at_k"] == {"1": 1.0, "2": 1.0, "4": 1.0}
    assert overall["pass_hat_k"] == {"1": 1.0, "2": 1.0, "4": 1.0}
    assert set(meta["scenarios"]) == {r["scenario"] for r in records}
    r = records[0]
    for key in ("task_id", "sample", "messages", "tool_calls", "stop_reason", "reward_breakdown", "verifier",
                "timing", "usage", "run_dir", "initial_db", "final_db"):
        assert key in r
    assert Path(r["final_db"]).is_file()
    assert awm(["eval", "report", str(out), "--markdown"]) == 0
    assert "| **overall** | 200 | 1.000 | 1.000 |" in capsys.readouterr().out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("how", ["kill -9", "ctrl-c"])
def test_crash_mid_run_then_resume_gives_each_rollout_once(tmp_path, how):
    out = tmp_path / "run"
    args = AWM + ["eval", "run", "--policy", "oracle", "-k", "2", "--concurrency", "2", "--workers", "1",
                  "--scenario", "maple_library_lending", "--scenario", "pinecrest_online_store", "--out", str(out),
                  "--quiet"]
    (tmp_path / "tmp").mkdir()  # what a killed run leaves stays in the test's own directory
    env = {**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=env)
    results = out / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 5):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL if how == "kill -9" else signal.SIGINT)
    proc.wait(30)
    before = _lines(results)
    assert 5 <= len(before) < 40
    with open(results, "a") as fh:  # a torn line, as a kill in the middle of a write leaves
        fh.write('{"id": "maple_library_lending/9/1", "status": "ok", "reward"')
    done = subprocess.run(AWM + ["eval", "run", "--resume", str(out), "--quiet"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    after = _lines(results)
    ids = [r["id"] for r in after]
    assert len(ids) == 40 and len(set(ids)) == 40
    assert all(r["status"] == "ok" and r["label"] == "complete" for r in after)
    kept = {r["id"]: r["time"] for r in before if r["status"] == "ok"}
    assert all(r["time"] == kept[r["id"]] for r in after if r["id"] in kept)  # finished work was not redone


def test_metrics_match_hand_computed_values():
    def rec(s, t, i, reward, label, **kw):
        return {"id": f"{s}/{t}/{i}", "scenario": s, "task_id": t, "sample": i, "status": "ok", "reward": reward,
                "label": label, "has_verdict": label != "judge_error", "stop_reason": "final_answer", **kw}
    records = [
        # scenario a, task 0: 4 samples, 1 success -> pass@1 .25, pass@2 .5, pass@4 1, pass^1 .25, pass^2 0
        rec("a", 0, 0, 1.0, "complete"), rec("a", 0, 1, 0.1, "incomplete"), rec("a", 0, 2, 0.0, "agent_error"),
        rec("a", 0, 3, 0.0, "others"),
        # scenario a, task 1: 4 samples, 3 successes -> pass@1 .75, pass@2 1, pass^2 .5, pass^4 0
        rec("a", 1, 0, 1.0, "complete"), rec("a", 1, 1, 1.0, "complete"), rec("a", 1, 2, 1.0, "complete"),
        rec("a", 1, 3, 0.0, "server_error"),
        # scenario b, task 0: 2 scored samples + a judge_error (no verdict) + an errored rollout
        rec("b", 0, 0, 1.0, "complete"), rec("b", 0, 1, 0.0, "others", stop_reason="format_error"),
        rec("b", 0, 2, 0.0, "judge_error"),
        {"id": "b/0/3", "scenario": "b", "task_id": 0, "sample": 3, "status": "error", "error_kind": "llm_error",
         "reward": None, "label": None, "has_verdict": False},
    ]
    summary = summarize(records)
    a = summary["scenarios"]["a"]
    assert a["mean_reward"] == pytest.approx((1 + .1 + 0 + 0 + 1 + 1 + 1 + 0) / 8)
    assert a["completion_rate"] == pytest.approx(4 / 8)
    assert a["pass_at_k"] == pytest.approx({"1": (0.25 + 0.75) / 2, "2": (0.5 + 1.0) / 2, "4": 1.0})
    assert a["pass_hat_k"] == pytest.approx({"1": (0.25 + 0.75) / 2, "2": (0 + 0.5) / 2, "4": 0.0})
    assert a["errors"]["agent_error"] == 3 and a["errors"]["environment_error"] == 1  # incomplete counts as agent
    b = summary["scenarios"]["b"]
    assert b["rollouts"] == 4 and b["scored"] == 2 and b["errored"] == 1 and b["no_verdict"] == 1
    assert b["pass_at_k"] == pytest.approx({"1": 0.5, "2": 1.0})
    assert b["errors"] == {"agent_error": 0, "environment_error": 0, "judge_error": 1, "format_error": 1,
                           "timeout": 0, "llm_error": 1, "internal_error": 0}
    overall = summary["overall"]
    assert overall["pass_at_k"]["4"] == pytest.approx(1.0)  # only tasks with >= 4 scored samples count
    assert overall["mean_reward"] == pytest.approx((4.1 + 1.0) / 10)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3) and pass_at_k(5, 2, 4) == pytest.approx(1.0)
    assert pass_hat_k(10, 3, 2) == pytest.approx(3 / 45)


def test_failing_endpoint_is_retried_then_recorded_as_error_and_resume_fixes_it(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeLLMServer({"responses": [{"status": 503}], "rules": []}) as llm:
        started = time.time()
        # every rollout errored: exit 1, and stderr says how to rerun them
        assert awm(["eval", "run", "--scenario", "maple_library_lending", "--task", "0", "--task", "1", "-k", "1",
                    "--model", "m", "--base-url", llm.url, "--retries", "2", "--out", str(out), "--quiet"]) == 1
        assert f"awm eval run --resume {out}" in capsys.readouterr().err
        assert len(llm.requests) == 2 * 3  # each rollout: 1 try + 2 retries
        assert time.time() - started > 0.5  # the client backed off between tries
    records = read_records(out / "results.jsonl")
    assert [r["status"] for r in records] == ["error", "error"]
    assert all(r["error_kind"] == "llm_error" and "503" in r["error"] for r in records)
    assert awm(["eval", "report", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["errors"]["llm_error"] == 2
    answer = {"responses": [{"content": "I cannot help with that."}]}
    with FakeLLMServer(answer) as llm:
        assert awm(["eval", "run", "--resume", str(out), "--base-url", llm.url, "--quiet"]) == 0
    records = read_records(out / "results.jsonl")
    assert len(records) == 2 and all(r["status"] == "ok" for r in records)
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_unreachable_endpoint(tmp_path, capsys):
    out = tmp_path / "run"
    assert awm(["eval", "run", "--scenario", "maple_library_lending", "--task", "0", "--model", "m",
                "--base-url", "http://127.0.0.1:9/v1", "--retries", "1", "--out", str(out), "--quiet"]) == 1
    capsys.readouterr()
    (record,) = read_records(out / "results.jsonl")
    assert record["status"] == "error" and record["error_kind"] == "llm_error" and "Connection" in record["error"]


def test_compare_and_list(tmp_path, capsys):
    a, b = tmp_path / "eval" / "a", tmp_path / "eval" / "b"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", "skyway_travel_bookings", "--out", str(a),
                "--quiet"]) == 0
    assert awm(["eval", "run", "--policy", "immediate", "--scenario", "skyway_travel_bookings", "--out", str(b),
                "--quiet"]) == 0
    capsys.readouterr()
    assert awm(["eval", "compare", str(a), str(b), "--json"]) == 0
    rows = {r["scenario"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["overall"]["mean_reward"] == {"a": 1.0, "b": 0.0, "delta": -1.0}
    assert awm(["eval", "list", str(tmp_path / "eval"), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert sorted(r["model"] for r in runs) == ["immediate", "oracle"]
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", "skyway_travel_bookings", "--out", str(a)]) == 2


def test_results_index_is_incremental_and_ignores_torn_lines(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"id": "s/0/0", "scenario": "s", "task_id": 0, "reward": 1.0, "messages": ["x"] * 5})
                    + "\n" + '{"id": "s/0/1", "scen')
    index = ResultsIndex(path)
    assert index.refresh() == 1 and len(index) == 1
    assert "messages" not in next(index.summaries()) and index.record("s/0/0")["messages"] == ["x"] * 5
    with open(path, "a") as fh:
        fh.write('ario": "s", "task_id": 0, "reward": 0.0}\n')
        fh.write(json.dumps({"id": "s/0/0", "scenario": "s", "task_id": 0, "reward": 0.5}) + "\n")
    assert index.refresh() == 2 and len(index) == 2
    assert index.entries["s/0/0"].summary["reward"] == 0.5  # the last line per id wins


def _record(scenario: str, task: int, sample: int, reward: float, label: str) -> dict:
    return {"id": f"{scenario}/{task}/{sample}", "scenario": scenario, "task_id": task, "sample": sample,
            "status": "ok", "reward": reward, "label": label, "has_verdict": True, "stop_reason": "final_answer"}


def _write_run(path: Path, policy: str, records: list[dict]) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(EvalConfig(data_dirs=[], policy=policy, k=2).to_dict()))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_reports_are_computed_in_the_engine(tmp_path):
    a = _write_run(tmp_path / "a", "oracle", [_record("s", 0, 0, 1.0, "complete"), _record("s", 0, 1, 1.0, "complete"),
                                              _record("t", 0, 0, 0.0, "agent_error")])
    b = _write_run(tmp_path / "b", "immediate", [_record("s", 0, 0, 0.1, "incomplete")])
    meta = run_metadata(a)  # no metadata.json yet: computed and written
    assert (a / "metadata.json").is_file() and meta["rollouts"] == 3 and meta["model"] == "oracle"
    assert meta["overall"]["mean_reward"] == pytest.approx(2 / 3)
    assert run_metadata(a) == json.loads((a / "metadata.json").read_text())  # up to date: read back as is
    with open(a / "results.jsonl", "a") as fh:  # a new line makes it stale: recomputed
        fh.write(json.dumps(_record("t", 0, 1, 1.0, "complete")) + "\n")
    assert run_metadata(a)["rollouts"] == 4
    md = markdown(run_metadata(a))
    assert md.startswith("# oracle (k = 2)\n") and "| s | 2 | 1.000 | 1.000 |" in md and "| **overall** | 4 |" in md
    assert pass_ks(run_metadata(a)) == ["1", "2"]
    assert [name for name, _ in aggregates(run_metadata(a))] == ["s", "t", "overall"]
    assert fmt(None) == "-" and fmt(float("nan")) == "-" and fmt(0.5) == "0.500" and fmt(3) == "3"
    data = compare_runs(a, b)
    assert data["a"] == {"run": str(a), "model": "oracle"} and data["b"]["model"] == "immediate"
    rows = {r["scenario"]: r for r in data["rows"]}
    assert list(rows) == ["s", "t", "overall"]
    assert rows["s"]["mean_reward"] == {"a": 1.0, "b": 0.1, "delta": pytest.approx(-0.9)}
    assert rows["t"]["completion_rate"] == {"a": 0.5, "b": None, "delta": None}
    assert set(rows["overall"]) == {"scenario", *COMPARED}
    with pytest.raises(NotAnEvalRun, match="is not an evaluation run"):
        run_metadata(tmp_path)


def test_one_run_discovery(tmp_path):
    root = tmp_path / "eval"
    old = _write_run(root / "old", "oracle", [_record("s", 0, 0, 1.0, "complete")])
    nested = _write_run(root / "group" / "new", "immediate", [])
    (root / "empty").mkdir(parents=True)
    (root / "empty" / "config.json").write_text("{}")  # neither results nor metadata: not a run
    _write_run(root / "a" / "b" / "too_deep", "oracle", [])
    os.utime(old, (1, 1))
    assert find_eval_runs(root) == [nested, old]  # by path
    assert find_eval_runs(root, newest_first=True) == [nested, old]
    os.utime(nested, (0, 0))
    assert find_eval_runs(root, newest_first=True) == [old, nested]
    runs = list_eval_runs(root)
    assert [r["run_dir"] for r in runs] == [str(nested), str(old)]
    assert runs[1] == {"run_dir": str(old), "model": "oracle", "k": 2, "created": EvalConfig.load(old).created,
                       "rollouts": 0, "running": None, "mean_reward": None}  # no metadata.json yet
    run_metadata(old)
    assert list_eval_runs(root)[1]["rollouts"] == 1 and list_eval_runs(root)[1]["mean_reward"] == 1.0

    outputs = tmp_path / "outputs"
    made = []
    for i, rel in enumerate(["agents/x", "play/y", "eval/run/rollouts/s/0_0", "servers/z"]):
        (outputs / rel).mkdir(parents=True)
        (outputs / rel / "trajectory.json").write_text("{}")
        os.utime(outputs / rel, (i + 10, i + 10))
        made.append(outputs / rel)
    assert find_rollout_runs(outputs) == [made[2], made[1], made[0]]  # newest first; never outside agents/play/eval
    assert find_rollout_runs(outputs, limit=1) == [made[2]]
    assert AwmApp(None, runs_root=outputs).recent_runs(2) == [made[2], made[1]]
