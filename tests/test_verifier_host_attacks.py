"""Red-team findings against verifier hosts (``verify/host.py``, ``verify/shared_host.py``), each a failing test before
its fix:

* SysV IPC objects (segments, queues, semaphores) outlived a host's child and were shared by the host's IPC
  namespace: one verifier's data survived into the next (and a segment's memory, counted by no limit of the child's,
  could fill the host's cgroup so that the OOM killer ended the next, honest verifier: "crashed"); inotify (which
  Landlock does not cover) named other jobs' directories and reported their databases' use;
* the host's quota (``DISK_MB`` × parallel) is shared by every job waiting for a turn: with enough of them queued
  (or held by verifiers that sleep out their timeout) an honest verification's databases did not fit and its verdict
  became ``db_missing``, where a sandbox of its own has a quota of its own;
* verdicts that differed from a sandbox of its own: a verifier that writes a scratch file (``/tmp``, ``tempfile``),
  one that reads a database in WAL mode, one that imports a library that starts threads (numpy's OpenBLAS: the
  child ended), a result of 16 to 48 MiB (a host took it, a sandbox of its own calls it ``bad_return``).

Every assertion holds in any interleaving: the tests wait on conditions, never on time.
"""
from __future__ import annotations

import importlib.util
import sqlite3
import threading

import pytest

from awm_engine.data.records import Verifier
from awm_engine.sandbox import limits
from awm_engine.verify import host as verify_host
from awm_engine.verify import shared_host, verification
from awm_engine.verify.verification import run_verifier

from tests.test_verifier_host import fresh_hosts  # noqa: F401 - autouse: every test starts with no host
from tests.test_verifier_host import pytestmark  # noqa: F401 - skipped where verifier hosts are not usable

SCENARIO = "redvhost_attacks"


def make_dbs(base, wal=False, pad=0):
    for name, rows in (("initial", 1), ("final", 2)):
        conn = sqlite3.connect(base / f"{name}.db")
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany("INSERT INTO notes (body) VALUES (?)", [(f"note {i}",) for i in range(rows)])
        if pad:
            conn.execute("CREATE TABLE pad (b BLOB)")
            conn.execute("INSERT INTO pad VALUES (zeroblob(?))", (pad,))
        conn.commit()
        conn.close()
    return base / "initial.db", base / "final.db"


@pytest.fixture
def dbs(tmp_path):
    return make_dbs(tmp_path)


def run(code, dbs, answer="done", host=True, **kw):
    with pytest.MonkeyPatch.context() as mp:
        if not host:
            mp.setenv(shared_host.ENV_SWITCH, "0")
        return run_verifier(Verifier(SCENARIO, 0, "code", code, None), dbs[0], dbs[1], answer, scenario=SCENARIO,
                            **kw)


HONEST = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    before = sqlite3.connect(initial_db_path).execute("SELECT COUNT(*) FROM notes").fetchone()[0]
    after = sqlite3.connect(final_db_path).execute("SELECT COUNT(*) FROM notes").fetchone()[0]
    return {"result": "complete" if after == before + 1 else "others"}
'''

LEAVE = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    tried = {}
    sid = libc.shmget(0x5eed, 4096, 0o1000 | 0o666)
    tried["shmget"] = ctypes.get_errno() if sid < 0 else "made"
    if sid >= 0:
        addr = libc.shmat(sid, None, 0)
        ctypes.memmove(addr, final_answer.encode(), len(final_answer))
    qid = libc.msgget(0x5eee, 0o1000 | 0o666)
    tried["msgget"] = ctypes.get_errno() if qid < 0 else "made"
    if qid >= 0:
        message = ctypes.create_string_buffer(b"\\1\\0\\0\\0\\0\\0\\0\\0" + final_answer.encode())
        libc.msgsnd(qid, message, len(final_answer), 0)
    semid = libc.semget(0x5eef, 1, 0o1000 | 0o666)
    tried["semget"] = ctypes.get_errno() if semid < 0 else "made"
    watch = libc.inotify_init1(0)
    tried["inotify"] = ctypes.get_errno() if watch < 0 else libc.inotify_add_watch(
        watch, os.path.dirname(os.path.dirname(initial_db_path)).encode(), 0xfff)
    return {"result": "others", "tried": tried}
'''

