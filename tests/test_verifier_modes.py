"""A verifier's mode comes from its code, not from the file it is in (spec §2.8, §9.1), and every consumer uses
that: the catalog, ``awm catalog``, ``awm agent run``, ``awm eval run`` and ``awm verify``. Runs warn before they
start when the chosen verification has no verifier for some task, and ``--policy oracle`` is refused up front
when the data has no reference solution for the selected tasks."""
import asyncio
import json
import shutil

import pytest
from test_catalog_bad_input import make_dir, write

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import PolicyError
from awm_engine.agent.rollout import AgentConfig
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import INDEX_VERSION, Catalog, _index_cache_path
from awm_engine.data.paths import sample_envs_dir
from awm_engine.data.run_formats import EvalConfig
from awm_engine.eval.batch import preflight
from awm_engine.eval.episode import make_policy, run_episode, verification_warnings

CODE_MODE = ("import sqlite3\n\ndef verify_task_completion(initial_db_path: str, final_db_path: str, "
             "final_answer: str | None = None) -> dict:\n    return {'result': 'complete'}\n")
SQL_MODE = "def verify_task(initial_db_path: str, final_db_path: str) -> dict:\n    return {'rows': 1}\n"
NO_DEF = "def check(initial_db_path, final_db_path):\n    return {'result': 'complete'}\n"
OTHER_NAME = "def verify_main(a, b):\n    return {}\n\ndef verify_task_completion(a, b):\n    return {}\n"


def row(task, verification, scenario="alpha_shop"):
    data = {"scenario": scenario, "task_idx": task}
    if verification is not ...:
        data["verification"] = verification
    return data


@pytest.fixture
def data(tmp_path):
    """Alpha Shop, 3 tasks. gen_verifier.jsonl: task 0 code mode (as real pipeline output), task 1 no
    ``def verify_``; gen_verifier.pure_code.jsonl: task 0 sql mode, task 1 another first ``def verify_``."""
    d = make_dir(tmp_path, names=("Alpha Shop",))
    write(d / "gen_verifier.jsonl", [row(0, {"code": CODE_MODE}), row(1, {"code": NO_DEF})])
    write(d / "gen_verifier.pure_code.jsonl", [row(0, {"code": SQL_MODE}), row(1, {"code": OTHER_NAME})])
    return d


def test_rows_are_classified_by_their_code_from_either_file(data):
    catalog = Catalog.load([data])
    s = catalog.get("alpha_shop")
    code, sql = s.verifier(0, "code"), s.verifier(0, "sql")
    assert code.mode == "code" and code.function_name == "verify_task_completion"
    assert code.source.path.endswith("/gen_verifier.jsonl")  # code mode, in the sql-mode file
    assert sql.mode == "sql" and sql.function_name == "verify_task"
    assert sql.source.path.endswith("/gen_verifier.pure_code.jsonl")  # sql mode, in the code-mode file
    # neither verify_task nor verify_task_completion first: the row keeps its file's mode
    assert s.verifier(1, "sql").source.path.endswith("/gen_verifier.jsonl")
    assert s.verifier(1, "sql").function_name == "verify_task"  # no def verify_ line: the mode's default name
    assert s.verifier(1, "code").source.path.endswith("/gen_verifier.pure_code.jsonl")
    assert s.verifier(1, "code").function_name == "verify_main"  # the function that will be called
    assert (s.verifier_coverage("sql"), s.verifier_coverage("code")) == (2, 2)
    assert s.verifier(2, "sql") is None and s.verifier(2, "code") is None
    assert [i for i in catalog.issues if "verifier" in i.message] == []


@pytest.mark.parametrize("verification", [
    {"code": 12345}, {"code": ["def verify_task_completion(a, b):"]}, {"code": None}, {"raw_response": "{}"},
    "def verify_task_completion(a, b): pass", None, ...,
], ids=["code-int", "code-list", "code-null", "code-missing", "verification-str", "verification-null",
        "verification-missing"])
def test_malformed_rows_keep_their_files_mode_and_have_no_code(tmp_path, verification):
    d = make_dir(tmp_path, names=("Alpha Shop",))
    write(d / "gen_verifier.jsonl", [row(0, verification)])
    write(d / "gen_verifier.pure_code.jsonl", [row(1, verification), row(2, {"code": CODE_MODE})])
    s = Catalog.load([d]).get("alpha_shop")
    sql, code = s.verifier(0, "sql"), s.verifier(1, "code")
    assert sql is not None and code is not None  # the rows are there, as the reference would find them
    assert not sql.has_code and not code.has_code
    assert sql.function_name == "verify_task" and code.function_name == "verify_task_completion"
    assert sql.meta == {} and code.meta == {}
    assert (s.verifier_coverage("sql"), s.verifier_coverage("code")) == (0, 1)


