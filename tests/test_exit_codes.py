"""Every case of docs/exit-codes.md, run as a user runs it: ``python -m awm_engine.cli`` in a subprocess, on copies of
the bundled sample environments (or tiny directories built here). Codes the CLI maps from exceptions (4 untrusted
code refused, 130 Ctrl-C, 143 SIGTERM) are raised in-process, where they can be made to happen on any machine."""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from awm_engine.cli import catalog_cmd, main
from awm_engine.cli.common import Terminated
from awm_engine.data.names import normalize_scenario_name

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_ENVS = ROOT / "sample_envs"
FILES = ("gen_scenario.jsonl", "gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl", "gen_spec.jsonl",
         "gen_envs.jsonl", "gen_verifier.jsonl", "gen_verifier.pure_code.jsonl", "reference_solutions.jsonl")
NO_CODE, NO_VERIFIER, NO_SCHEMA = "riverside_clinic_appointments", "maple_library_lending", "pinecrest_online_store"


def awm(*argv: str, cwd: Path | None = None, timeout: float = 600, columns: int = 200) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}  # tables at a known width
    return subprocess.run([sys.executable, "-m", "awm_engine.cli", *argv], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=timeout, env=env)


def copy_data(dst: Path, drop: dict[str, set[str]] | None = None) -> Path:
    """The sample environments' JSONL files, without the rows of ``drop`` (file -> scenarios)."""
    dst.mkdir(parents=True)
    for name in FILES:
        lines = (SAMPLE_ENVS / name).read_text().splitlines()
        gone = (drop or {}).get(name, set())
        kept = [line for line in lines
                if normalize_scenario_name(json.loads(line).get("scenario", json.loads(line).get("name"))) not in gone]
        (dst / name).write_text("\n".join(kept) + "\n")
    return dst


@pytest.fixture
def sample(tmp_path) -> Path:
    return copy_data(tmp_path / "sample")


@pytest.fixture
def broken(tmp_path) -> Path:
    """riverside without code, maple without verifiers, pinecrest without a schema; the other two intact."""
    verifiers = {NO_VERIFIER}
    return copy_data(tmp_path / "broken", {"gen_envs.jsonl": {NO_CODE}, "gen_verifier.jsonl": verifiers,
                                           "gen_verifier.pure_code.jsonl": verifiers, "gen_db.jsonl": {NO_SCHEMA}})


def oracle_run(data: Path, out: Path) -> Path:
    done = awm("agent", "run", "--data", str(data), "--scenario", "sprintboard_project_tracker", "--task", "0",
               "--policy", "oracle", "--out", str(out), "--verify", "code", "--quiet")
    assert done.returncode == 0, done.stderr
    return out


# -- usage: argparse's 2, for every verb ------------------------------------------------------------------------

@pytest.mark.parametrize("verb", ["catalog", "db", "env", "agent", "verify", "replay", "fake-llm", "eval", "train",
                                  "gen", "bench", "doctor"])
def test_bad_usage_is_2(verb):
    done = awm(verb, "--no-such-flag")
    assert done.returncode == 2 and "usage:" in done.stderr


# -- catalog ------------------------------------------------------------------------------------------------------

def test_catalog(sample, tmp_path):
    assert awm("catalog", "list", "--data", str(sample)).returncode == 0
    assert awm("catalog", "show", "maple_library_lending", "--data", str(sample)).returncode == 0
    unknown = awm("catalog", "show", "no_such_scenario", "--data", str(sample))
    assert unknown.returncode == 2 and "no scenario" in unknown.stderr
    (tmp_path / "empty").mkdir()
    empty = awm("catalog", "list", "--data", str(tmp_path / "empty"))
    assert empty.returncode == 2 and "no scenarios found" in empty.stderr


# -- db -----------------------------------------------------------------------------------------------------------