FIND = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    found = {}
    sid = libc.shmget(0x5eed, 0, 0)
    if sid >= 0:
        found["shm"] = ctypes.string_at(libc.shmat(sid, None, 0), 64).rstrip(b"\\0").decode()
    qid = libc.msgget(0x5eee, 0)
    if qid >= 0:
        buf = ctypes.create_string_buffer(256)
        n = libc.msgrcv(qid, buf, 200, 0, 0o4000)
        found["msg"] = buf.raw[8:8 + max(n, 0)].decode()
    found["sem"] = libc.semget(0x5eef, 0, 0) >= 0
    return {"result": "others", "found": found}
'''


def test_nothing_of_one_verifier_survives_into_the_next_through_sysv_ipc_or_is_watched_with_inotify(dbs):
    left = run(LEAVE, dbs, answer="task one's secret")
    assert left.runner == "host", left
    tried = left.result["raw_result"]["tried"]
    assert tried == {"shmget": 1, "msgget": 1, "semget": 1, "inotify": 1}, tried  # EPERM, every one
    found = run(FIND, dbs, answer="task two")
    assert found.runner == "host" and found.result["raw_result"]["found"] == {"sem": False}, found.result


SLEEPER = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import time
    time.sleep(600)
'''


@pytest.mark.skipif(not limits.quota_support()[0], reason="no tmpfs quotas here")
def test_jobs_queued_in_a_host_do_not_leave_an_honest_verification_without_room_for_its_databases(tmp_path,
                                                                                                   monkeypatch):
    """Four verifications that hold their turn (and their databases) fill the host's shared quota: the next one's
    databases fit a sandbox of its own's quota, so it must not become db_missing."""
    monkeypatch.setattr(limits, "DISK_MB", 12)  # a host: 48 MiB for four jobs; a sandbox of its own: 12 MiB
    dbs = make_dbs(tmp_path, pad=5 << 20)  # ~10 MiB a job
    held = []
    sleepers = [threading.Thread(target=lambda: held.append(run(SLEEPER, dbs, timeout=5))) for _ in range(4)]
    for t in sleepers:
        t.start()
    host = None
    while host is None or len(host.pending) < 4:  # the four jobs' databases are in the host
        threading.Event().wait(0.02)
        host = shared_host._hosts.get((SCENARIO, verification.DEFAULT_MEMORY_MB))
    honest = run(HONEST, dbs)
    assert honest.label == "complete", honest
    for t in sleepers:
        t.join()
    assert [o.error_kind for o in held] == ["timeout"] * 4


TMP_WRITE = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import tempfile
    with tempfile.NamedTemporaryFile("w") as fh:
        fh.write("scratch")
    return {"result": "complete"}
'''
WAL_READ = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import sqlite3
    try:
        n = sqlite3.connect(final_db_path).execute("SELECT COUNT(*) FROM notes").fetchone()[0]
    except Exception as exc:  # as many real verifiers do: an error is "others"
        return {"result": "others", "error": str(exc)}
    return {"result": "complete" if n == 2 else "others"}
'''
NUMPY = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    import numpy
    return {"result": "complete", "sum": int(numpy.arange(4).sum())}
'''
BIG = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    return {"result": "complete", "blob": "a" * (20 << 20)}
'''


@pytest.mark.parametrize("name", ["tmp_write", "wal_read", "numpy", "big_result"])
def test_a_verdict_in_a_host_is_the_verdict_of_a_sandbox_of_its_own(name, tmp_path):
    if name == "numpy" and importlib.util.find_spec("numpy") is None:
        pytest.skip("numpy is not installed")
    code = {"tmp_write": TMP_WRITE, "wal_read": WAL_READ, "numpy": NUMPY, "big_result": BIG}[name]
    dbs = make_dbs(tmp_path, wal=name == "wal_read")
    host, own = run(code, dbs), run(code, dbs, host=False)
    assert own.runner == "sandbox"
    assert (host.label, host.error_kind, host.result) == (own.label, own.error_kind, own.result)
    assert verify_host.RESULT_LIMIT == verification.RESULT_LIMIT
