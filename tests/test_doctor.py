"""``awm env doctor``: every problem of an environment in one list — one synthetic bad scenario per problem kind,
the known problems of the real AWM data, ``awm env test --json``'s ``problems``, and the cache front ends read."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from tinyenv import BAD_SCHEMA, BOOM, FOOTER, HEADER, SAMPLE, SCHEMA

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.verify import doctor
from awm_engine.verify.doctor import KINDS, cached_diagnosis, grouped, quick_diagnosis, statement_rows

CODE_OTHERS = ("def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
               "    return {'result': 'others'}\n")
CODE_COMPLETE = ("def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
                 "    return {'result': 'complete'}\n")
CODE_BROKEN = "def verify_task_completion(initial_db_path, final_db_path:\n    return {'result': 'others'}\n"
SQL_COUNT = ("def verify_task(initial_db_path, final_db_path):\n    import sqlite3\n"
             "    n = sqlite3.connect(final_db_path).execute('SELECT COUNT(*) FROM notes').fetchone()[0]\n"
             "    return {'notes': n}\n")
SQL_RAISES = "def verify_task(initial_db_path, final_db_path):\n    raise RuntimeError('no such column: status')\n"

HIDDEN = '''
@app.get("/api/notes", summary="List notes again", description="Same route.", tags=["notes"],
         operation_id="list_notes_again", response_model=NoteList)
async def list_notes_again():
    return NoteList(notes=[])
'''
TOOLS = HEADER + HIDDEN + BAD_SCHEMA + BOOM + FOOTER

BROKEN_SCHEMA = {"tables": [
    {"name": "notes", "ddl": "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL, "
                             "created_at DATETIME DEFAULT CURRENT_TIMESTAMP);", "indexes": []},
    {"name": "tags", "ddl": "CREATE TABLE tags (id INTEGER PRIMARY KEY, note_id INTEGER,);", "indexes": []}]}
BROKEN_SAMPLE = {"tables": [
    {"table_name": "notes", "insert_statements": ["INSERT INTO notes (id, text) VALUES (1, 'first');",
                                                  "INSERT INTO notes (id, text) VALUES (1, 'duplicate id');"]},
    {"table_name": "tags", "insert_statements": ["INSERT INTO tags (id, note_id) VALUES (1, 1), (2, 1), (3, 1);",
                                                 "INSERT INTO tags (id, note_id) VALUES (4, 1);"]}]}

# name: (code, schema, sample, tasks, {task: {mode: verifier code}})
BOTH = {"code": CODE_OTHERS, "sql": SQL_COUNT}
SCENARIOS = {
    "Clean Notes": (HEADER + FOOTER, SCHEMA, SAMPLE, 2, {0: BOTH, 1: BOTH}),
    "Broken Build": (HEADER + FOOTER, BROKEN_SCHEMA, BROKEN_SAMPLE, 1, {0: BOTH}),
    "Tool Trouble": (TOOLS, SCHEMA, SAMPLE, 1, {0: BOTH}),
    "Syntax Broken": ("def broken(:\n", SCHEMA, SAMPLE, 1, {0: BOTH}),
    "Verifier Trouble": (HEADER + FOOTER, SCHEMA, SAMPLE, 3, {0: {"code": CODE_COMPLETE, "sql": SQL_RAISES},
                                                              1: {"code": CODE_BROKEN}}),
}


def write_data(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, list] = {k: [] for k in ("gen_scenario", "gen_tasks", "gen_db", "gen_sample", "gen_envs",
                                               "gen_verifier", "gen_verifier.pure_code")}
    for name, (code, schema, sample, n_tasks, verifiers) in SCENARIOS.items():
        files["gen_scenario"].append({"name": name, "description": f"{name} test env"})
        files["gen_tasks"].append({"scenario": name, "tasks": [f"Task {i} of {name}." for i in range(n_tasks)]})
        files["gen_db"].append({"scenario": name, "db_schema": schema})
        files["gen_sample"].append({"scenario": name, "sample_data": sample})
        files["gen_envs"].append({"scenario": name, "full_code": code})
        for task, modes in verifiers.items():
            for mode, source in modes.items():
                file = "gen_verifier" if mode == "sql" else "gen_verifier.pure_code"
                files[file].append({"scenario": name, "task_idx": task, "verification": {"code": source}})
    files["gen_tasks"].append({"scenario": "verifier trouble", "tasks": ["a duplicate row"]})  # a data warning
    for file, rows in files.items():
        (root / f"{file}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module")
def doctored(tmp_path_factory):
    """``awm env doctor --all --json`` over the synthetic data, run once for the module (with its own cache)."""
    root = tmp_path_factory.mktemp("doctor")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWM_CACHE_DIR", str(root / "cache"))
        mp.setenv("AWM_LOAD_TIMEOUT", "5")
        data = write_data(root / "data")
        import io
        from contextlib import redirect_stdout

        out = io.StringIO()
        with redirect_stdout(out):
            code = awm(["env", "doctor", "--all", "--json", "--data", str(data), "--workers", "2"])
        yield code, json.loads(out.getvalue()), data, root / "cache"


def problems_of(payload, key: str) -> list[dict]:
    return next(s for s in payload["scenarios"] if s["scenario"] == key)["problems"]


def kinds_of(payload, key: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in problems_of(payload, key):
        out.setdefault(p["kind"], []).append(p)
    return out


def test_doctor_json_shape_and_exit_code(doctored):
    code, payload, _, _ = doctored
    assert code == 0  # it ran: problems are its output, not a failure
    assert payload["format_version"] == doctor.FORMAT_VERSION
    assert {s["scenario"] for s in payload["scenarios"]} == {
        "clean_notes", "broken_build", "tool_trouble", "syntax_broken", "verifier_trouble"}
    for scenario in payload["scenarios"]:
        for p in scenario["problems"]:
            assert p["kind"] in KINDS and p["severity"] in doctor.SEVERITIES and p["scenario"] == scenario["scenario"]
            assert set(p) >= {"kind", "severity", "scenario", "task", "tool", "table", "message", "detail"}
        assert scenario["counts"] == {s: sum(p["severity"] == s for p in scenario["problems"])
                                      for s in doctor.SEVERITIES}
    assert sum(payload["counts"].values()) == sum(len(s["problems"]) for s in payload["scenarios"])


def test_a_clean_environment_has_no_problems(doctored):
    _, payload, _, _ = doctored
    assert problems_of(payload, "clean_notes") == []


def test_failed_ddl_and_inserts_with_the_rows_they_cost(doctored):
    _, payload, _, _ = doctored
    found = kinds_of(payload, "broken_build")
    (ddl,) = found["failed_ddl"]
    assert ddl["severity"] == "error" and ddl["table"] == "tags" and "syntax error" in ddl["message"]
    assert ddl["detail"].startswith("CREATE TABLE tags") and ddl["rows"] == 4  # a 3-row INSERT and a 1-row one
    inserts = found["failed_insert"]
    assert sorted((p["table"], p["rows"]) for p in inserts) == [("notes", 1), ("tags", 1), ("tags", 3)]
    duplicate = next(p for p in inserts if p["table"] == "notes")
    assert "UNIQUE constraint failed" in duplicate["message"] and "duplicate id" in duplicate["detail"]
    assert all("the DDL of tags failed" in p["message"] for p in inserts if p["table"] == "tags")
    (timed,) = found["time_dependent"]
    assert timed["severity"] == "info" and "CURRENT_TIMESTAMP" in timed["detail"]


def test_hidden_routes_uncallable_tools_and_5xx_with_traceback(doctored):
    _, payload, _, _ = doctored
    found = kinds_of(payload, "tool_trouble")
    (hidden,) = found["hidden_route"]
    assert hidden["tool"] == "list_notes" and "list_notes_again" in hidden["message"]
    (schema,) = found["invalid_schema"]
    assert schema["tool"] == "note_miles" and "is not of type 'array'" in schema["detail"]
    assert "uncallable under the reference" in schema["message"]
    (boom,) = found["tool_5xx"]
    assert boom["tool"] == "boom" and "answered 500" in boom["message"]
    assert "Traceback" in boom["detail"] and "ValueError: kaboom" in boom["detail"]


def test_load_failure(doctored):
    _, payload, _, _ = doctored
    found = kinds_of(payload, "syntax_broken")
    (load,) = found["load_failure"]
    assert load["severity"] == "error" and "syntax" in load["detail"].lower()
    assert "verifier_error" not in found and "solved_at_start" not in found  # verifiers need only the database


def test_verifier_problems_and_missing_verifiers(doctored):
    _, payload, _, _ = doctored
    found = kinds_of(payload, "verifier_trouble")
    (solved,) = found["solved_at_start"]
    assert (solved["task"], solved["mode"], solved["severity"]) == (0, "code", "error")
    errors = {(p["task"], p["mode"]): p for p in found["verifier_error"]}
    assert set(errors) == {(0, "sql"), (1, "code")}
    assert "fails on the initial database" in errors[0, "sql"]["message"]
    assert "no such column: status" in errors[0, "sql"]["detail"]
    assert "fails to load" in errors[1, "code"]["message"]
    missing = {(p["task"], p["mode"]): p["severity"] for p in found["no_verifier"]}
    assert missing == {(1, "sql"): "info", (2, None): "error"}
    (duplicate,) = found["data_issue"]
    assert duplicate["severity"] == "warning" and "duplicate" in duplicate["message"]


def test_results_are_cached_for_front_ends(doctored):
    _, payload, data, cache = doctored
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWM_CACHE_DIR", str(cache))
        catalog = Catalog.load([data])
        cached = cached_diagnosis(catalog.get("broken_build"))
        assert cached is not None and cached.complete
        assert [p.to_dict() for p in cached.problems] == problems_of(payload, "broken_build")
        assert quick_diagnosis(catalog.get("tool_trouble")).counts() == next(
            s for s in payload["scenarios"] if s["scenario"] == "tool_trouble")["counts"]


def test_text_output_groups_problems(doctored, capsys):
    _, _, data, cache = doctored
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWM_CACHE_DIR", str(cache))
        assert awm(["env", "doctor", "verifier_trouble", "broken_build", "--data", str(data), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "verifier_trouble" in out and "solved_at_start" in out and "failed_ddl" in out
    assert "CREATE TABLE tags" in out  # the statement under its problem


def test_static_problems_without_running_anything(tmp_path):
    catalog = Catalog.load([write_data(tmp_path / "data")])
    quick = quick_diagnosis(catalog.get("tool_trouble"), catalog)
    assert not quick.complete
    assert {p.kind for p in quick.problems} == {"hidden_route", "invalid_schema"}


def test_a_check_that_fails_is_reported_not_raised(tmp_path, monkeypatch):
    catalog = Catalog.load([write_data(tmp_path / "data")])

    def explode(scenario):
        raise ValueError("malformed beyond words")

    monkeypatch.setattr(doctor, "hidden_routes", explode)
    problems = doctor.static_problems(catalog.get("tool_trouble"), catalog)
    (failed,) = [p for p in problems if p.kind == "check_failed"]
    assert "malformed beyond words" in failed.detail and failed.severity == "error"


def test_bad_usage_exits_2(tmp_path, capsys):
    data = write_data(tmp_path / "data")
    assert awm(["env", "doctor", "nope", "--data", str(data)]) == 2
    assert awm(["env", "doctor", "clean_notes", "--all", "--data", str(data)]) == 2


def test_env_test_json_carries_the_problems(tmp_path, capsys):
    data = write_data(tmp_path / "data")
    awm(["env", "test", "--scenario", "tool_trouble", "--data", str(data), "--json", "--workers", "1"])
    (report,) = json.loads(capsys.readouterr().out)
    assert {"hidden_route", "invalid_schema", "tool_5xx"} <= {p["kind"] for p in report["problems"]}
    assert report["problem_counts"]["error"] >= 1


def test_statement_rows():
    assert statement_rows("INSERT INTO t (a, b) VALUES (1, 'x');") == 1
    assert statement_rows("INSERT INTO t VALUES (1, '(a), (b)'), (2, lower('Y')) , (3, NULL);") == 3
    assert statement_rows("INSERT INTO t SELECT * FROM u") == 1 and statement_rows(None) == 1


def test_grouped_collapses_tasks():
    problems = [doctor.Problem("no_verifier", "info", "s", "no sql-mode verifier", task=i, mode="sql")
                for i in (0, 1, 2, 4)]
    problems.append(doctor.Problem("hidden_route", "warning", "s", "m", tool="t"))
    assert [where for where, _ in grouped(problems)] == ["tasks 0–2, 4 (sql)", "tool t"]


def test_real_data_known_problems(awm_real, capsys):
    """SurveyMonkey Apply's failed DDL and the 22 INSERTs it costs; GoFundMe's route hidden over MCP."""
    assert awm(["env", "doctor", "--all", "--json", "--data", str(awm_real), "--workers", "2"]) == 0
    payload = json.loads(capsys.readouterr().out)
    survey = kinds_of(payload, "surveymonkey_apply")
    (ddl,) = survey["failed_ddl"]
    assert ddl["table"] == "form_questions" and ddl["rows"] == 22 and "syntax error" in ddl["message"]
    assert len(survey["failed_insert"]) == 22
    assert sum(p["rows"] for p in survey["failed_insert"]) == 22
    assert {p["table"] for p in survey["failed_insert"]} == {"form_questions", "form_question_options",
                                                             "submission_answers"}
    (hidden,) = kinds_of(payload, "gofundme")["hidden_route"]
    assert hidden["tool"] == "create_one_time_donation_intent"
    assert "create_recurring_donation_intent" in hidden["message"]