def test_db_build(broken, tmp_path):
    ok = awm("db", "build", "--data", str(broken), "--scenario", "skyway_travel_bookings", "--out", str(tmp_path / "a"))
    assert ok.returncode == 0 and (tmp_path / "a" / "skyway_travel_bookings.db").stat().st_size > 0
    # a scenario without a schema is a failed build: no file, named in the summary, exit 1 when nothing was usable
    none = awm("db", "build", "--data", str(broken), "--scenario", NO_SCHEMA, "--out", str(tmp_path / "b"))
    assert none.returncode == 1 and not (tmp_path / "b" / f"{NO_SCHEMA}.db").exists()
    assert f"failed (no usable database): {NO_SCHEMA}" in none.stdout and "built 0 databases" in none.stdout
    # some usable: exit 0, the failed one still named
    some = awm("db", "build", "--data", str(broken), "--scenario", NO_SCHEMA, "--scenario", "skyway_travel_bookings",
               "--out", str(tmp_path / "c"))
    assert some.returncode == 0 and "built 1 database in" in some.stdout and "1 failed" in some.stdout
    assert not (tmp_path / "c" / f"{NO_SCHEMA}.db").exists()
    report = json.loads((tmp_path / "c" / "build_report.json").read_text())
    assert [r["built"] for r in report] == [False, True]
    assert awm("db", "build", "--data", str(broken), "--scenario", "nope", "--out", str(tmp_path / "d")).returncode == 2


def test_db_diff(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for path, rows in ((a, 1), (b, 2)):
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(rows)])
        conn.commit()
        conn.close()
    done = awm("db", "diff", str(a), str(b))
    assert done.returncode == 0 and done.stdout.startswith("1 table changed: +1")
    assert awm("db", "diff", str(a), str(tmp_path / "missing.db")).returncode == 2


# -- env ----------------------------------------------------------------------------------------------------------

def test_env_call(sample):
    ok = awm("env", "call", "--data", str(sample), "sprintboard_project_tracker", "list_projects")
    assert ok.returncode == 0, ok.stderr
    assert awm("env", "call", "--data", str(sample), "sprintboard_project_tracker", "no_such_tool").returncode == 1
    assert awm("env", "call", "--data", str(sample), "sprintboard_project_tracker", "list_projects",
               "--args", "{nope").returncode == 2


def test_env_test(broken):
    assert awm("env", "test", "--data", str(broken), "--scenario", "skyway_travel_bookings").returncode == 0
    done = awm("env", "test", "--data", str(broken), "--scenario", NO_CODE, "--json")
    assert done.returncode == 1 and json.loads(done.stdout)[0]["verdict"] == "broken"
    # loads, but the doctor lists errors (no verifier for any task): never "ok" (exit 0: it loads)
    done = awm("env", "test", "--data", str(broken), "--scenario", NO_VERIFIER, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)[0]["verdict"] == "errors"
    table = awm("env", "test", "--data", str(broken), "--scenario", NO_VERIFIER)
    assert "│ errors │" in table.stdout and "│ ok     │" not in table.stdout and "health of 1 environments" not in table.stdout


def test_env_check(tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    done = awm("env", "check", "--url", f"http://127.0.0.1:{port}/mcp", "--timeout", "5")
    assert done.returncode == 1 and "could not list tools" in done.stderr


def test_env_doctor(broken):
    # the doctor's findings are its output: it exits 0 when it could diagnose, whatever it found
    done = awm("env", "doctor", "--data", str(broken), NO_VERIFIER, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["counts"]["error"] > 0
    assert awm("env", "doctor", "--data", str(broken), "nope").returncode == 2


def test_env_serve_and_fake_llm_busy_port_is_3(sample, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        serve = awm("env", "serve", "--data", str(sample), "--scenario", "sprintboard_project_tracker", "--port", port)
        assert serve.returncode == 3, serve.stderr
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"responses": [{"content": "hi"}]}))
        fake = awm("fake-llm", "--script", str(script), "--port", port)
        assert fake.returncode == 3, fake.stderr
    (tmp_path / "bad.json").write_text("{nope")
    assert awm("fake-llm", "--script", str(tmp_path / "bad.json"), "--port", "0").returncode == 2


