"""What a new user trying every verb found (one test per finding): runs that would mix with an earlier run, files
where a directory belongs, non-databases, a replay that hid the answer and errors, a session file that pointed
at removed databases, out-of-range tasks, missing directories and timeouts that cannot be."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_exit_codes import awm

SCENARIO = "maple_library_lending"


def refused(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def test_an_agent_run_never_mixes_with_a_run_already_in_its_directory(tmp_path):
    out = tmp_path / "run"
    first = awm("agent", "run", "--scenario", SCENARIO, "--task", "3", "--policy", "immediate", "--out", str(out))
    assert first.returncode in (0, 1), first.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    again = awm("agent", "run", "--scenario", SCENARIO, "--task", "3", "--policy", "immediate", "--out", str(out))
    refused(again, "already holds a run")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing touched


@pytest.mark.parametrize("argv", [
    ["db", "build", "--scenario", SCENARIO],
    ["agent", "run", "--scenario", SCENARIO, "--task", "0", "--policy", "immediate"],
    ["env", "serve", "--scenario", SCENARIO, "--port", "0"],
    ["eval", "run", "--scenario", SCENARIO, "--policy", "immediate"],
], ids=["db-build", "agent-run", "env-serve", "eval-run"])
def test_out_naming_a_file_is_refused_before_anything_starts(tmp_path, argv):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    refused(awm(*argv, "--out", str(afile), timeout=300), "is not a directory")
    assert afile.read_text() == "keep me"


def test_a_second_server_never_shares_a_session_directory(tmp_path):
    out = tmp_path / "session"
    out.mkdir()
    (out / "session.json").write_text("{}")
    refused(awm("env", "serve", "--scenario", SCENARIO, "--port", "0", "--out", str(out), timeout=120), "already holds a run")


def test_db_diff_of_something_that_is_not_a_database(tmp_path):
    afile, db = tmp_path / "afile", tmp_path / "x.db"
    afile.write_text("not sqlite at all " * 100)
    import sqlite3

    sqlite3.connect(db).close()
    refused(awm("db", "diff", str(afile), str(db)), "as SQLite databases")


def test_replay_shows_the_final_answer_and_errors_without_a_traceback(tmp_path):
    out = tmp_path / "run"
    played = subprocess.run([sys.executable, "-m", "awm_engine.cli", "agent", "run", "--scenario", SCENARIO, "--task",
                             "3", "--policy", "human", "--out", str(out)],
                            input='renew_loan {"loan_id": "abc"}\nanswer all done here\n', capture_output=True, text=True, timeout=600)
    assert played.returncode in (0, 1), played.stderr
    shown = awm("replay", str(out))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any("renew_loan" in line for line in lines)
    assert any("→ invalid_arguments · Error: Input validation error: 'abc' is not of type 'integer'" in line
               for line in lines), lines  # an error the environment answered, with no traceback behind it
    assert any("final answer" in line and "all done here" in line for line in lines), lines
    data = json.loads(awm("replay", str(out), "--json").stdout)
    assert data["steps"][-1]["answer"] == "all done here"
    one = awm("replay", str(out), "--step", "0")
    assert "0 tables changed" in one.stdout or "1 table changed" in one.stdout, one.stdout
    assert "1 tables" not in one.stdout


def test_session_json_names_the_databases_where_they_are_once_stopped(tmp_path):
    from awm_engine.runtime.ports import free_port

    out, port = tmp_path / "session", free_port()
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario", SCENARIO, "--port",
                             str(port), "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:  # the server says when it serves (no timing)
            if "MCP (streamable HTTP) at" in line:
                break
        served = json.loads((out / "session.json").read_text())
        assert "/.awm/" in served["final_db"]  # while serving: the worker's copy
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=300)
    stopped = json.loads((out / "session.json").read_text())
    assert stopped["initial_db"] == str(out.resolve() / "initial.db") and Path(stopped["initial_db"]).is_file()
    assert stopped["final_db"] == str(out.resolve() / "final.db") and Path(stopped["final_db"]).is_file()
    assert isinstance(stopped["stopped"], float) and not (out / ".awm").exists()


def test_eval_run_of_tasks_no_scenario_has_is_refused_and_creates_nothing(tmp_path):
    out = tmp_path / "ev"
    refused(awm("eval", "run", "--scenario", SCENARIO, "--task", "99", "--policy", "immediate", "--out", str(out)),
            "no selected scenario has task 99", f"{SCENARIO} has")
    assert not out.exists()


def test_eval_list_of_a_missing_directory(tmp_path):
    refused(awm("eval", "list", str(tmp_path / "nowhere")), "no such directory")
    assert awm("eval", "list", cwd=tmp_path).returncode == 0  # the default, before any run: no runs, no error


@pytest.mark.parametrize("argv", [["env", "call", SCENARIO, "list_my_loans"], ["env", "serve", "--scenario", SCENARIO],
                                  ["agent", "run", "--scenario", SCENARIO, "--task", "0", "--policy", "immediate"]])
@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_timeouts_that_cannot_be_are_refused(argv, value):
    flag = "--call-timeout" if argv[0] == "agent" else "--timeout"
    refused(awm(*argv, flag, value, timeout=120), "must be above 0")  # a server that took it would serve on



def test_a_zombie_owns_nothing():
    """A dead process that nobody reaped (an init that does not reap keeps it for good) no longer holds its
    directories: the sweeps that remove what dead awm processes left treat it as gone."""
    from awm_engine.sandbox import owned

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        for _ in range(10_000):  # until the child has exited (a zombie now): no timing, its state says
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            os.sched_yield()
        assert state == "Z"
        assert owned.start_time(pid) is None
        assert owned.start_time(os.getpid()) is not None
    finally:
        os.waitpid(pid, 0)

def test_a_native_calls_trajectory_entry_names_its_tool(tmp_path):
    """In native mode (the human player's) the arguments are the tool's own: the entry said only ``call_tool``."""
    out = tmp_path / "run"
    played = subprocess.run([sys.executable, "-m", "awm_engine.cli", "agent", "run", "--scenario", SCENARIO, "--task",
                             "3", "--policy", "human", "--out", str(out)],
                            input='list_my_loans {"status": "active"}\nanswer done\n', capture_output=True, text=True,
                            timeout=600)
    assert played.returncode in (0, 1), played.stderr
    entry = json.loads((out / "trajectory.json").read_text())["trajectory"][0]["tool_calls"][0]
    assert entry == {"id": entry["id"], "name": "call_tool", "arguments": {"status": "active"}, "tool": "list_my_loans"}
    (out / "events.jsonl").unlink()  # replayed from trajectory.json alone
    assert "list_my_loans" in awm("replay", str(out)).stdout


@pytest.mark.parametrize("argv", [["catalog", "list", "--data"], ["bench", "tau2", "check", "--tau2-data"]])
def test_a_missing_directory_is_called_missing_and_a_file_not_a_directory(tmp_path, argv):
    refused(awm(*argv, str(tmp_path / "nowhere")), "nowhere: no such directory")
    (tmp_path / "afile").write_text("x")
    refused(awm(*argv, str(tmp_path / "afile")), "afile: not a directory")


def test_replaying_a_recording_of_another_task_says_so_and_a_missing_one_is_refused(tmp_path):
    recorded = tmp_path / "recorded"
    done = awm("agent", "run", "--scenario", SCENARIO, "--task", "0", "--policy", "oracle", "--out", str(recorded),
               timeout=300)
    assert done.returncode == 0, done.stderr
    same = awm("agent", "run", "--scenario", SCENARIO, "--task", "0", "--policy", "replay", "--replay", str(recorded),
               "--out", str(tmp_path / "same"), timeout=300)
    assert same.returncode == 0 and "warning" not in same.stderr, same.stderr
    other = awm("agent", "run", "--scenario", SCENARIO, "--task", "1", "--policy", "replay", "--replay",
                str(recorded), "--out", str(tmp_path / "other"), timeout=300)
    assert other.returncode == 0, other.stderr
    assert f"warning: the recording replayed is of {SCENARIO} task 0, not of {SCENARIO} task 1" in \
        " ".join(other.stderr.split())
    (tmp_path / "bad.json").write_text('{"trajectory": [{"native_tool_calls": [7]}]}')
    for source, why in ((tmp_path / "nowhere", "no such run directory or trajectory.json"),
                        (tmp_path / "bad.json", "not a trajectory"), (tmp_path / "other" / "events.jsonl",
                                                                       "not a trajectory")):
        refused(awm("agent", "run", "--scenario", SCENARIO, "--task", "0", "--policy", "replay", "--replay",
                    str(source), "--out", str(tmp_path / "never")), why)
        assert not (tmp_path / "never").exists()


def test_a_path_with_brackets_is_printed_as_it_is(tmp_path):
    """Rich would read ``[x]`` in ``--out runs/[x]`` as markup: the resume command printed would be wrong."""
    out = tmp_path / "runs" / "[x] [bold]b[/bold]"
    done = awm("eval", "run", "--scenario", SCENARIO, "--task", "0", "--policy", "immediate", "--out", str(out),
               timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"run directory: {out}" in done.stderr.replace("\n", ""), done.stderr
