"""Synthesis (`awm gen`): every stage executes what it generated in the sandbox and repairs it from the errors;
bad model output is retried and reported; a killed run resumes without redoing finished work."""
from __future__ import annotations

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
from awm_engine.data.catalog import Catalog
from awm_engine.gen.diversity import DiversityFilter
from awm_engine.gen.parse import BadReply, parse_code, parse_json
from awm_engine.gen.status import load_status

sys.path.insert(0, str(Path(__file__).parent))
from gen_script import SCENARIO, SEEDS, script  # noqa: E402

AWM = [sys.executable, "-m", "awm_engine.cli"]


def _seeds(tmp_path: Path) -> Path:
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SEEDS))
    return path


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / ".awm-gen" / "events.jsonl").read_text().splitlines()]


def _gen_args(tmp_path: Path, url: str, out: Path, *extra: str) -> list[str]:
    return ["gen", "all", "--seeds", str(_seeds(tmp_path)), "--out", str(out), "--model", "gen", "--base-url", url,
            "-n", "1", "--tasks", "3", "--verifier-mode", "code", *extra]


def test_gen_all_repairs_every_stage_and_the_result_works(tmp_path, capsys):
    out = tmp_path / "gen"
    with FakeLLMServer(script()) as llm:
        assert awm(_gen_args(tmp_path, llm.url, out, "--json")) == 0
        status = json.loads(capsys.readouterr().out)
        requests = list(llm.requests)
    events = _events(out)
    attempts = [e for e in events if e["kind"] == "attempt"]
    failed = {(e["stage"], e["attempt"]): e["errors"] for e in attempts if not e["ok"]}
    # each stage failed first and was repaired from the errors it produced
    assert "not JSON" in failed[("scenario", 1)][0]
    assert "cut off by the token limit" in failed[("task", 1)][0]
    assert any("Table books" in e for e in failed[("db", 1)])  # broken DDL, executed in the sandbox
    assert any("FOREIGN KEY" in e for e in failed[("sample", 1)])  # failing inserts
    assert "refused" in failed[("spec", 1)][0] and "empty reply" in failed[("spec", 2)][0]
    assert "does not start" in failed[("env", 1)][0] and "missing settings" in failed[("env", 1)][0]
    assert "at import (line " in failed[("env", 1)][0]  # where (in the code as run), for the retry and the user
    assert ": raise RuntimeError('the server cannot start" in failed[("env", 1)][0]
    raised = [e for (stage, n), e in failed.items() if stage == "verifier-code" and n == 1]
    assert raised and "borrowings" in raised[0][0]
    assert any("returns complete on the initial database" in e[0]
               for (stage, n), e in failed.items() if stage == "verifier-code" and n == 2)
    # the diversity filter turned away the near-copy of a seed
    assert any("rejected 'Good Reads Club'" in err for e in attempts if e["stage"] == "scenario" for err in e["errors"])
    # retries carry the summarized errors; the summary was asked of the model
    db_retry = [r for r in requests if "stage: db ·" in r["messages"][-1]["content"] and "attempt 2/" in
                r["messages"][-1]["content"]][0]
    assert "Earlier attempts at this step failed" in db_retry["messages"][-1]["content"]
    assert any("summarize errors of db" in r["messages"][-1]["content"] for r in requests)
    # the status: every stage done, tokens counted, the Problems list present
    row = status["scenarios"][0]
    assert row["name"] == SCENARIO["name"] and row["finished"]
    assert all(s["state"] == "done" for s in row["stages"].values())
    assert row["stages"]["db"]["attempts"] == 2 and row["usage"]["prompt_tokens"] > 0
    assert row["problems"] is not None and row["problems"]["error"] == 0
    assert status["stages"]["env"]["requests"] >= 2
    # one stage on its own, for the scenarios already there: sql-mode verifiers next to the code-mode ones
    with FakeLLMServer(script()) as llm:
        assert awm(["gen", "verifier", "--out", str(out), "--model", "gen", "--base-url", llm.url,
                    "--verifier-mode", "sql"]) == 0
        asked = [r["messages"][-1]["content"].split("\n", 1)[0] for r in llm.requests]
    capsys.readouterr()
    assert len(asked) == 3 and all("stage: verifier-sql" in h for h in asked)
    # the output is an AWM data directory every other verb uses
    catalog = Catalog.load([out])
    assert not catalog.errors
    scenario = catalog.get("tiny_lending_library")
    assert len(scenario.tasks) == 3 and len(scenario.verifier_refs["code"]) == 3
    assert len(scenario.verifier_refs["sql"]) == 3
    assert awm(["db", "build", "--data", str(out), "--out", str(tmp_path / "dbs")]) == 0
    assert "built 1 database in" in capsys.readouterr().out
    assert awm(["env", "test", "--data", str(out), "--json"]) == 0
    health = json.loads(capsys.readouterr().out)
    assert health[0]["status"] == "ok" and health[0]["tools"] == 2
    # its verifier decides a rollout: an agent that borrows Dune completes task 0
    agent = {"responses": [{"tool_calls": [{"name": "borrow_book", "arguments": {"book_id": 1}}]},
                           {"content": "Dune is borrowed."}]}
    with FakeLLMServer(agent) as llm:
        assert awm(["agent", "run", "--data", str(out), "--scenario", "tiny_lending_library", "--task", "0",
                    "--policy", "llm", "--model", "a", "--base-url", llm.url, "--mode", "native", "--verify", "code",
                    "--out", str(tmp_path / "run"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verification"]["label"] == "complete"


def test_a_failing_endpoint_is_reported_per_scenario_not_a_crash(tmp_path, capsys):
    out = tmp_path / "gen"
    out.mkdir()
    other = {"name": "Second Shop", "description": "A small shop."}
    (out / "gen_scenario.jsonl").write_text(json.dumps(SCENARIO) + "\n" + json.dumps(other) + "\n")
    replies = {"rules": [
        {"match": ["stage: task ·", "Tiny Lending"], "responses": [{"status": 500, "body": "model overloaded"}]},
        {"match": ["stage: task ·", "Second Shop"], "responses": [{"content": json.dumps({"tasks": ["a", "b"]})}]},
        {"match": "summarize errors", "responses": [{"content": ""}]}]}
    with FakeLLMServer(replies) as llm:
        code = awm(["gen", "task", "--out", str(out), "--model", "g", "--base-url", llm.url, "--retries", "1",
                    "--tasks", "2", "--endpoint-waits", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Tiny Lending Library: task: request to http://127.0.0.1:" in err
    assert "failed (after 1 waits): InternalServerError" in err
    rows = [json.loads(line) for line in (out / "gen_tasks.jsonl").read_text().splitlines()]
    assert rows == [{"scenario": "Second Shop", "tasks": ["a", "b"]}]  # the other scenario was not held back
    stages = {e["scenario"]: e for e in _events(out) if e["kind"] == "stage"}
    assert stages["Tiny Lending Library"]["status"] == "failed" and stages["Tiny Lending Library"]["attempts"] == 2
    # nothing listening at all is the same: a per-scenario failure
    assert awm(["gen", "task", "--out", str(out), "--model", "g", "--base-url", "http://127.0.0.1:9/v1",
                "--retries", "0", "--endpoint-waits", "0"]) == 1
    assert "request to http://127.0.0.1:9/v1 failed" in capsys.readouterr().err


def test_a_rate_limited_endpoint_is_waited_for_without_using_up_attempts(tmp_path, capsys):
    out = tmp_path / "gen"
    out.mkdir()
    (out / "gen_scenario.jsonl").write_text(json.dumps(SCENARIO) + "\n")
    busy = [{"status": 429, "body": "slow down"}] * 4 + [{"content": json.dumps({"tasks": ["a", "b"]})}]
    with FakeLLMServer({"rules": [{"match": "stage: task ·", "responses": busy}]}) as llm:
        assert awm(["gen", "task", "--out", str(out), "--model", "g", "--base-url", llm.url, "--retries", "0",
                    "--tasks", "2", "--endpoint-waits", "2"]) == 0
    capsys.readouterr()
    attempts = [e for e in _events(out) if e["kind"] == "attempt"]
    assert len(attempts) == 1 and attempts[0]["ok"]  # the 429s cost waits, not the stage's only attempt


@pytest.mark.parametrize("text,problem", [("", "empty reply"), ("I'm sorry, I can't do that.", "refused"),
                                          ('{"tables": [{"name": "a", "ddl": "CREATE', "cut off"),
                                          ("no json at all here", "not JSON")])
def test_bad_replies_are_named(text, problem):
    finish = "length" if problem == "cut off" else "stop"
    with pytest.raises(BadReply, match=problem):
        parse_json(text, finish)


def test_replies_are_read_from_fences_prose_and_near_json():
    assert parse_json('Here:\n```json\n{"tasks": ["a"]}\n```') == {"tasks": ["a"]}
    assert parse_json('The answer is {"a": 1} as requested.') == {"a": 1}
    assert parse_json('{"a": [1, 2,]}') == {"a": [1, 2]}  # repaired, as the reference does
    assert parse_code('```python\nimport os\nx = 1\n```').startswith("import os")
    assert parse_code('{"full_code": "import os\\nx = 1\\n"}') == "import os\nx = 1\n"
    with pytest.raises(BadReply, match="does not parse"):
        parse_code("import os\ndef broken(:\n")
    for hostile in ("import os\nx = " + "(" * 200_000, "import os\x00\nx = 1"):
        with pytest.raises(BadReply, match="does not parse"):
            parse_code(hostile)


def test_diversity_filter_lexical_and_embeddings():
    import asyncio

    async def go():
        lexical = DiversityFilter()
        await lexical.admit(SEEDS[0])
        near = {"name": "Good Reads Club", "description": SEEDS[0]["description"]}
        assert not (await lexical.check(near))[0].keep
        assert not (await lexical.check({"name": "goodreads", "description": "other"}))[0].keep  # same name
        assert (await lexical.check(SCENARIO))[0].keep
        with FakeLLMServer({"responses": [{"content": ""}]}) as llm:
            from awm_engine.gen.llm import GenClient

            client = GenClient(llm.url, "m")
            embedded = DiversityFilter(lambda texts: client.embed(texts, "emb"))
            await embedded.admit(SEEDS[0])
            verdict, _ = await embedded.check(near)
            kept, _ = await embedded.check(SCENARIO)
            await client.close()
            assert any(r.get("model") == "emb" for r in llm.requests)
        assert not verdict.keep and "embedding similarity" in verdict.reason and kept.keep

    asyncio.run(go())


def test_killed_run_resumes_and_redoes_nothing_finished(tmp_path):
    out = tmp_path / "gen"
    slow = script()
    for rule in slow["rules"]:  # the environment stage is slow: the kill lands while it runs
        if rule["match"][0] == "stage: env ·":
            rule["responses"][0]["delay"] = 30
    (tmp_path / "tmp").mkdir()  # what the killed run leaves stays in the test's own directory
    env = {**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path / "tmp")}
    with FakeLLMServer(slow) as llm:
        proc = subprocess.Popen(AWM + _gen_args(tmp_path, llm.url, out), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True, env=env)
        spec = out / "gen_spec.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and not (spec.exists() and spec.read_text().endswith("\n")):
            time.sleep(0.1)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert spec.exists() and not (out / "gen_envs.jsonl").exists()
        with open(out / "gen_envs.jsonl", "a") as fh:  # a torn line, as a kill in the middle of a write leaves
            fh.write('{"scenario": "Tiny Lending Library", "full_co')
        before = {f.name: f.read_text() for f in out.glob("gen_*.jsonl") if f.name != "gen_envs.jsonl"}
        seen = len(llm.requests)
        for rule in slow["rules"]:
            rule["responses"][0].pop("delay", None)
        # without --resume an existing run is refused, not overwritten
        refused = subprocess.run(AWM + _gen_args(tmp_path, llm.url, out), capture_output=True, text=True, env=env)
        assert refused.returncode == 2 and "--resume" in refused.stderr
        # --resume alone: the model, endpoint and settings are the run's own
        done = subprocess.run(AWM + ["gen", "all", "--out", str(out), "--resume"], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        again = [r["messages"][-1]["content"].split("\n", 1)[0] for r in llm.requests[seen:] if "messages" in r]
    # only the env and verifier stages (and their error summaries) were asked again
    assert again and all("stage: env" in h or "stage: verifier" in h or "summarize errors of" in h for h in again)
    for name, text in before.items():  # finished rows were kept as they were
        assert (out / name).read_text() == text
    envs = (out / "gen_envs.jsonl").read_text().splitlines()
    assert len(envs) == 1 and json.loads(envs[0])["full_code"]
    status = load_status(out)
    assert status.scenarios[0].finished and len(status.scenarios) == 1
    assert status.config["num_tasks"] == 3 and status.config["verifier_mode"] == "code"
    assert len((out / "gen_verifier.pure_code.jsonl").read_text().splitlines()) == 3
    assert not (out / "gen_verifier.jsonl").exists()


def test_gen_status_and_bad_input(tmp_path, capsys):
    assert awm(["gen", "status", str(tmp_path / "nothing")]) == 2
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("")
    assert awm(["gen", "all", "--seeds", str(seeds), "--out", str(tmp_path / "o"), "--model", "m", "--base-url",
                "http://127.0.0.1:9/v1", "-n", "1"]) == 2
    assert "holds no seeds" in capsys.readouterr().err
    seeds.write_text('{"description": "no name"}\n')
    assert awm(["gen", "scenario", "--seeds", str(seeds), "--out", str(tmp_path / "o"), "--model", "m",
                "--base-url", "http://127.0.0.1:9/v1", "-n", "1"]) == 2
    assert "needs a 'name'" in capsys.readouterr().err


def test_replies_of_the_wrong_shape_are_retried_never_a_crash(tmp_path, capsys):
    """Valid JSON holding the wrong types (a dict where a list belongs, numbers where code belongs …) at every
    stage: each is a failed attempt with a clear error, and the retry repairs it."""
    wrong = {"scenario": json.dumps({"scenarios": {"name": "x"}}),
             "task": json.dumps({"tasks": {"first": "Borrow Dune"}}),
             "db": json.dumps({"tables": {"users": "CREATE TABLE users (id INTEGER)"}}),
             "sample": json.dumps({"tables": [{"table_name": "users", "insert_statements": "INSERT INTO users"}]}),
             "spec": json.dumps({"api_groups": {"Books": []}}),
             "env": json.dumps({"full_code": 5}),
             "verifier-code": json.dumps({"python_code": ["def verify_task_completion(): pass"]})}
    replies = script()
    firsts = {}
    for rule in replies["rules"]:
        if isinstance(rule["match"], list) and len(rule["match"]) == 2 and rule["match"][1] == "attempt 1/":
            stage = rule["match"][0][len("stage: "):-2]
            rule["responses"] = [{"content": wrong[stage]}]
            firsts[stage] = True
    replies["rules"] = [r for r in replies["rules"] if not (isinstance(r["match"], list) and
                                                            r["match"][1:] == ["attempt 2/"])]
    assert set(firsts) == set(wrong)
    out = tmp_path / "gen"
    with FakeLLMServer(replies) as llm:
        assert awm(_gen_args(tmp_path, llm.url, out, "--json")) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["scenarios"][0]["finished"]
    first = {e["stage"]: e for e in _events(out) if e["kind"] == "attempt" and e["attempt"] == 1}
    assert all(not first[stage]["ok"] and first[stage]["errors"] for stage in wrong)
    assert "'tasks' is a dict" in first["task"]["errors"][0]
    assert "must be a non-empty list" in first["db"]["errors"][0]
    assert "list of strings" in first["sample"]["errors"][0]
    assert "'api_groups' must be a non-empty list" in first["spec"]["errors"][0]
    assert "not Python code" in first["env"]["errors"][0]
    assert "'python_code' must hold" in first["verifier-code"]["errors"][0]


def test_the_readme_demo_files_match_the_test_script():
    """assets/gen_demo/ (the README's offline example) is the script these tests use, not a drifting copy."""
    root = Path(__file__).parent.parent / "assets" / "gen_demo"
    assert json.loads((root / "script.json").read_text()) == script()
    assert [json.loads(line) for line in (root / "seeds.jsonl").read_text().splitlines()] == SEEDS


def test_the_environment_check_passes_the_released_environments(awm_real, tmp_path):
    """The env stage's defect test on real pipeline output (data these tests did not write): every tool of the
    three real environments is called and none is counted as a code defect (their "not found" 500s are notes)."""
    import asyncio

    from awm_engine.data.names import normalize_scenario_name
    from awm_engine.gen.checks import check_environment
    from awm_engine.runtime.pool import EnvPool

    files = {"scenario": ("gen_scenario.jsonl", "name"), "tasks": ("gen_tasks.jsonl", "scenario"),
             "db": ("gen_db.jsonl", "scenario"), "sample": ("gen_sample.jsonl", "scenario"),
             "envs": ("gen_envs.jsonl", "scenario")}

    def rows_for(key: str) -> dict:
        found = {}
        for kind, (name, field) in files.items():
            for line in (awm_real / name).read_text().splitlines():
                row = json.loads(line)
                if normalize_scenario_name(str(row.get(field, ""))) == key:
                    found[kind] = row
        return found

    async def go():
        async with EnvPool(workers=1) as pool:
            return {key: await check_environment(pool, rows_for(key), tmp_path)
                    for key in ("gofundme", "rover", "surveymonkey_apply")}

    checks = asyncio.run(go())
    for key, check in checks.items():
        assert check.loads and check.calls == len(check.tools) >= 10, key
        assert check.errors == [], (key, check.errors)
    assert sum(len(c.notes) for c in checks.values()) > 0  # their 500s were seen, and classified as notes


def test_scenarios_stream_through_the_stages_without_waiting_for_each_other(tmp_path, capsys):
    """No barrier between stages: while one scenario's schema request hangs, another goes all the way through."""
    replies = script()
    replies["rules"] = [r for r in replies["rules"] if not (isinstance(r["match"], list) and len(r["match"]) == 2)]
    slow_db = {"match": ["stage: db ·", "scenario: Slow Archive"], "responses": [
        {"content": replies["rules"][[r["match"] for r in replies["rules"]].index(["stage: db ·"])]["responses"][0]
         ["content"], "delay": 8}]}
    replies["rules"].insert(1, slow_db)
    seeds = tmp_path / "names.txt"
    seeds.write_text("Slow Archive\nQuick Shelf\n")
    out = tmp_path / "gen"
    with FakeLLMServer(replies) as llm:
        assert awm(["gen", "all", "--seeds", str(seeds), "--include-seeds", "--out", str(out), "--model", "g",
                    "--base-url", llm.url, "--tasks", "3", "--verifier-mode", "code", "-j", "2", "--no-doctor",
                    "--json"]) == 0
    capsys.readouterr()
    finished = {(e["scenario"], e["stage"]): e["time"] for e in _events(out) if e["kind"] == "stage"}
    assert finished[("Quick Shelf", "verifier")] < finished[("Slow Archive", "db")]
    assert load_status(out).scenarios[0].finished and load_status(out).scenarios[1].finished


def test_too_few_new_scenarios_is_said_and_exits_1(tmp_path, capsys):
    """The model keeps proposing what is already kept: generation stops after retries + 1 empty batches and
    says how many scenarios it kept and why the rest were rejected."""
    replies = script()
    out = tmp_path / "gen"
    with FakeLLMServer(replies) as llm:
        code = awm(["gen", "scenario", "--seeds", str(_seeds(tmp_path)), "-n", "3", "--out", str(out), "--model",
                    "g", "--base-url", llm.url, "--retries", "1"])
    err = capsys.readouterr().err
    assert code == 1 and "only 1 of the 3 new scenarios" in err and "is taken" in err
    rows = (out / "gen_scenario.jsonl").read_text().splitlines()
    assert [json.loads(r)["name"] for r in rows] == [SCENARIO["name"]]


def test_fake_llm_refuses_a_busy_port(tmp_path, capsys):
    """`awm fake-llm` on a port another process holds exits 3 instead of printing a URL that process answers."""
    import socket

    script_file = tmp_path / "s.json"
    script_file.write_text(json.dumps({"responses": [{"content": "hi"}]}))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        assert awm(["fake-llm", "--script", str(script_file), "--port", str(port)]) == 3
    err = capsys.readouterr().err
    assert "already in use" in err and "http://" not in err


def test_status_reads_odd_records_field_by_field(tmp_path, capsys):
    """`awm gen status` on records with odd fields (text where numbers belong, a dict for the errors, lines that
    are not objects): each odd field is left out, never a traceback."""
    out = tmp_path / "gen"
    (out / ".awm-gen").mkdir(parents=True)
    (out / ".awm-gen" / "config.json").write_text(json.dumps({"model": ["odd"], "price_in": "free"}))
    (out / "gen_scenario.jsonl").write_text(json.dumps(SCENARIO) + "\n" + json.dumps({"name": 5}) + "\n[1]\n")
    name = SCENARIO["name"]
    events = [{"kind": "attempt", "scenario": name, "stage": "db", "attempt": "one", "ok": "yes",
               "prompt_tokens": "many", "errors": {"a": 1}, "seconds": "slow", "task": True},
              {"kind": "stage", "scenario": name, "stage": "db", "status": {"x": 1}, "last_error": ["a", "b"]},
              {"kind": "problems", "scenario": name, "counts": {"error": "2"}, "summary": None},
              {"kind": "summary", "scenario": name, "stage": "nonsense", "prompt_tokens": -5},
              {"kind": 7}]
    (out / ".awm-gen" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + "not json\n")
    status = load_status(out)
    cell = status.scenarios[0].cells["db"]
    assert cell.attempts == 1 and cell.state == "failed" and cell.history[0].ok is False
    assert cell.history[0].prompt_tokens == 0 and cell.history[0].task is None
    assert cell.history[0].errors == ["{'a': 1}"] and cell.last_error == "['a', 'b']"
    # left out: the line that is not JSON, the record of unknown kind, the summary of an unknown stage
    assert status.scenarios[0].problems == {"error": 2} and status.skipped_records == 3
    assert "3 record(s)" in status.warning
    assert status.cost(status.scenarios[0].usage) is None
    assert awm(["gen", "status", str(out)]) == 0
    assert awm(["gen", "status", str(out), "--json"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_scenario_diversity_by_embeddings_through_the_cli(tmp_path, capsys):
    out = tmp_path / "gen"
    with FakeLLMServer(script()) as llm:
        assert awm(["gen", "scenario", "--seeds", str(_seeds(tmp_path)), "-n", "1", "--out", str(out), "--model",
                    "g", "--base-url", llm.url, "--embedding-model", "emb-model"]) == 0
        embedded = [r for r in llm.requests if r.get("model") == "emb-model"]
    capsys.readouterr()
    assert embedded  # the seeds and the candidates were embedded by the endpoint
    rejections = [err for e in _events(out) if e["stage"] == "scenario" for err in e.get("errors", [])]
    assert any("Good Reads Club" in r and "embedding similarity" in r for r in rejections)
    assert [json.loads(r)["name"] for r in (out / "gen_scenario.jsonl").read_text().splitlines()] == [SCENARIO["name"]]


def test_seeds_unknown_scenarios_and_a_second_writer(tmp_path, capsys):
    from awm_engine.eval.batch import lock_run_dir
    from awm_engine.gen.stage_scenario import read_seeds

    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(SEEDS[0]).encode() + b"\n\n# a comment\nPlain Name\n")
    assert [s["name"] for s in read_seeds(bom)] == ["Goodreads", "Plain Name"]
    out = tmp_path / "gen"
    out.mkdir()
    (out / "gen_scenario.jsonl").write_text(json.dumps(SCENARIO) + "\n")
    assert awm(["gen", "task", "--out", str(out), "--model", "g", "--base-url", "http://127.0.0.1:9/v1",
                "--scenario", "No Such Place"]) == 2
    assert "no scenario no_such_place" in capsys.readouterr().err
    config = out / ".awm-gen" / "config.json"
    before = (config.read_text(), config.stat().st_mtime_ns)
    handle = lock_run_dir(out)  # another awm process is writing there
    try:
        assert awm(["gen", "task", "--out", str(out), "--model", "other", "--base-url", "http://127.0.0.1:9/v1"]) == 2
        assert "being written by another awm process" in capsys.readouterr().err
        assert (config.read_text(), config.stat().st_mtime_ns) == before  # nothing was touched
    finally:
        handle.close()


def test_unkind_seeds_relative_out_and_kept_stages(tmp_path, capsys, monkeypatch):
    """Seeds that are not objects or normalize to nothing are errors; a repeated key is left out with a warning; a
    relative --out works (the sandboxed checks get absolute paths); a stage that kept a failing attempt exits 1."""
    from awm_engine.gen.stage_scenario import SeedError, read_seeds

    for bad, why in (('[1, 2]', "not list"), ("null", "not NoneType"), ("東京", "normalizes to an empty key"),
                     ('{"name": "A", "description": 7}', "'description' must be a string")):
        path = tmp_path / "bad.txt"
        path.write_text(bad + "\n")
        with pytest.raises(SeedError, match=why):
            read_seeds(path)
    notes: list[str] = []
    path = tmp_path / "dupes.txt"
    path.write_text("Goodreads\ngoodreads!\n")
    assert [s["name"] for s in read_seeds(path, notes)] == ["Goodreads"] and "same key" in notes[0]
    # an empty or missing --out for a single stage: said, nothing created
    assert awm(["gen", "env", "--out", str(tmp_path / "missing"), "--model", "g", "--base-url", "http://x/v1"]) == 2
    assert "no scenarios in" in capsys.readouterr().err and not (tmp_path / "missing").exists()
    # relative --out; the environment never passes its check (a defect in every call): kept, exit 1
    replies = script()
    broken = replies["rules"][[r["match"] for r in replies["rules"]].index(["stage: env ·"])]["responses"][0]
    broken["content"] = broken["content"].replace("query = session.query(Book)", "query = session.query(Bok)")
    monkeypatch.chdir(tmp_path)
    with FakeLLMServer(replies) as llm:
        code = awm(["gen", "all", "--seeds", str(_seeds(tmp_path)), "--out", "rel", "--model", "gen",
                    "--base-url", llm.url, "-n", "1", "--tasks", "3", "--verifier-mode", "code", "--retries", "2",
                    "--no-doctor"])
    err = capsys.readouterr().err
    assert code == 1 and "kept their best attempt" in err and "env: tool list_books" in err and "NameError" in err
    status = load_status(tmp_path / "rel")
    cells = status.scenarios[0].cells
    assert all(cells[s].state == "done" for s in ("task", "db", "sample", "spec", "verifier"))
    assert cells["env"].state == "kept"


def test_a_generation_run_leaves_nothing_in_the_temporary_directory(tmp_path):
    """Sandboxes, the verifier host's workspace and the pool's directories are all removed when awm exits."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "gen"
    env = {**os.environ, "TMPDIR": str(tmp), "AWM_CACHE_DIR": str(tmp_path / "cache")}
    with FakeLLMServer(script()) as llm:
        done = subprocess.run(AWM + _gen_args(tmp_path, llm.url, out), capture_output=True, text=True, env=env,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp.iterdir()) == []
    assert sorted(p.name for p in (out / ".awm-gen").iterdir()) == ["config.json", "events.jsonl"]


def test_a_stage_verb_on_real_data_with_a_malformed_row_fails_only_that_scenario(awm_real, tmp_path, capsys):
    """`awm gen verifier` on a copy of the real pipeline output whose GoFundMe `tasks` is a dict and whose
    SurveyMonkey Apply is renamed with brackets and quotes: GoFundMe fails with the reason, the others run."""
    import shutil

    data = tmp_path / "d"
    shutil.copytree(awm_real, data)
    for name in ("gen_scenario.jsonl", "gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl", "gen_envs.jsonl",
                 "gen_spec.jsonl"):
        rows = [json.loads(line) for line in (data / name).read_text().splitlines()]
        for row in rows:
            for key in ("name", "scenario"):
                if row.get(key) == "SurveyMonkey Apply":
                    row[key] = 'Survey "[Monkey]" Apply'
            if name == "gen_tasks.jsonl" and row.get("scenario") == "GoFundMe":
                row["tasks"] = {"a": "b"}
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeLLMServer(script()) as llm:
        code = awm(["gen", "verifier", "--out", str(data), "--model", "g", "--base-url", llm.url, "--retries", "0",
                    "--endpoint-waits", "0", "--verifier-mode", "code", "--tasks", "2"])
    err = capsys.readouterr().err
    assert code == 1 and "GoFundMe: verifier: its gen_tasks.jsonl row's 'tasks' is a dict" in err
    rows = [json.loads(line) for line in (data / "gen_verifier.pure_code.jsonl").read_text().splitlines()]
    assert {r["scenario"] for r in rows} == {"rover", "survey_monkey_apply"} and len(rows) == 20