def test_env_serve_is_1_when_the_episode_does_not_open(tmp_path):
    """(0 on SIGTERM: tests/test_serve_sigterm.py)"""
    from tinyenv import make_env_dir

    data = make_env_dir(tmp_path / "data", {"broken": '#FULLraise RuntimeError("no app here")\n'})
    serve = awm("env", "serve", "--data", str(data), "--scenario", "broken", "--port", "0")
    assert serve.returncode == 1, serve.stderr
    assert "RuntimeError: no app here" in serve.stderr


# -- agent run, verify, replay ---------------------------------------------------------------------------------

def test_agent_run(broken, tmp_path):
    oracle_run(broken, tmp_path / "r")
    failed = awm("agent", "run", "--data", str(broken), "--scenario", NO_CODE, "--task", "0", "--policy", "immediate",
                 "--out", str(tmp_path / "x"), "--quiet")
    assert failed.returncode == 1
    assert awm("agent", "run", "--data", str(broken), "--scenario", "nope", "--task", "0", "--policy",
               "immediate").returncode == 2


def test_verify(broken, tmp_path):
    run = oracle_run(broken, tmp_path / "r")
    assert awm("verify", str(run), "--mode", "code", "--data", str(broken)).returncode == 0
    # no verdict (no verifier for the task): nothing was scored
    nothing = awm("agent", "run", "--data", str(broken), "--scenario", NO_VERIFIER, "--task", "0", "--policy",
                  "immediate", "--out", str(tmp_path / "n"), "--verify", "none", "--quiet")
    assert nothing.returncode == 0, nothing.stderr
    assert awm("verify", str(tmp_path / "n"), "--mode", "code", "--data", str(broken)).returncode == 1
    assert awm("verify", str(tmp_path), "--mode", "code").returncode == 2  # no trajectory.json


def test_replay(sample, tmp_path):
    run = oracle_run(sample, tmp_path / "r")
    assert awm("replay", str(run)).returncode == 0
    assert awm("replay", str(run), "--step", "999").returncode == 2
    assert awm("replay", str(tmp_path / "nothing")).returncode == 2


# -- eval -----------------------------------------------------------------------------------------------------------

def test_eval_run_scored_is_0_and_report_list_compare(sample, tmp_path):
    out = tmp_path / "ok"
    done = awm("eval", "run", "--data", str(sample), "--scenario", "sprintboard_project_tracker", "--task", "0",
               "--policy", "oracle", "--verify", "code", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "metadata.json").read_text())["outcome"] == {"exit_code": 0, "reason": None}
    assert awm("eval", "report", str(out)).returncode == 0
    assert awm("eval", "list", str(tmp_path)).returncode == 0
    assert awm("eval", "compare", str(out), str(out)).returncode == 0
    assert awm("eval", "report", str(tmp_path)).returncode == 2  # not a run
    again = awm("eval", "run", "--data", str(sample), "--policy", "oracle", "--out", str(out))
    assert again.returncode == 2 and "already holds a run" in again.stderr


def test_eval_run_nothing_scored_is_1(broken, tmp_path):
    """No verifier (maple) and no environment code (riverside): nothing could be scored, so exit 1, said before the
    run starts and recorded in metadata.json."""
    out = tmp_path / "none"
    done = awm("eval", "run", "--data", str(broken), "--scenario", NO_VERIFIER, "--scenario", NO_CODE, "--task", "0",
               "--task", "1", "--policy", "immediate", "--verify", "code", "--out", str(out), "--quiet")
    assert done.returncode == 1, done.stderr
    assert "no environment code" in done.stderr and "no code-mode verifier" in done.stderr
    outcome = json.loads((out / "metadata.json").read_text())["outcome"]
    assert outcome["exit_code"] == 1 and outcome["reason"].startswith("nothing was scored: of 4 rollouts, 2 errored")
    assert "nothing was scored" in done.stderr


def test_eval_run_every_rollout_errored_is_1(broken, tmp_path):
    done = awm("eval", "run", "--data", str(broken), "--scenario", NO_CODE, "--task", "0", "--policy", "immediate",
               "--verify", "code", "--out", str(tmp_path / "e"), "--quiet")
    assert done.returncode == 1 and "every rollout errored (1 of 1)" in done.stderr