def test_precedence_first_row_per_file_then_the_file_named_for_the_mode(tmp_path):
    d = make_dir(tmp_path, names=("Alpha Shop",))
    second = CODE_MODE.replace("'complete'", "'others'")
    write(d / "gen_verifier.jsonl", [
        row(0, {"code": CODE_MODE}),  # code mode here and in pure_code: pure_code wins (code mode's default file)
        row(0, {"code": SQL_MODE}),  # the first sql-mode row for task 0 (a different mode is no duplicate)
        row(0, {"code": SQL_MODE.replace("1", "2")}),  # a second sql-mode row: the first wins
        row(1, {"code": CODE_MODE}),  # only here: used
    ])
    write(d / "gen_verifier.pure_code.jsonl", [row(0, {"code": second}), row(0, {"code": CODE_MODE})])
    catalog = Catalog.load([d])
    s = catalog.get("alpha_shop")
    assert s.verifier(0, "code").code == second and s.verifier(0, "code").source.line == 1
    assert s.verifier(0, "sql").code == SQL_MODE and s.verifier(0, "sql").source.line == 2
    assert s.verifier(1, "code").source.path.endswith("/gen_verifier.jsonl")
    warnings = [i.message for i in catalog.issues if i.level == "warning"]
    assert any("duplicate row for task 0 (sql-mode verifier; first at line 2)" in w for w in warnings)
    assert any("duplicate row for task 0 (code-mode verifier; first at line 1)" in w for w in warnings)
    assert any("code-mode verifier for task 0 in both gen_verifier.pure_code.jsonl (line 1) and gen_verifier.jsonl "
               "(line 1); using gen_verifier.pure_code.jsonl" in w for w in warnings)


def test_an_index_cached_by_an_older_awm_is_not_used(data):
    Catalog.load([data])
    path = data / "gen_verifier.jsonl"
    cache = _index_cache_path(path)
    cached = json.loads(cache.read_text())
    assert cached["stamp"]["version"] == INDEX_VERSION
    assert [e["extra"]["mode"] for e in cached["entries"]] == ["code", "sql"]
    # what the previous index version held: no mode (so every row of gen_verifier.jsonl would be sql mode)
    cached["stamp"]["version"] = 2
    for entry in cached["entries"]:
        entry["extra"].pop("mode")
    cache.write_text(json.dumps(cached))
    assert Catalog.load([data]).get("alpha_shop").verifier(0, "code").source.path == str(path)


def test_catalog_show_names_the_row_of_each_mode(data, capsys):
    assert awm(["catalog", "show", "alpha_shop", "--data", str(data), "--json"]) == 0
    tasks = json.loads(capsys.readouterr().out)["tasks"]
    assert tasks[0]["verifiers"] == {"sql": True, "code": True}
    assert tasks[0]["verifier_rows"] == {"sql": "gen_verifier.pure_code.jsonl:1", "code": "gen_verifier.jsonl:1"}
    assert tasks[2]["verifiers"] == {"sql": False, "code": False} and tasks[2]["verifier_rows"] == {}


# -- real AWM pipeline output: 30 code-mode verifiers in gen_verifier.jsonl ----------------------------

