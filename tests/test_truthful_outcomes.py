"""Summaries that tell the truth (issue 26 item 4): a verifier that does not compile counts as missing everywhere and
is named; ``catalog show X`` prints X's catalog issues only; counts agree with their nouns; ``env test`` never says
ok while the doctor lists errors; ``eval run`` warns, before it starts, about what it will not be able to score."""
from __future__ import annotations

import json
from pathlib import Path

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.data.names import normalize_scenario_name
from awm_engine.db.build import build_database
from awm_engine.eval.batch import EvalConfig, preflight, run_outcome

SAMPLE_ENVS = Path(__file__).resolve().parent.parent / "sample_envs"
BROKEN_TASK, SCENARIO = 2, "sprintboard_project_tracker"


def data_with_a_broken_verifier(dst: Path, mode_file: str = "gen_verifier.pure_code.jsonl") -> Path:
    """The sample environments, with sprintboard's task 2 verifier in ``mode_file`` given a SyntaxError."""
    dst.mkdir(parents=True)
    for src in SAMPLE_ENVS.glob("*.jsonl"):
        lines = src.read_text().splitlines()
        if src.name == mode_file:
            for i, line in enumerate(lines):
                row = json.loads(line)
                if normalize_scenario_name(row["scenario"]) == SCENARIO and row["task_idx"] == BROKEN_TASK:
                    row["verification"]["code"] = row["verification"]["code"].replace("):", ")", 1)
                    lines[i] = json.dumps(row)
        (dst / src.name).write_text("\n".join(lines) + "\n")
    return dst