def test_eval_run_unknown_scenario_is_2(sample, tmp_path):
    done = awm("eval", "run", "--data", str(sample), "--scenario", "nope", "--policy", "immediate", "--out",
               str(tmp_path / "u"))
    assert done.returncode == 2 and not (tmp_path / "u").exists()


# -- doctor sandbox -----------------------------------------------------------------------------------------------

def test_doctor_sandbox_is_1_exactly_when_a_protection_is_off():
    done = awm("doctor", "sandbox", "--json")
    assert done.returncode == (1 if json.loads(done.stdout)["off"] else 0)


# -- codes mapped from exceptions (every verb goes through main) --------------------------------------------------

@pytest.mark.parametrize("raised, code", [("sandbox", 4), ("interrupt", 130), ("terminated", 143)])
def test_exception_codes(monkeypatch, capsys, raised, code):
    from awm_engine.sandbox.launcher import SandboxUnavailable

    def boom(args):
        if raised == "sandbox":
            raise SandboxUnavailable("the sandbox's namespace layer is unavailable")
        raise Terminated() if raised == "terminated" else KeyboardInterrupt()

    monkeypatch.setattr(catalog_cmd, "cmd_list", boom)
    assert main(["catalog", "list"]) == code



def test_bench_tau2_run_is_1_when_nothing_was_scored(tmp_path, capsys):
    """Every simulation errors (the model endpoint answers 500): the run tells nothing, exit 1 with the reason."""
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.tau2.data import Tau2Data

    fixture = Path(__file__).parent / "fixtures" / "tau2"
    task = Tau2Data(fixture).domain("airline").split_tasks()[0].id
    with FakeLLMServer({"responses": [{"status": 500, "body": "down"}]}) as llm:
        code = main(["bench", "tau2", "run", "--tau2-data", str(fixture), "--domain", "airline", "--task", str(task),
                     "--model", "scripted", "--base-url", llm.url, "--retries", "0", "--out", str(tmp_path / "run"),
                     "--quiet"])
    assert code == 1
    assert "every rollout errored (1 of 1)" in capsys.readouterr().err


