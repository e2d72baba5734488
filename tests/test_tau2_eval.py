"""τ²-bench domains through ``awm eval`` and ``awm env doctor`` (issue 15): ``awm eval run --tau2-data DIR --scenario
tau2_retail`` scores exactly as ``awm bench tau2 run`` (same rewards on the same tasks and script), resumes after a
kill, and ``awm eval report | compare | list`` read its run; ``awm env doctor --tau2-data DIR tau2_<domain>`` lists a
domain's problems (and says which AWM checks do not apply), as does the TUI's Problems list (ctrl+d)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.bench.tau2.data import Tau2Data
from awm_engine.cli import main as awm
from awm_engine.eval.results import read_records
from tests.test_tau2_domains import FIXTURE, TAU2
from tests.test_tau2_run import gold_plan, kill_after_two, scripted


@pytest.fixture(scope="module")
def retail():
    if not (TAU2 / "domains" / "retail" / "tasks.json").is_file():
        pytest.skip(f"τ²-bench data not found at {TAU2} (../shared is absent)")
    return Tau2Data(TAU2).domain("retail")


def retail_script(retail, delay: float = 0.0) -> dict:
    """Tasks 0 and 1 of the base split solved (the gold actions), task 2 answered without doing anything."""
    t0, t1, t2 = retail.split_tasks()[:3]
    return scripted([gold_plan(t0, "E0"), gold_plan(t1, "E1"), (t2, "E2", [], [], "Sorry, I cannot help with that.")],
                    delay=delay)


def rewards(run_dir: Path) -> dict[str, float | None]:
    return {r["id"]: r["reward"] for r in read_records(run_dir / "results.jsonl")}


def test_eval_run_on_retail_scores_as_the_bench_runner(retail, tmp_path, capsys):
    ids = [t.id for t in retail.split_tasks()[:3]]
    with FakeLLMServer(retail_script(retail)) as server:
        model = ["--model", "scripted", "--base-url", server.url, "--quiet"]
        assert awm(["eval", "run", "--tau2-data", str(TAU2), "--scenario", "tau2_retail", "--task", "0", "--task",
                    "1", "--task", "2", *model, "--out", str(tmp_path / "eval")]) == 0
        shown = capsys.readouterr()
        assert awm(["bench", "tau2", "run", "--tau2-data", str(TAU2), "--domain", "retail",
                    *[a for i in ids for a in ("--task", i)], *model, "--out", str(tmp_path / "bench")]) == 0
        assert "DB match" in capsys.readouterr().out
    by_eval, by_bench = rewards(tmp_path / "eval"), rewards(tmp_path / "bench")
    assert by_eval == by_bench == {f"tau2_retail/{ids[0]}/0": 1.0, f"tau2_retail/{ids[1]}/0": 1.0,
                                   f"tau2_retail/{ids[2]}/0": 0.0}
    eval_lines = {r["id"]: r for r in read_records(tmp_path / "eval" / "results.jsonl")}
    bench_lines = {r["id"]: r for r in read_records(tmp_path / "bench" / "results.jsonl")}
    assert {k: r["reward_info"] for k, r in eval_lines.items()} == {k: r["reward_info"] for k, r in bench_lines.items()}
    assert "tau2_retail" in shown.out and "0.667" in shown.out  # awm eval's table: the scenario and its mean
    config = json.loads((tmp_path / "eval" / "config.json").read_text())
    assert config["benchmark"] == "tau2" and config["task_indexes"] == [0, 1, 2] and config["domains"] == ["retail"]
    # awm eval report | compare | list read it like an evaluation
    assert awm(["eval", "report", str(tmp_path / "eval"), "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["scenarios"]["tau2_retail"]["mean_reward"] == pytest.approx(2 / 3)
    assert meta["tau2"]["domains"]["retail"]["db_match_rate"] == pytest.approx(2 / 3)
    assert awm(["eval", "report", str(tmp_path / "eval"), "--markdown"]) == 0
    assert "| tau2_retail | 3 | 0.667 |" in capsys.readouterr().out
    assert awm(["eval", "compare", str(tmp_path / "bench"), str(tmp_path / "eval"), "--json"]) == 0
    rows = {r["scenario"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["tau2_retail"]["mean_reward"]["delta"] == 0.0
    assert awm(["eval", "list", str(tmp_path), "--json"]) == 0
    listed = {Path(r["run_dir"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert listed["eval"]["mean_reward"] == pytest.approx(2 / 3) and listed["eval"]["benchmark"] == "tau2"


def test_eval_run_on_retail_resumes_after_a_kill(retail, tmp_path):
    out = tmp_path / "run"
    with FakeLLMServer(retail_script(retail, delay=0.4)) as server:
        kill_after_two(["eval", "run", "--tau2-data", str(TAU2), "--scenario", "tau2_retail", "--task", "0", "--task",
                        "1", "--task", "2", "-k", "2", "--model", "scripted", "--base-url", server.url, "--out",
                        str(out), "--concurrency", "1", "--quiet"], out)
        assert 2 <= len(read_records(out / "results.jsonl")) < 6
        assert awm(["eval", "run", "--resume", str(out), "--quiet"]) == 0
    ids = [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 6
    got = rewards(out)
    assert sorted(got.values()) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["complete"] is True and meta["tau2"]["domains"]["retail"]["pass_hat_k"]["2"] == pytest.approx(2 / 3)


def test_eval_run_refusals_name_the_problem(tmp_path, capsys):
    base = ["eval", "run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o")]
    cases = [
        (["--scenario", "tau2_airline"], "--tau2-data"),
        (["--tau2-data", str(FIXTURE), "--scenario", "tau2_airline", "--scenario", "gofundme"], "separately"),
        (["--tau2-data", str(FIXTURE)], "--scenario tau2_retail"),
        (["--tau2-data", str(FIXTURE), "--scenario", "tau2_airline", "--task", "99"], "position(s) 99"),
        (["--tau2-data", str(FIXTURE), "--scenario", "tau2_airline", "--policy", "oracle"], "--policy oracle"),
        (["--tau2-data", str(FIXTURE), "--scenario", "tau2_retail"], "retail"),
        (["--tau2-data", str(FIXTURE), "--scenario", "tau2_airline", "--split", "nope"], "'nope'"),
    ]
    for extra, said in cases:
        env_data = os.environ.pop("AWM_TAU2_DATA", None)
        try:
            assert awm(base + extra) == 2, extra
        finally:
            if env_data is not None:
                os.environ["AWM_TAU2_DATA"] = env_data
        assert said in capsys.readouterr().err, extra
    assert not (tmp_path / "o").exists()


def broken_copy(tmp_path: Path) -> Path:
    """The airline fixture with a task whose initial state fails, a gold action that fails, and a malformed task."""
    root = tmp_path / "tau2"
    shutil.copytree(FIXTURE, root)
    path = root / "domains" / "airline" / "tasks.json"
    tasks = json.loads(path.read_text())
    tasks[0]["initial_state"] = {"initialization_actions": [
        {"env_type": "assistant", "func_name": "no_such_function", "arguments": {}}]}
    tasks[3]["evaluation_criteria"]["actions"].append(
        {"action_id": "3_x", "name": "cancel_reservation", "arguments": {"reservation_id": "NOPE00"}})
    tasks.append({"id": "bad", "user_scenario": 7})
    path.write_text(json.dumps(tasks))
    return root


def test_env_doctor_on_tau2_domains(tmp_path, capsys):
    assert awm(["env", "doctor", "--tau2-data", str(FIXTURE), "tau2_airline", "--workers", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    airline = report["scenarios"][0]
    assert airline["scenario"] == "tau2_airline" and airline["health"] == "ok" and airline["problems"] == []
    assert any("does not apply" in n for n in airline["notes"]) and report["tau2_data"] == str(FIXTURE)
    broken = broken_copy(tmp_path)
    assert awm(["env", "doctor", "--tau2-data", str(broken), "--workers", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_key = {d["scenario"]: d for d in report["scenarios"]}
    assert set(by_key) == {"tau2_airline", "tau2_retail", "tau2_telecom"}
    kinds = {(p["kind"], p["severity"], p["task"]) for p in by_key["tau2_airline"]["problems"]}
    assert ("task_setup", "error", 0) in kinds and ("gold_action_error", "warning", 3) in kinds
    assert any(p["kind"] == "data_issue" and "'bad'" in p["message"] for p in by_key["tau2_airline"]["problems"])
    assert [p["kind"] for p in by_key["tau2_retail"]["problems"]] == ["data_issue"]  # no retail directory
    assert awm(["env", "doctor", "--tau2-data", str(broken), "tau2_airline", "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "task_setup" in text and "no_such_function" in text and "note" in text
    # the airline database missing: the domain cannot open, and doctor says how to supply it
    (broken / "domains" / "airline" / "db.json").unlink()
    assert awm(["env", "doctor", "--tau2-data", str(broken), "tau2_airline", "--workers", "1", "--json"]) == 0
    problems = json.loads(capsys.readouterr().out)["scenarios"][0]["problems"]
    assert any(p["kind"] == "build_failure" and "--airline-db" in p["message"] for p in problems)
    # a τ² domain without its data, a bad directory
    env_data = os.environ.pop("AWM_TAU2_DATA", None)
    try:
        assert awm(["env", "doctor", "tau2_retail"]) == 2
        assert "--tau2-data" in capsys.readouterr().err
    finally:
        if env_data is not None:
            os.environ["AWM_TAU2_DATA"] = env_data
    assert awm(["env", "doctor", "--tau2-data", str(tmp_path / "none"), "tau2_retail"]) == 2


def test_env_doctor_on_the_shared_telecom_domain(tmp_path, capsys):
    if not (TAU2 / "domains" / "telecom" / "tasks.json").is_file():
        pytest.skip(f"τ²-bench data not found at {TAU2} (../shared is absent)")
    assert awm(["env", "doctor", "--tau2-data", str(TAU2), "tau2_telecom", "--workers", "1", "--json"]) == 0
    telecom = json.loads(capsys.readouterr().out)["scenarios"][0]
    assert telecom["health"] == "ok" and telecom["counts"]["error"] == 0
    # every base task's initial state builds and its gold actions reach the gold end state; only the unusable
    # 'full' split (its tasks are not in these files) is reported
    assert [p["kind"] for p in telecom["problems"]] == ["data_issue"] and "'full'" in telecom["problems"][0]["message"]
