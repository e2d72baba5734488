"""`awm bench tau2 run | score | report` (issue 15): end-to-end runs with a scripted agent and a scripted user (one
scripted OpenAI-compatible server plays both, told apart by rules), the orchestrator's limits, resume after a kill,
the run-directory formats, and re-scoring a results file in τ²-bench's own format."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.bench.tau2.data import Tau2Data
from awm_engine.bench.tau2.prompts import GREETING, STOP, TRANSFER
from awm_engine.bench.tau2.run import Tau2Config, is_tau2_run, report_columns, run_tau2
from awm_engine.cli import main as awm
from awm_engine.eval.batch import RunLocked, lock_run_dir
from awm_engine.eval.results import read_records
from tests.test_tau2_domains import FIXTURE, TAU2, gold_messages, score

ROOT = Path(__file__).resolve().parent.parent


def endpoint(url: str) -> Endpoint:
    return Endpoint(base_url=url, model="scripted", temperature=0.0, mode="native", max_retries=0)


def call(name: str, arguments: dict) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def scripted(plans: list[tuple[object, str, list, list, str]], delay: float = 0.0) -> dict:
    """One scripted server for every task: ``plans`` = (task, token, agent steps, user steps, agent's last words).
    The user's rules match its scenario (only in its system prompt) and come first; the agent's match the user's
    opening words. The agent's script starts at position 1 (its history already holds the greeting)."""
    user_rules, agent_rules = [], []
    for task, token, agent_steps, user_steps, last_words in plans:
        reason = task.user_scenario.instructions.reason_for_call.splitlines()[0]
        user_rules.append({"match": reason, "responses": [{"content": f"Hello, I need help with {token}."},
                                                           *user_steps, {"content": f"Thanks, that's all. {STOP}"}]})
        agent_rules.append({"match": f"help with {token}.", "responses": [
            {"content": "(unused)"}, *agent_steps, {"content": last_words, "delay": delay}]})
    return {"rules": user_rules + agent_rules}


def gold_plan(task, token: str, say: str = "All done.") -> tuple:
    """The agent makes every assistant gold call, then the user every user gold call."""
    acts = task.evaluation_criteria.actions or []
    return (task, token, [call(a.name, a.arguments) for a in acts if a.requestor == "assistant"],
            [call(a.name, a.arguments) for a in acts if a.requestor == "user"],
            " ".join([say, *(task.evaluation_criteria.communicate_info or [])]))


@pytest.fixture(scope="module")
def fixture_data() -> Tau2Data:
    return Tau2Data(FIXTURE)


@pytest.fixture(scope="module")
def shared_data() -> Tau2Data:
    if not (TAU2 / "domains" / "retail" / "tasks.json").is_file():
        pytest.skip(f"τ²-bench data not found at {TAU2} (../shared is absent)")
    return Tau2Data(TAU2)


def test_scripted_run_on_the_airline_fixture(fixture_data, tmp_path):
    airline = fixture_data.domain("airline")
    t0, t1, t2, t3 = airline.split_tasks()
    plans = [gold_plan(t0, "T0"), gold_plan(t1, "T1", "Booked: 255 in all."),
             (t2, "T2", [call("get_reservation_details", {"reservation_id": "3RK2T9"})], [], "I looked it up."),
             gold_plan(t3, "T3", "HAT300 is on time today.")]
    out = tmp_path / "run"
    with FakeLLMServer(scripted(plans)) as server:
        config = Tau2Config(data_dir=str(FIXTURE), domains=["airline"], k=2, endpoint=endpoint(server.url).public(),
                            concurrency=3)
        meta = asyncio.run(run_tau2(config, out, endpoint(server.url)))
        requests = server.requests
    records = {(r["task_id"], r["trial"]): r for r in read_records(out / "results.jsonl")}
    assert len(records) == 8 and all(r["status"] == "ok" for r in records.values())
    assert {t: records[(t, 0)]["reward"] for t in "0123"} == {"0": 1.0, "1": 1.0, "2": 0.0, "3": 1.0}
    assert records[("2", 1)]["reward_info"]["db_check"]["db_match"] is False
    first = records[("0", 0)]
    assert first["termination_reason"] == "user_stop" and first["label"] == "complete"
    assert first["messages"][0] == {**first["messages"][0], "role": "assistant", "content": GREETING}
    assert [m["role"] for m in first["messages"]] == ["assistant", "user", "assistant", "tool", "assistant", "user"]
    # the user never sees the agent's tool calls; the agent sees the greeting as its own first turn
    user_requests = [r for r in requests if "<scenario>" in r["messages"][0]["content"]]
    assert user_requests and all(m["role"] != "tool" for r in user_requests for m in r["messages"])
    assert all(r["messages"][1] == {"role": "user", "content": GREETING} for r in user_requests)
    agent_requests = [r for r in requests if r["messages"][0]["content"].startswith("<instructions>")]
    assert all(r["messages"][1] == {"role": "assistant", "content": GREETING} for r in agent_requests)
    assert {t["function"]["name"] for t in agent_requests[0]["tools"]} >= {"book_reservation", "cancel_reservation"}
    assert "tools" not in user_requests[0]  # airline users have no tools (and an empty list is refused)
    assert {r.get("seed") for r in requests} <= set(__import__("awm_engine.bench.tau2.run", fromlist=["x"])
                                                   .trial_seeds(300, 2))
    # τ²'s metrics and the paper's columns
    m = meta["tau2"]["domains"]["airline"]
    assert m["avg_reward"] == 0.75 and m["pass_hat_k"] == {"1": 0.75, "2": 0.75} and m["trials"] == 2
    assert meta["report_columns"]["columns"]["Airline"]["value"] == 0.75
    assert report_columns(out)["columns"]["Airline"]["n"] == 8
    # each simulation's directory: awm's rollout files, τ²'s simulation, the databases
    rollout = Path(first["run_dir"])
    for name in ("trajectory.json", "events.jsonl", "simulation.json", "reward.json", "initial.db", "final.db"):
        assert (rollout / name).is_file(), name
    simulation = json.loads((rollout / "simulation.json").read_text())
    assert simulation["reward_info"]["reward"] == 1.0 and simulation["termination_reason"] == "user_stop"
    assert is_tau2_run(out) and json.loads((out / "config.json").read_text())["benchmark"] == "tau2"


def test_report_and_bench_report_read_the_run(fixture_data, tmp_path, capsys):
    airline = fixture_data.domain("airline")
    plans = [gold_plan(t, f"R{t.id}", "Done: 255 - on time.") for t in airline.split_tasks()]
    out = tmp_path / "run"
    with FakeLLMServer(scripted(plans)) as server:
        config = Tau2Config(data_dir=str(FIXTURE), domains=["airline"], k=1, endpoint=endpoint(server.url).public())
        asyncio.run(run_tau2(config, out, endpoint(server.url)))
    assert awm(["bench", "tau2", "report", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tau2"]["domains"]["airline"]["avg_reward"] == 1.0
    assert data["tau2"]["domains"]["airline"]["db_match_rate"] == 1.0
    assert awm(["bench", "tau2", "report", str(out), "--markdown"]) == 0
    assert "| scripted |" in capsys.readouterr().out
    assert awm(["bench", "report", str(out), "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert "tau2" in table["present"]
    # awm replay on a τ² rollout: the database after a step, rebuilt in a worker episode of the domain
    rollout = next(r["run_dir"] for r in read_records(out / "results.jsonl") if r["task_id"] == "1")
    assert awm(["replay", rollout, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    booked = next(s["step"] for s in steps if s["tool"] == "book_reservation")
    assert awm(["replay", rollout, "--step", str(booked), "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["final_matches"] is True
    assert {t["table"] for t in replayed["diff"]["tables"]} == {"flights", "users", "reservations"}


def test_orchestrator_limits_and_stops(fixture_data, tmp_path):
    airline = fixture_data.domain("airline")
    t0, t1, t2, t3 = airline.split_tasks()
    bad = call("no_such_tool", {})
    plans = [(t0, "E0", [bad] * 12, [], "never said"),  # 10 errored tool calls in all: too_many_errors
             (t1, "E1", [call("get_user_details", {"user_id": "mia_li_3668"})] * 3, [], "x"),  # max_steps
             (t2, "E2", [{"content": ""}], [], "x"),  # an empty agent turn: infrastructure error
             (t3, "E3", [], [], "Transferring you.")]
    script = scripted(plans)
    script["rules"][3]["responses"] = [{"content": "Hello, I need help with E3."},
                                       {"content": f"I want a human. {TRANSFER}"}]
    out = tmp_path / "run"
    with FakeLLMServer(script) as server:
        config = Tau2Config(data_dir=str(FIXTURE), domains=["airline"], k=1, endpoint=endpoint(server.url).public(),
                            max_steps=5, max_errors=10)
        asyncio.run(run_tau2(config, out, endpoint(server.url)))
        records = {r["task_id"]: r for r in read_records(out / "results.jsonl")}
        assert records["1"]["termination_reason"] == "max_steps" and records["1"]["reward"] == 0.0
        assert records["2"]["status"] == "error" and records["2"]["termination_reason"] == "infrastructure_error"
        assert records["3"]["termination_reason"] == "user_stop"  # ###TRANSFER### is a user stop
        # max_errors is a running total: rerun task 0 with room for it
        out2 = tmp_path / "errors"
        config = Tau2Config(data_dir=str(FIXTURE), domains=["airline"], task_ids=["0"], k=1,
                            endpoint=endpoint(server.url).public(), max_steps=200)
        asyncio.run(run_tau2(config, out2, endpoint(server.url)))
    zero = read_records(out2 / "results.jsonl")[0]
    assert zero["termination_reason"] == "too_many_errors" and zero["num_errors"] == 10
    assert zero["reward"] == 0.0
    assert all(m["content"] == "Error: Tool 'no_such_tool' not found." for m in zero["messages"] if m["role"] == "tool")
    # an infrastructure error is left out of the metrics and run again by --resume
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["tau2"]["domains"]["airline"]["errored"] == 1 and meta["tau2"]["domains"]["airline"]["scored"] == 3


def test_end_to_end_retail_and_telecom(shared_data, tmp_path):
    retail, telecom = shared_data.domain("retail"), shared_data.domain("telecom")
    picked = []
    for data, want in ((retail, 2), (telecom, 2)):
        seen = set()
        for task in data.split_tasks():
            acts = task.evaluation_criteria.actions or []
            first = task.user_scenario.instructions.reason_for_call.splitlines()[0]
            writes = [a for a in acts if a.name.startswith(("cancel", "modify", "exchange", "return", "refuel",
                                                            "toggle", "enable", "reset", "reboot"))]
            if first in seen or not writes:
                continue
            order = [a for a in acts if a.requestor == "assistant"] + [a for a in acts if a.requestor == "user"]
            if score(data, task, gold_messages(data, task, order)).reward != 1.0:
                continue
            seen.add(first)
            picked.append((data.name, task))
            if len(seen) == want:
                break
    assert len(picked) == 4
    plans = [gold_plan(task, f"X{i}") for i, (_, task) in enumerate(picked)]
    out = tmp_path / "run"
    with FakeLLMServer(scripted(plans)) as server:
        config = Tau2Config(data_dir=str(TAU2), domains=["retail", "telecom"], k=1,
                            task_ids=[t.id for _, t in picked], endpoint=endpoint(server.url).public(), concurrency=4)
        meta = asyncio.run(run_tau2(config, out, endpoint(server.url)))
        telecom_user = [r for r in server.requests if "<scenario>" in r["messages"][0]["content"]
                        and "Domain: telecom" in r["messages"][0]["content"]]
    records = read_records(out / "results.jsonl")
    assert len(records) == 4 and all(r["reward"] == 1.0 for r in records), [(r["task_id"], r.get("reward_info"))
                                                                           for r in records]
    assert {t["function"]["name"] for t in telecom_user[0]["tools"]} >= {"toggle_data", "run_speed_test"}
    assert set(meta["tau2"]["domains"]) == {"retail", "telecom"}
    assert meta["task_versions"] == {"retail": "verified", "telecom": "telecom-base"}
    telecom_run = next(Path(r["run_dir"]) for r in records if r["domain"] == "telecom")
    events = [json.loads(line) for line in (telecom_run / "events.jsonl").read_text().splitlines()]
    assert any(e["type"] == "tool_call" and str(e["tool"]).startswith("user:") for e in events)


def kill_after_two(args: list[str], out: Path, while_running=None) -> None:
    """``awm ARGS`` in a subprocess, killed (SIGKILL, its whole group) once two results are in ``out``."""
    tmp = out.parent / "tmp"  # what the killed run leaves stays beside its output
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            results = out / "results.jsonl"
            if results.is_file() and results.read_text().count("\n") >= 2:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.1)
        if while_running is not None:
            while_running()
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)


def test_resume_after_a_kill(fixture_data, tmp_path):
    airline = fixture_data.domain("airline")
    plans = [gold_plan(t, f"K{t.id}", "Done: 255 - on time.") for t in airline.split_tasks()]
    out = tmp_path / "run"
    with FakeLLMServer(scripted(plans, delay=0.4)) as server:
        def while_running():  # one writer per run directory: a second run into it is refused while the first runs
            with pytest.raises(RunLocked):
                lock_run_dir(out)

        kill_after_two(["bench", "tau2", "run", "--tau2-data", str(FIXTURE), "--domain", "airline", "-k", "3",
                        "--model", "scripted", "--base-url", server.url, "--out", str(out), "--concurrency", "1",
                        "--quiet"], out, while_running)
        killed = read_records(out / "results.jsonl")
        assert 2 <= len(killed) < 12
        assert awm(["bench", "tau2", "run", "--resume", str(out), "--quiet"]) == 0
    records = read_records(out / "results.jsonl")
    ids = [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 12 and len(ids) == len(set(ids)) == 12
    assert all(r["status"] == "ok" and r["reward"] == 1.0 for r in records)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["complete"] is True and meta["tau2"]["domains"]["airline"]["pass_hat_k"]["3"] == 1.0


def test_score_a_tau2_results_file(tmp_path, capsys):
    path = FIXTURE / "simulations_airline.json"
    assert awm(["bench", "tau2", "score", str(path), "--tau2-data", str(FIXTURE), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = {r["id"]: r for r in result["simulations"]}
    assert result["domain"] == "airline"
    assert {k: r["reward"] for k, r in rows.items()} == {"s0": 1.0, "s1": 0.0, "s2": 0.0, "s3": None, "s4": 1.0,
                                                        "s5": 0.0, "s6": None}
    assert rows["s3"]["status"] == "error" and "infrastructure_error" in rows["s3"]["error"]
    assert rows["s6"]["status"] == "error" and "no task" in rows["s6"]["error"]
    assert result["agreement"] == {"compared": 5, "agree": 4, "disagree": ["s5"]}
    assert result["metrics"]["scored"] == 5 and result["metrics"]["errored"] == 2
    assert any("simulation #7" in p for p in result["problems"])
    # tasks in the file win over the data directory's (the file's task 1 asks the agent to say 255)
    assert rows["s4"]["reward_breakdown"]["COMMUNICATE"] == 1.0
    # every check's outcome, in order: s1 made the first of its two gold calls only; s5 never said 255
    assert rows["s1"]["checks"] == {"env_assertions": [], "actions": [True, False], "communicate": []}
    assert rows["s5"]["checks"]["communicate"] == [False] and rows["s4"]["checks"]["communicate"] == [True]
    assert rows["s2"]["checks"] == {"env_assertions": [], "actions": [], "communicate": []}  # max_steps: none run
    assert awm(["bench", "tau2", "score", str(path), "--tau2-data", str(FIXTURE)]) == 0
    assert "agree 4/5" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"simulations": "no"}))
    assert awm(["bench", "tau2", "score", str(bad), "--tau2-data", str(FIXTURE)]) == 2


def test_cli_refusals(tmp_path, capsys):
    base = ["bench", "tau2", "run", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o")]
    assert awm(base + ["--domain", "airline"]) == 2
    assert "--tau2-data" in capsys.readouterr().err
    assert awm(base + ["--domain", "retail", "--tau2-data", str(FIXTURE)]) == 2
    assert "retail" in capsys.readouterr().err
    no_db = tmp_path / "data"
    (no_db / "domains").mkdir(parents=True)
    import shutil

    shutil.copytree(FIXTURE / "domains" / "airline", no_db / "domains" / "airline")
    shutil.copytree(FIXTURE / "user_simulator", no_db / "user_simulator")
    (no_db / "domains" / "airline" / "db.json").unlink()
    assert awm(base + ["--domain", "airline", "--tau2-data", str(no_db)]) == 2
    assert "--airline-db" in capsys.readouterr().err
    assert awm(base + ["--domain", "airline", "--tau2-data", str(FIXTURE), "--task", "99"]) == 2
    assert "'99'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert awm(["bench", "tau2", "check", "--tau2-data", str(FIXTURE), "--json"]) == 0
    check = json.loads(capsys.readouterr().out)
    assert check["domains"][0]["tasks"] == 4


def test_nl_assertions_go_to_the_judge_or_are_not_scored(tmp_path):
    import shutil

    from awm_engine.bench.tau2.evaluation import evaluate_simulation
    from awm_engine.bench.tau2.run import make_nl_judge, outcome_fields
    from awm_engine.bench.tau2.orchestrator import Simulation

    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURE, data_dir)
    tasks_path = data_dir / "domains" / "airline" / "tasks.json"
    tasks = json.loads(tasks_path.read_text())
    tasks[0]["evaluation_criteria"]["reward_basis"] = ["DB", "NL_ASSERTION"]  # as τ³'s retail tasks
    tasks_path.write_text(json.dumps(tasks))
    airline = Tau2Data(data_dir).domain("airline")
    task = airline.task("0")
    messages = gold_messages(airline, task)
    unjudged = asyncio.run(evaluate_simulation(airline, task, messages, "user_stop"))
    assert unjudged.reward is None and unjudged.not_scored == ["NL_ASSERTION"]
    assert unjudged.reward_breakdown == {"DB": 1.0}
    sim = Simulation("0", 0, None, messages, "user_stop", 3, 0, "", "", 0.0)
    assert outcome_fields(sim, unjudged, None)["label"] == "judge_error"
    for met, expected in ((True, 1.0), (False, 0.0)):
        reply = json.dumps({"results": [{"expectedOutcome": task.evaluation_criteria.nl_assertions[0],
                                         "reasoning": "see the cancel call", "metExpectation": met}]})
        with FakeLLMServer({"rules": [{"match": "expected outcomes", "responses": [{"content": reply}]}]}) as judge:
            grader = make_nl_judge(endpoint(judge.url))
            info = asyncio.run(evaluate_simulation(airline, task, messages, "user_stop", grader))
            asked = judge.requests[0]
        assert info.reward == expected and info.nl_assertions[0]["met"] is met
        assert asked["temperature"] == 0.0 and "assistant: None" in asked["messages"][1]["content"]