def test_bench_bfcl_run_is_1_when_nothing_was_scored(tmp_path, capsys):
    """The one entry errors (the model endpoint answers 500): nothing scored, exit 1, and the entry is named once."""
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.bfcl import wheel

    if wheel.problem() is not None:
        pytest.skip(f"BFCL is not installed here (make bfcl): {wheel.problem()}")
    with FakeLLMServer({"responses": [{"status": 500, "body": "down"}]}) as llm:
        code = main(["bench", "bfcl", "run", "--entries", "simple_python_0", "--model", "scripted", "--base-url",
                     llm.url, "--retries", "0", "--out", str(tmp_path / "run"), "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "1 entry errored (not scored)" in err and "nothing was scored" in err


# -- bench check / score / report, train, gen ---------------------------------------------------------------------

def test_bench_reports_and_bfcl_check(tmp_path):
    (tmp_path / "empty").mkdir()
    across = awm("bench", "report", str(tmp_path / "empty"))  # a cross-benchmark table of nothing readable
    assert across.returncode == 1 and "no run could be read" in across.stdout + across.stderr
    for bench in ("bfcl", "tau2", "mcp-universe"):
        one = awm("bench", bench, "report", str(tmp_path / "empty"))
        assert one.returncode == 2 and "not a" in one.stderr, (bench, one.stderr)
    from awm_engine.bench.bfcl import wheel
    check = awm("bench", "bfcl", "check")
    assert check.returncode == (0 if wheel.problem() is None else 1), check.stdout + check.stderr


def test_bench_bfcl_score_folders_and_empty_files(tmp_path):
    from awm_engine.bench.bfcl import wheel
    if wheel.problem() is not None:
        pytest.skip(f"{wheel.problem()} (bench bfcl score needs the bfcl-eval wheel)")
    answer = {"id": "simple_python_0", "result": [{"calculate_triangle_area": json.dumps({"base": 10, "height": 5})}]}
    path = tmp_path / "result" / "some-model" / "non_live" / "BFCL_v4_simple_python_result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(answer) + "\n")
    scored = awm("bench", "bfcl", "score", str(tmp_path / "result"), "--json")  # a folder: its result files
    assert scored.returncode == 0, scored.stderr
    assert [m["model"] for m in json.loads(scored.stdout)["models"]] == ["some-model"]
    (tmp_path / "none").mkdir()
    nothing = awm("bench", "bfcl", "score", str(tmp_path / "none"))
    assert nothing.returncode == 2 and "no BFCL result file" in nothing.stderr
    empty = tmp_path / "BFCL_v4_simple_python_result.json"
    empty.write_text("")
    unscored = awm("bench", "bfcl", "score", str(empty))
    assert unscored.returncode == 1 and "nothing was scored" in unscored.stderr, unscored.stderr


def test_train_export_and_tasks(sample, tmp_path):
    run = oracle_run(sample, tmp_path / "run")
    exported = awm("train", "export", str(run), "--out", str(tmp_path / "samples.jsonl"))
    assert exported.returncode == 0 and (tmp_path / "samples.jsonl").read_text().strip()
    # a rollout whose endpoint never answered gives no sample: nothing exported is 1
    failed = awm("agent", "run", "--data", str(sample), "--scenario", "sprintboard_project_tracker", "--task", "0",
                 "--policy", "llm", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--retries", "0",
                 "--out", str(tmp_path / "failed"), "--quiet")
    assert failed.returncode == 1 and (tmp_path / "failed" / "trajectory.json").is_file(), failed.stderr
    none = awm("train", "export", str(tmp_path / "failed"), "--out", str(tmp_path / "none.jsonl"))
    assert none.returncode == 1 and "nothing was exported" in none.stderr, none.stdout + none.stderr
    assert not (tmp_path / "none.jsonl").exists()  # nothing to mistake for an export
    # the same for whole-rollout rows, with the reason a rollout gave none
    rows = awm("train", "export", str(tmp_path / "failed"), "--rows", "rollout", "--window", "none",
               "--out", str(tmp_path / "none.parquet"))
    assert rows.returncode == 1 and not (tmp_path / "none.parquet").exists()
    assert "failed" in rows.stderr.split("nothing was exported", 1)[1], rows.stderr
    # --out: never a directory, a path under a file, an unknown extension, or an existing file without --force
    (tmp_path / "afile").write_text("x")
    for out, why in ((tmp_path, "is a directory"), (tmp_path / "afile" / "o.jsonl", "is not a directory"),
                     (tmp_path / "o.csv", "cannot tell the format"), (tmp_path / "samples.jsonl", "exists")):
        refused = awm("train", "export", str(run), "--out", str(out))
        assert refused.returncode == 2 and why in " ".join(refused.stderr.split()), refused.stderr
    assert (tmp_path / "afile").read_text() == "x"
    assert awm("train", "export", str(run), "--out", str(tmp_path / "samples.jsonl"), "--force").returncode == 0
    upper = awm("train", "export", str(run), "--out", str(tmp_path / "UP.PARQUET"))  # the extension in any case
    assert upper.returncode == 0 and (tmp_path / "UP.PARQUET").read_bytes()[:4] == b"PAR1", upper.stderr
    (tmp_path / "empty").mkdir()
    assert awm("train", "export", str(tmp_path / "empty"), "--out", str(tmp_path / "x.jsonl")).returncode == 2
    tasks = awm("train", "tasks", "--data", str(sample), "--out", str(tmp_path / "tasks.jsonl"))
    assert tasks.returncode == 0 and (tmp_path / "tasks.jsonl").read_text().count("\n") >= 5
    again = awm("train", "tasks", "--data", str(sample), "--out", str(tmp_path / "samples.jsonl"))
    assert again.returncode == 2 and "exists" in again.stderr  # an export is not replaced by task rows
    assert awm("train", "tasks", "--data", str(tmp_path / "empty"), "--out", str(tmp_path / "t.jsonl")).returncode == 2


def test_gen_without_an_endpoint_is_2(tmp_path):
    """gen's 0 (a stage produced rows) runs with the scripted server in tests/test_gen.py."""
    (tmp_path / "out").mkdir()
    done = awm("gen", "task", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2 and "no model endpoint" in done.stderr