def test_real_data_catalog_shows_ten_code_verifiers_each(awm_real, capsys):
    assert awm(["catalog", "list", "--data", str(awm_real), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["scenarios"]
    assert {r["scenario"]: r["verifiers"] for r in rows} == {k: {"sql": 0, "code": 10}
                                                            for k in ("gofundme", "rover", "surveymonkey_apply")}
    assert awm(["catalog", "list", "--data", str(awm_real)]) == 0
    table = [[cell.strip() for cell in line.split("│")] for line in capsys.readouterr().out.splitlines()
             if "│" in line and "scenario" not in line]
    assert [cells[6:8] for cells in table] == [["0/10", "10/10"]] * 3  # the sql and code verifier columns


def test_real_data_every_task_gets_a_code_mode_verdict_without_a_judge(awm_real, tmp_path, capsys):
    out = tmp_path / "eval"
    assert awm(["eval", "run", "--policy", "immediate", "--data", str(awm_real), "--out", str(out), "--quiet",
                "--workers", "2", "--concurrency", "8"]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["overall"]["rollouts"] == 30 and meta["overall"]["errors"]["judge_error"] == 0
    assert meta["warnings"] == [] and meta["verification_profile"] == "reference"
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 30 and all(r["has_verdict"] and r["label"] in ("complete", "others") for r in records)
    assert {(r["verifier"]["mode"], r["verifier"]["function"]) for r in records} == {("code", "verify_task_completion")}


def test_real_data_verify_sql_with_a_judge_uses_the_code_verifier(awm_real, tmp_path, capsys):
    """No task of this data has an sql-mode verifier: the run is warned, the code verifier decides, the judge is
    never asked."""
    out = tmp_path / "eval"
    with FakeLLMServer({"responses": [{"content": '{"classification": "complete"}'}]}) as judge:
        assert awm(["eval", "run", "--policy", "immediate", "--data", str(awm_real), "--scenario", "rover",
                    "--task", "0", "--task", "1", "--out", str(out), "--quiet", "--verify", "sql",
                    "--judge-base-url", judge.url, "--judge-model", "j"]) == 0
        assert judge.requests == []
    err = capsys.readouterr().err
    expected = ("--verify sql with a judge: 2 of 2 selected tasks have no sql-mode verifier (verify_task) for the "
                "judge (rover (2 tasks)); their code-mode verifier decides instead")
    assert f"warning: {expected}" in err.replace("\n", "")
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["warnings"] == [expected]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["has_verdict"] and r["judge"] is None and r["verifier"]["mode"] == "code" for r in records)
    report = json.loads((out / "rollouts" / "rover" / "0_0" / "verify.json").read_text())
    assert "no sql-mode verifier" in report["note"] and report["profile"] == "reference"


def test_oracle_is_refused_up_front_without_reference_solutions(awm_real, tmp_path, capsys):
    out = tmp_path / "eval"
    assert awm(["eval", "run", "--policy", "oracle", "--data", str(awm_real), "--out", str(out)]) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert "--policy oracle plays reference solutions (reference_solutions.jsonl), and 30 of 30 selected tasks " \
           "have none" in err
    assert not out.exists()
    run_dir = tmp_path / "agent"
    assert awm(["agent", "run", "--policy", "oracle", "--data", str(awm_real), "--scenario", "rover", "--task", "2",
                "--out", str(run_dir)]) == 2
    assert "rover has no reference solution for task 2" in capsys.readouterr().err.replace("\n", "")
    assert not run_dir.exists()


def test_oracle_preflight_names_the_tasks_without_a_solution(tmp_path):
    d = make_dir(tmp_path)
    write(d / "reference_solutions.jsonl", [{"scenario": "alpha_shop", "task_idx": 0, "calls": [],
                                              "final_answer": "ok"}])
    config = EvalConfig(data_dirs=[str(d)], policy="oracle", verify="none")
    with pytest.raises(PolicyError, match=r"5 of 6 selected tasks have none \(alpha_shop \(2 tasks\), beta_bank "
                                          r"\(3 tasks\)\)"):
        preflight(config)
    only = EvalConfig(data_dirs=[str(d)], policy="oracle", verify="none", scenarios=["alpha_shop"], tasks=[0])
    assert preflight(only).warnings == [] and preflight(only).items == [("alpha_shop", 0, 0)]


def test_verification_warnings(data):
    catalog = Catalog.load([data])
    tasks = [("alpha_shop", 0), ("alpha_shop", 1), ("alpha_shop", 2)]
    assert verification_warnings(catalog, tasks, "none", False) == []
    assert verification_warnings(catalog, tasks[:2], "code", False) == []
    assert verification_warnings(catalog, tasks, "code", False) == [
        "--verify code: 1 of 3 selected tasks have no code-mode verifier (verify_task_completion) "
        "(alpha_shop (task 2)); they will end judge_error (no verdict)"]
    assert verification_warnings(catalog, tasks, "sql", True) == [
        "--verify sql: 1 of 3 selected tasks have no verifier in either mode (alpha_shop (task 2)); they will end "
        "judge_error (no verdict)"]
    write(data / "gen_verifier.pure_code.jsonl", [])  # task 0 keeps a code-mode verifier; task 1 only sql mode
    catalog = Catalog.load([data])
    assert verification_warnings(catalog, tasks[:2], "sql", True) == [
        "--verify sql with a judge: 1 of 2 selected tasks have no sql-mode verifier (verify_task) for the judge "
        "(alpha_shop (task 0)); their code-mode verifier decides instead"]
    assert verification_warnings(catalog, tasks[:2], "sql", False) == [
        "--verify sql: 1 of 2 selected tasks have no code-mode verifier (verify_task_completion), which sql mode uses "
        "when no judge is configured (alpha_shop (task 1)); they will end judge_error (no verdict); 1 of them have "
        "an sql-mode verifier: use --verify sql with a judge (--judge-endpoint)"]


def test_agent_run_warns_before_a_run_without_a_verifier(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for f in sample_envs_dir().glob("*.jsonl"):
        if f.name != "gen_verifier.pure_code.jsonl":
            shutil.copy(f, data / f.name)
    run_dir = tmp_path / "run"
    assert awm(["agent", "run", "--policy", "immediate", "--data", str(data), "--scenario", "maple_library_lending",
                "--task", "0", "--verify", "code", "--out", str(run_dir), "--quiet"]) == 0
    captured = capsys.readouterr()
    warning = next(line for line in captured.err.splitlines() if line.startswith("warning:"))
    assert warning == ("warning: --verify code: 1 of 1 selected tasks have no code-mode verifier "
                       "(verify_task_completion) (maple_library_lending (task 0)); they will end judge_error (no "
                       "verdict); 1 of them have an sql-mode verifier: use --verify sql with a judge (--judge-endpoint)")
    assert "label: judge_error" in captured.out
    report = json.loads((run_dir / "verify.json").read_text())
    assert report["note"] == ("no code-mode verifier for this task: no verdict; it has an sql-mode verifier: "
                              "configure a judge and verify in sql mode")


# -- the verification profile: awm verify --protocol, and the agent configuration's protocol -------------

JUDGE_REPLY = '{"classification": "complete", "reasoning": "ok"}'


def judge_requests(llm) -> list[str]:
    return [r["messages"][1]["content"] for r in llm.requests if "verification_json" in r["messages"][-1]["content"]]


def test_awm_verify_protocol_is_recorded_and_shapes_the_judge_request(tmp_path, capsys):
    s = Catalog.load().get("maple_library_lending")
    run_dir = tmp_path / "r"
    asyncio.run(run_episode(Catalog.load(), s, 1, make_policy("oracle", s, 1), run_dir=run_dir, verify_mode=None))
    with FakeLLMServer({"responses": [{"content": JUDGE_REPLY}]}) as llm:
        judge = ["--judge-base-url", llm.url, "--judge-model", "j", "--json"]
        assert awm(["verify", str(run_dir), "--mode", "sql", *judge]) == 0
        default = json.loads(capsys.readouterr().out)
        assert awm(["verify", str(run_dir), "--mode", "sql", "--protocol", "robust", *judge]) == 0
        robust = json.loads(capsys.readouterr().out)
        reference_request, robust_request = judge_requests(llm)
    assert default["profile"] == "reference" and robust["profile"] == "robust"
    assert default["label"] == robust["label"] == "complete" and default["judge"]["attempts"] == 1
    assert json.loads((run_dir / "verify.json").read_text())["profile"] == "robust"
    verification = reference_request.split("\n\nverification_json:\n", 1)[1]
    assert list(json.loads(verification)) == ["code_execution_result"]
    assert list(json.loads(robust_request.split("\n\nverification_json:\n", 1)[1])) == [
        "code_execution_result", "verifier_reasoning", "success_criteria", "failure_criteria"]
    with pytest.raises(SystemExit) as exc:
        awm(["verify", str(run_dir), "--protocol", "lenient"])
    assert exc.value.code == 2 and "invalid choice: 'lenient'" in capsys.readouterr().err


def test_episode_verification_follows_the_agent_configurations_protocol(tmp_path):
    s = Catalog.load().get("maple_library_lending")
    config = AgentConfig()
    config.protocol = "robust"  # what ``--protocol robust`` sets
    with FakeLLMServer({"responses": [{"content": JUDGE_REPLY}]}) as llm:
        outcome = asyncio.run(run_episode(Catalog.load(), s, 1, make_policy("oracle", s, 1), config, tmp_path / "r",
                                          verify_mode="both", judge=Endpoint(base_url=llm.url, model="j")))
        requests = judge_requests(llm)
    assert outcome.verification.profile == "robust" and outcome.verification.label == "complete"
    assert outcome.verification.code.label == "complete"  # "both": the code verifier's outcome is kept beside it
    assert len(requests) == 1 and '"verifier_reasoning"' in requests[0]
    assert json.loads((tmp_path / "r" / "verify.json").read_text())["profile"] == "robust"
