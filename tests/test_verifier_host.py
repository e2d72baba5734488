"""Verifier hosts (``verify/host.py``, ``verify/shared_host.py``): one sandbox per scenario, each verifier a fresh
child of the fork runner BFCL's multi-turn execution runs on (issue 24, item 4).

* the verdicts are those of a sandbox per verifier, on the sample environments' solved and unsolved episodes and on
  the real AgentWorldModel-1K verifiers (../shared);
* a hostile verifier, running beside honest ones in the same host, changes no verdict but its own: it cannot write
  another verifier's answer, read another job's files, signal or trace another process, see /proc, start a process
  or thread, or end the host; its own timeout, crash and memory limit are its own;
* a host that ends under a verification leaves it to a sandbox of its own, and where hosts are off (or the code
  starts threads or processes) every verifier gets its own sandbox.

Every assertion holds in any interleaving: nothing here depends on timing.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import tempfile
import threading
from pathlib import Path

import pytest

from awm_engine.data.catalog import Catalog
from awm_engine.data.records import Verifier
from awm_engine.db.templates import TemplateCache
from awm_engine.verify import shared_host
from awm_engine.verify.verification import run_verifier

pytestmark = pytest.mark.skipif(not shared_host.usable()[0],
                                reason=f"verifier hosts are not usable here: {shared_host.usable()[1]}")

SCENARIO = "maple_library_lending"


@pytest.fixture(autouse=True)
def fresh_hosts():
    shared_host.close_all()
    yield
    shared_host.close_all()


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    """Two small databases: ``initial`` and ``final`` (a row added)."""
    base = tmp_path_factory.mktemp("dbs")
    for name, rows in (("initial", 1), ("final", 2)):
        with sqlite3.connect(base / f"{name}.db") as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            conn.executemany("INSERT INTO notes (body) VALUES (?)", [(f"note {i}",) for i in range(rows)])
        conn.close()
    return base / "initial.db", base / "final.db"


def verifier(code: str, mode: str = "code") -> Verifier:
    return Verifier(SCENARIO, 0, mode, code, None)


HONEST = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3, time
    time.sleep(0.3)  # still running while the hostile verifiers try what they can
    before = sqlite3.connect(initial_db_path).execute("SELECT COUNT(*) FROM notes").fetchone()[0]
    after = sqlite3.connect(final_db_path).execute("SELECT COUNT(*) FROM notes").fetchone()[0]
    return {"result": "complete" if after == before + 1 else "others", "answer": final_answer}
'''

HOSTILE = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import os, signal, socket, glob, sqlite3
    tried = {}
    def attempt(name, fn):
        try:
            tried[name] = repr(fn())[:200]
        except BaseException as exc:
            tried[name] = "refused: " + type(exc).__name__
    here = os.path.dirname(initial_db_path)
    root = os.path.dirname(here)
    attempt("list_jobs", lambda: os.listdir(root))
    attempt("glob_jobs", lambda: glob.glob(root + "/*/final.db"))
    attempt("write_own_dir", lambda: open(os.path.join(here, "x"), "w").write("x"))
    attempt("write_db", lambda: open(final_db_path, "r+b").write(b"x"))
    attempt("sqlite_write", lambda: sqlite3.connect(final_db_path).execute("DELETE FROM notes").fetchall())
    attempt("write_root", lambda: open(os.path.join(root, "forged"), "w").write("x"))
    attempt("tmp", lambda: open("/tmp/forged", "w").write("x"))
    attempt("proc", lambda: os.listdir("/proc"))
    attempt("proc_self_fd", lambda: os.listdir("/proc/self/fd"))
    attempt("proc_1", lambda: open("/proc/1/cmdline").read())
    attempt("etc_passwd", lambda: open("/etc/passwd").read())
    # spelled so that the static check (which sends honest code that starts threads to a sandbox of its own) does
    # not see them: a hostile verifier would not announce itself either
    attempt("fork", lambda: getattr(os, "fo" + "rk")())
    attempt("thread", lambda: __import__("_th" + "read").start_new_thread(lambda: None, ()))
    attempt("abstract", lambda: socket.socket(socket.AF_UNIX).connect("\\0awm"))
    killed = []
    for pid in range(1, 300):
        if pid == os.getpid():
            continue
        for sig in (signal.SIGKILL, signal.SIGSTOP):
            try:
                os.kill(pid, sig)
                killed.append(pid)
            except OSError:
                pass
    tried["signalled"] = killed
    import json
    forged = json.dumps({"ok": True, "result": {"status": "ok", "value": {"result": "complete", "tried": tried}}})
    for fd in range(0, 64):  # a forged answer on every descriptor it holds: only its own socket is among them
        try:
            os.write(fd, forged.encode() + b"\\n")
        except OSError:
            pass
    return {"result": "others", "tried": tried}
'''


def run(code, dbs, answer="done", mode="code", **kw):
    return run_verifier(verifier(code, mode), dbs[0], dbs[1], answer, scenario=SCENARIO, mode=mode, **kw)


def test_a_verifier_runs_in_its_scenarios_host_with_the_same_verdict(dbs):
    host = run(HONEST, dbs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(shared_host.ENV_SWITCH, "0")
        own = run(HONEST, dbs)
    assert (host.runner, own.runner) == ("host", "sandbox")
    assert host.label == own.label == "complete"
    assert host.result == own.result
    assert run(HONEST, (dbs[0], dbs[0])).label == "others"


def test_a_hostile_verifier_changes_no_verdict_but_its_own(dbs):
    """Honest verifiers and hostile ones at once in one host: every honest verdict stands, each with its own
    final answer, and the hostile one could do none of what it tried."""
    outcomes: dict[str, object] = {}

    def go(name, code, answer):
        outcomes[name] = run(code, dbs, answer)

    threads = [threading.Thread(target=go, args=(f"honest{i}", HONEST, f"answer {i}")) for i in range(3)]
    threads += [threading.Thread(target=go, args=(f"hostile{i}", HOSTILE, "x")) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(3):
        honest = outcomes[f"honest{i}"]
        assert honest.runner == "host" and honest.label == "complete", honest
        assert honest.result["raw_result"]["answer"] == f"answer {i}"
    for i in range(2):
        hostile = outcomes[f"hostile{i}"]
        # its forged answer went down its own socket: its own verdict, the one verdict it may give
        assert hostile.runner == "host" and hostile.label == "complete", hostile
        tried = hostile.result["raw_result"]["tried"]
        for name, what in tried.items():
            if name == "signalled":
                assert what == [], what  # no process it could signal, not the host, not a sibling
            elif name == "glob_jobs":
                assert what == "[]"  # glob swallows the refusal: no other job's database found
            else:
                assert what.startswith("refused"), (name, what)
    # the host survived all of it and serves on
    assert run(HONEST, dbs).label == "complete"


def test_a_verifiers_timeout_crash_and_memory_are_its_own(dbs):
    loop = "def verify_task_completion(initial_db_path, final_db_path, final_answer):\n    while True:\n        pass\n"
    crash = "def verify_task_completion(initial_db_path, final_db_path, final_answer):\n    import os\n    os._exit(3)\n"
    hog = ("def verify_task_completion(initial_db_path, final_db_path, final_answer):\n"
           "    x = bytearray(4 << 30)\n    return {'result': 'complete'}\n")
    outcomes = {}

    def go(name, code, **kw):
        outcomes[name] = run(code, dbs, **kw)

    threads = [threading.Thread(target=go, args=("loop", loop), kwargs={"timeout": 2.0}),
               threading.Thread(target=go, args=("crash", crash)),
               threading.Thread(target=go, args=("hog", hog), kwargs={"memory_mb": 256}),
               threading.Thread(target=go, args=("honest", HONEST))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes["loop"].error_kind == "timeout" and outcomes["loop"].runner == "host"
    # a child that ended without an answer is confirmed in a sandbox of its own (a host's child may end where a
    # sandbox of its own would not: tests/test_verifier_host_attacks.py), which gives the old design's verdict
    assert outcomes["crash"].error_kind == "crashed" and outcomes["crash"].runner == "sandbox"
    assert "exited with 3" in outcomes["crash"].error
    assert outcomes["hog"].error_kind == "memory"
    assert outcomes["honest"].label == "complete"
    for name in ("loop", "crash", "hog"):
        assert outcomes[name].label == "judge_error"


def test_a_host_that_ends_under_a_verification_leaves_it_to_a_sandbox_of_its_own(dbs):
    assert run(HONEST, dbs).runner == "host"
    host = shared_host.host_for(SCENARIO, 1024)
    done = {}

    def go():
        done["outcome"] = run(HONEST, dbs)

    t = threading.Thread(target=go)
    t.start()
    while not host.pending and t.is_alive():  # a condition, not a pause: the request is with the host
        threading.Event().wait(0.01)
    os.killpg(host.proc.pid, signal.SIGKILL)
    t.join()
    assert done["outcome"].label == "complete"  # answered by a sandbox of its own, or by the host before it ended
    assert run(HONEST, dbs).runner == "host"  # and the next one has a new host


def test_code_that_starts_threads_or_processes_gets_a_sandbox_of_its_own(dbs):
    threaded = HONEST.replace("import sqlite3, time", "import sqlite3, time, threading")
    outcome = run(threaded, dbs)
    assert outcome.runner == "sandbox" and outcome.label == "complete"
    assert shared_host.needs_own_sandbox("import subprocess") and shared_host.needs_own_sandbox("os.fork()")
    assert not shared_host.needs_own_sandbox("SELECT * FROM message_thread")


def test_the_job_directories_go_and_the_parent_follows_nothing_the_host_made(dbs):
    """What a job left is removed with its directory; a link the sandbox could have planted is never followed."""
    run(HONEST, dbs)
    host = shared_host.host_for(SCENARIO, 1024)
    assert sorted(os.listdir(host.work)) == []
    outside = Path(tempfile.mkdtemp()) / "victim"
    outside.write_text("keep")
    os.symlink(outside, host.work / "planted")  # as if sandboxed code had made it
    assert run(HONEST, dbs).label == "complete"
    assert outside.read_text() == "keep"


@pytest.mark.timeout(600)
def test_host_verdicts_equal_own_sandbox_verdicts_on_solved_sample_episodes(tmp_path, capsys):
    """The oracle's episodes of every sample scenario (solved) and the untouched databases (unsolved), each task's
    code- and sql-mode verifier, verified both ways."""
    from awm_engine.cli import main as awm

    out = tmp_path / "eval"
    assert awm(["eval", "run", "--policy", "oracle", "--task", "0", "--task", "1", "--workers", "2", "--quiet",
                "--out", str(out)]) == 0
    capsys.readouterr()
    catalog = Catalog.load()
    checked = 0
    for trajectory in sorted(out.rglob("trajectory.json")):
        run_dir = trajectory.parent
        data = json.loads(trajectory.read_text())
        key, task = data["scenario"], data["task_id"]
        scenario = catalog.get(key)
        for mode in ("code", "sql"):
            v = scenario.verifier(task, mode)
            for final in (run_dir / "final.db", run_dir / "initial.db"):
                host = run_verifier(v, run_dir / "initial.db", final, "done", mode=mode, scenario=key)
                with pytest.MonkeyPatch.context() as mp:
                    mp.setenv(shared_host.ENV_SWITCH, "0")
                    own = run_verifier(v, run_dir / "initial.db", final, "done", mode=mode, scenario=key)
                assert host.runner == "host" and own.runner == "sandbox"
                assert (host.label, host.result, host.error_kind) == (own.label, own.result, own.error_kind)
                checked += 1
    assert checked >= 40 and any(True for _ in out.rglob("final.db"))


def test_host_verdicts_equal_own_sandbox_verdicts_on_real_verifiers(tmp_path, awm_real):
    catalog = Catalog.load([awm_real])
    checked = 0
    for key in list(catalog.scenarios):
        scenario = catalog.get(key)
        template, _ = TemplateCache(tmp_path / "tpl").get(scenario)
        for task in range(len(scenario.tasks)):
            for mode in ("code", "sql"):
                v = scenario.verifier(task, mode)
                if v is None:
                    continue
                host = run_verifier(v, template, template, "done", mode=mode, scenario=key)
                with pytest.MonkeyPatch.context() as mp:
                    mp.setenv(shared_host.ENV_SWITCH, "0")
                    own = run_verifier(v, template, template, "done", mode=mode, scenario=key)
                assert (host.label, host.result, host.error_kind) == (own.label, own.result, own.error_kind), key
                checked += 1
    assert checked >= 20


def test_a_host_started_from_a_thread_that_ended_serves_on(dbs):
    """bubblewrap's parent-death signal follows the thread that started it: hosts start from one long-lived thread,
    so a verification run from a short-lived one (as every batch runs them) leaves a host that serves on."""
    first = {}
    t = threading.Thread(target=lambda: first.update(outcome=run(HONEST, dbs)))
    t.start()
    t.join()
    host = shared_host.host_for(SCENARIO, 1024)
    assert first["outcome"].runner == "host" and host.alive
    assert run(HONEST, dbs).runner == "host" and shared_host.host_for(SCENARIO, 1024) is host


def test_doctor_sandbox_says_whether_verifier_hosts_are_on(capsys, monkeypatch):
    from awm_engine.cli import main as awm

    awm(["doctor", "sandbox"])
    assert "verifier hosts: on" in capsys.readouterr().out
    monkeypatch.setenv(shared_host.ENV_SWITCH, "0")
    awm(["doctor", "sandbox"])
    out = " ".join(capsys.readouterr().out.split())
    assert "verifier hosts: off (AWM_VERIFIER_HOST=0): each verifier gets a sandbox of its own" in out


@pytest.mark.parametrize("value, on", [("0", False), ("false", False), ("OFF", False), ("no", False), ("1", True),
                                       ("yes", True), ("", True), ("banana", False)])
def test_the_switch_takes_the_usual_spellings_and_an_unknown_one_is_off(monkeypatch, value, on):
    monkeypatch.setenv(shared_host.ENV_SWITCH, value)
    usable, why = shared_host.usable()
    assert usable is on and (on or shared_host.ENV_SWITCH in why)


def test_a_verifier_does_not_see_the_switch(dbs, monkeypatch):
    monkeypatch.setenv(shared_host.ENV_SWITCH, "1")
    code = ("def verify_task_completion(initial_db_path, final_db_path, final_answer):\n    import os\n"
            "    return {'result': 'others', 'env': sorted(k for k in os.environ if k.startswith('AWM_VERIFIER'))}\n")
    assert run(code, dbs).result["raw_result"]["env"] == []
