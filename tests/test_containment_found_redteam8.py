"""Red team 8: what a hostile environment, verifier or data could still do to other sandboxes or to awm (each test
names its finding and failed before its fix).

1. Descriptors in flight, counted per uid. The kernel refuses ``SCM_RIGHTS`` (``ETOOMANYREFS``) to a sender once
   its uid has more descriptors in flight — sent over a unix socket and not yet received — than the sender's soft
   ``RLIMIT_NOFILE``. Every sandbox runs as the same host uid, and a sandbox may send descriptors into a socket pair
   of its own that it never reads: an environment that did so at import (about 1,300, its limit being 1024) made
   every verifier host's fork runner refuse work for as long as it lived — every scenario's verifications went to
   sandboxes of their own, and BFCL's multi-turn entries (run on the same fork runner) errored as infrastructure
   failures. A fork runner's host now has a soft limit far above what any sandbox's code may reach, and the runner
   and its children keep the sandbox's own.
"""
from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from awm_engine.data.records import Verifier
from awm_engine.sandbox import host
from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy, private_dir, remove_dir
from awm_engine.verify import shared_host
from awm_engine.verify.verification import run_verifier

# descriptors sent into a socket pair that is never read, until the kernel refuses more; then it waits
FLOOD = r'''
import socket, sys
a, b = socket.socketpair()
held = socket.socketpair()[0]
sent = 0
try:
    while True:
        socket.send_fds(a, [b"x"], [held.fileno()] * 253)
        sent += 253
except OSError as exc:
    print(sent, exc.errno, flush=True)
sys.stdin.read()
'''

LIMITS = '''
import resource
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"result": "complete", "soft": soft, "hard": hard}
'''


@pytest.fixture()
def dbs(tmp_path):
    for name in ("initial", "final"):
        with sqlite3.connect(tmp_path / f"{name}.db") as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.close()
    return tmp_path / "initial.db", tmp_path / "final.db"


needs_hosts = pytest.mark.skipif(not shared_host.usable()[0] or not host.protections().namespaces,
                                 reason=f"verifier hosts are not usable here: {shared_host.usable()[1]}")


@needs_hosts
def test_a_sandbox_holding_descriptors_in_flight_does_not_stop_other_scenarios_verifier_hosts(dbs):
    shared_host.close_all()
    work = private_dir("awm_rt8_flood_")
    flood = Sandbox(SandboxPolicy(writable=[str(work)]), "worker")  # an environment worker's limits
    try:
        proc = flood.popen([sys.executable, "-c", FLOOD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        sent, errno = proc.stdout.readline().split()
        assert int(errno) == 109 and int(sent) > 1024  # ETOOMANYREFS: the uid's count is past a sandbox's limit
        verdict = run_verifier(Verifier("some_other_scenario", 0, "code", LIMITS, None), *dbs,
                               scenario="some_other_scenario")
        assert verdict.label == "complete"
        assert verdict.runner == "host"  # was "sandbox": the host's runner got no descriptor, every job fell back
        # and the verifier's own process cannot put more in flight than any sandbox's code
        assert verdict.result["raw_result"]["soft"] <= 1024
        assert verdict.result["raw_result"]["hard"] <= 1024
    finally:
        flood.cleanup()
        remove_dir(work)
        shared_host.close_all()