def test_a_verifier_that_does_not_compile_counts_as_missing(tmp_path, capsys):
    data = data_with_a_broken_verifier(tmp_path / "data")
    s = Catalog.load([data]).get(SCENARIO)
    assert not s.verifier_has_code["code"].get(BROKEN_TASK)
    assert s.verifier_errors["code"][BROKEN_TASK].startswith("SyntaxError")
    assert s.verifier_coverage("code") == len(s.tasks) - 1
    assert any("does not compile" in i.message for i in s.issues)
    # catalog list counts it as missing
    assert awm(["catalog", "list", "--data", str(data), "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out)["scenarios"] if r["scenario"] == SCENARIO)
    assert row["verifiers"]["code"] == len(s.tasks) - 1 and any("does not compile" in i for i in row["issues"])
    # the eval preflight warns about it as a task without a verifier of the chosen mode
    config = EvalConfig(data_dirs=[str(data)], scenarios=[SCENARIO], tasks=[BROKEN_TASK], policy="immediate",
                        verify="code")
    (warning,) = [w for w in preflight(config).warnings if "code-mode verifier" in w]
    assert "1 of 1 selected tasks" in warning


def test_verify_names_the_compile_error(tmp_path, capsys):
    data = data_with_a_broken_verifier(tmp_path / "data")
    run = tmp_path / "run"
    assert awm(["agent", "run", "--data", str(data), "--scenario", SCENARIO, "--task", str(BROKEN_TASK), "--policy",
                "oracle", "--verify", "none", "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert awm(["verify", str(run), "--mode", "code", "--data", str(data), "--json"]) == 1  # no verdict
    report = json.loads(capsys.readouterr().out)
    assert report["label"] == "judge_error" and "does not compile (SyntaxError" in report["note"]


def test_sql_mode_names_a_broken_sql_verifier_it_falls_back_from(tmp_path, capsys):
    data = data_with_a_broken_verifier(tmp_path / "data", "gen_verifier.jsonl")
    s = Catalog.load([data]).get(SCENARIO)
    if not s.verifier_errors["sql"].get(BROKEN_TASK):  # the sample's gen_verifier.jsonl row is sql mode
        raise AssertionError("the broken row should be the task's sql-mode verifier")
    run = tmp_path / "run"
    assert awm(["agent", "run", "--data", str(data), "--scenario", SCENARIO, "--task", str(BROKEN_TASK), "--policy",
                "oracle", "--verify", "none", "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert awm(["verify", str(run), "--mode", "sql", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "label complete" in out and "the sql-mode verifier does not compile (SyntaxError" in out


def test_catalog_show_prints_only_its_scenarios_issues(tmp_path, capsys):
    data = data_with_a_broken_verifier(tmp_path / "data")
    assert awm(["catalog", "show", "maple_library_lending", "--data", str(data)]) == 0
    err = capsys.readouterr().err
    assert SCENARIO not in err and "1 catalog issue of other scenarios or files not shown" in err
    assert awm(["catalog", "show", SCENARIO, "--data", str(data)]) == 0
    err = capsys.readouterr().err
    assert "does not compile" in err and "not shown" not in err


def test_plurals_agree(tmp_path, capsys):
    a = build_database("t", {"tables": [{"name": "t", "ddl": "CREATE TABLE t (id INTEGER PRIMARY KEY)"}]},
                       {"tables": []}, tmp_path / "a.db")
    assert a.usable
    import sqlite3

    conn = sqlite3.connect(tmp_path / "b.db")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    assert awm(["db", "diff", str(tmp_path / "a.db"), str(tmp_path / "b.db")]) == 0
    assert capsys.readouterr().out.startswith("1 table changed")
    out = tmp_path / "run"
    assert awm(["eval", "run", "--scenario", "maple_library_lending", "--task", "1", "--policy", "oracle", "--verify",
                "code", "--out", str(out), "--quiet"]) == 0
    assert "· 1 rollout" in capsys.readouterr().out
    assert awm(["eval", "report", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 rollout" in printed and "1 rollouts" not in printed and "failures" in printed


def test_no_schema_writes_no_file(tmp_path):
    report = build_database("t", None, {"tables": []}, tmp_path / "t.db")
    assert not (tmp_path / "t.db").exists() and not report.built and not report.usable
    report = build_database("t", {"tables": "nope"}, None, tmp_path / "u.db")
    assert not (tmp_path / "u.db").exists() and not report.built


def test_run_outcome_vocabulary():
    assert run_outcome({"rollouts": 0})["exit_code"] == 1
    assert run_outcome({"rollouts": 3, "errored": 3})["reason"] == "every rollout errored (3 of 3)"
    assert run_outcome({"rollouts": 3, "errored": 1, "no_verdict": 2, "scored": 0})["exit_code"] == 1
    assert run_outcome({"rollouts": 3, "errored": 1, "no_verdict": 2, "scored": 0}, verified=False)["exit_code"] == 0
    assert run_outcome({"rollouts": 3, "scored": 1}) == {"exit_code": 0, "reason": None}


def test_eval_warns_about_empty_databases_and_solved_at_start(tmp_path, monkeypatch):
    from awm_engine.eval import episode
    from awm_engine.verify.doctor import Diagnosis, Problem

    data = tmp_path / "data"
    data.mkdir()
    for src in SAMPLE_ENVS.glob("*.jsonl"):
        keep = [line for line in src.read_text().splitlines() if src.name != "gen_sample.jsonl"
                or normalize_scenario_name(json.loads(line)["scenario"]) != "maple_library_lending"]
        (data / src.name).write_text("\n".join(keep) + "\n")
    solved = Diagnosis(SCENARIO, SCENARIO, [Problem("solved_at_start", "error", SCENARIO, "solved", task=3,
                                                    mode="code")])
    import awm_engine.verify.doctor as doctor

    monkeypatch.setattr(doctor, "cached_diagnosis", lambda s: solved if s.key == SCENARIO else None)
    config = EvalConfig(data_dirs=[str(data)], scenarios=["maple_library_lending", SCENARIO], tasks=[3],
                        policy="immediate", verify="code")
    warnings = preflight(config).warnings
    assert any("start with an empty database (maple_library_lending: no sample data)" in w for w in warnings)
    assert any("1 of 2 selected tasks are solved at start (sprintboard_project_tracker (task 3))" in w
               for w in warnings)
    assert episode.environment_warnings  # the function the preflight calls
