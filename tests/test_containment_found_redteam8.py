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
2. epoll watches, counted per uid. ``fs.epoll.max_user_watches`` bounds the watches of every epoll instance of a host
   uid together, over every user namespace. Processes of one sandbox, each adding its 500 descriptors to 500 epoll
   instances, held every watch there is within seconds; from then on no other sandbox could start an asyncio event
   loop (it registers its wake-up pipe at once) — every other scenario's worker, verifier host or build that started
   died. A sandbox without network makes no epoll instance (the system-call filter), and Python falls back to poll,
   which the kernel counts nowhere.
3. A served client's TCP socket, handed to the worker, is a socket of the host's network namespace. The worker's own
   namespace is empty, but ``connect(AF_UNSPEC)`` disconnects a TCP socket and it can then connect (or, with
   ``MSG_FASTOPEN``, send) to any address the host reaches — a loopback database, a model server, the Internet.
   Only Landlock's TCP rules (ABI >= 4: Linux 6.7) stop that; on older kernels (Debian 12, Ubuntu 22.04) every
   served environment had the host's network while its run said ``network_isolated``. There the engine's front
   now hands the worker a unix socket and relays the bytes, and the lean front (which hands TCP sockets) is not used.
"""
from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys

import pytest

from awm_engine.data.records import Verifier
from awm_engine.sandbox import host, seccomp
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


# every watch this uid may have: processes (16 at a time) each put 500 eventfds in 500 epoll instances, and keep them
EPOLL_FLOOD = r'''
import os, select, sys
limit = int(open("/proc/sys/fs/epoll/max_user_watches").read())
per_child = 250_000
pipes = []
for _ in range(min(60, limit // per_child + 2)):
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        added, error = 0, 0
        held = []
        try:
            targets = [os.eventfd(0) for _ in range(500)]
            for _ in range(500):
                ep = select.epoll()
                held.append(ep)
                for t in targets:
                    ep.register(t, select.EPOLLIN)
                    added += 1
        except OSError as exc:
            error = exc.errno
        os.write(w, f"{added} {error}\n".encode())
        os.read(0, 1)  # held until the test ends
        os._exit(0)
    os.close(w)
    pipes.append(r)
total, errors = 0, set()
for r in pipes:
    added, error = os.read(r, 100).split()
    total += int(added)
    errors.add(int(error))
print(total, " ".join(map(str, sorted(errors))), flush=True)
sys.stdin.read()
'''

LOOP = "import asyncio; asyncio.run(asyncio.sleep(0)); print('event loop ran')"


@pytest.mark.skipif(not host.protections().namespaces or not host.protections().syscall_filter,
                    reason="needs the sandbox and its system-call filter")
def test_a_sandbox_cannot_take_every_epoll_watch_of_the_uid_every_sandbox_shares():
    work, other = private_dir("awm_rt8_epoll_"), private_dir("awm_rt8_loop_")
    flood = Sandbox(SandboxPolicy(writable=[str(work)]), "worker")
    try:
        proc = flood.popen([sys.executable, "-c", EPOLL_FLOOD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        total, *errors = proc.stdout.readline().split()
        # another sandbox (another scenario's worker, a verifier host) starts an event loop meanwhile
        done = Sandbox(SandboxPolicy(writable=[str(other)]), "worker").run(
            [sys.executable, "-c", LOOP], capture_output=True, timeout=120)
        assert done.returncode == 0 and b"event loop ran" in done.stdout, done.stderr[-2000:]
        assert int(total) == 0 and errors == [b"1"]  # EPERM: no epoll instance at all (was: every watch, ENOSPC)
    finally:
        flood.cleanup()
        remove_dir(work)
        remove_dir(other)


def test_only_a_sandbox_with_network_keeps_epoll():
    assert set(seccomp.EPOLL) == {"epoll_create", "epoll_create1"}
    offline = Sandbox(SandboxPolicy(), protections=host.protections())
    spec = offline._init_argv(["true"], [])
    import json

    assert json.loads(spec[spec.index("awm_engine.sandbox.init") + 1])["epoll"] is False
    online = Sandbox(SandboxPolicy(network=True), protections=host.protections(True))
    spec = online._init_argv(["true"], [])
    assert json.loads(spec[spec.index("awm_engine.sandbox.init") + 1])["epoll"] is True


class _Worker:
    """The engine's side of a worker's descriptor channel, and what the worker receives on it."""

    def __init__(self):
        self.channel, self.inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.alive, self.generation, self.lease = True, 1, None


def test_a_served_worker_without_landlock_tcp_rules_never_gets_the_clients_tcp_socket(monkeypatch):
    import asyncio

    from awm_engine.runtime import lean_handoff
    from awm_engine.runtime.mcp_server import ServeFront

    host.protections()  # (measured as this host is)
    monkeypatch.setattr(host, "landlock_abi", lambda: 3)  # a kernel before 6.7: no Landlock TCP rules
    worker = _Worker()

    async def serve_one() -> tuple[int, bytes, bytes]:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        front = ServeFront(worker, port, None)
        front.serving = worker.generation
        task = asyncio.create_task(front.run_http(listener))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 2\r\n\r\n{}" % port)
            await writer.drain()
            worker.inside.settimeout(30)
            data, fds, _, _ = await asyncio.to_thread(socket.recv_fds, worker.inside, 1 << 16, 2)
            with socket.socket(fileno=fds[0]) as handed:
                family = handed.family
                handed.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            answer = await asyncio.wait_for(reader.read(), 30)
            writer.close()
            return family, data, answer
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            listener.close()

    family, data, answer = asyncio.run(serve_one())
    assert family == socket.AF_UNIX  # was AF_INET: the client's own socket, in the host's network namespace
    assert data.startswith(b"hPOST /mcp HTTP/1.1")  # the bytes the front read and checked, as before
    assert answer.endswith(b"\r\n\r\nok")  # relayed back to the client
    # and the lean front, which hands the client's socket itself, is not used there
    facts = {"distinct_uid": True, "proc_isolated": True, "unsafe_no_sandbox": False, "writes_confined": True}
    leased = type("Leased", (), {"lease": type("Lease", (), {"protections": facts})()})()
    monkeypatch.setattr(lean_handoff, "PROCESS_ENTRY", [True])
    assert "Landlock" in (lean_handoff.refusal(False, leased, True) or "")


def test_where_landlock_refuses_tcp_the_client_socket_is_handed_over_as_before():
    if host.landlock_abi() < 4 or not host.protections().writes_confined:
        pytest.skip("no Landlock TCP rules on this host")
    assert host.tcp_confined(host.protections())
