"""Attacks on awm's containment by a hostile environment author that got through (found by attacking awm as such an
author would; each test fails while its gap is open). See docs/containment.md."""
from __future__ import annotations

import asyncio
import json
import threading

import pytest
from test_containment_regressions import RUNNER  # a tool that runs the code it is given
from tinyenv import make_env_dir

from awm_engine.data.catalog import Catalog
from awm_engine.runtime import episode as episode_module
from awm_engine.runtime.pool import EnvPool
from awm_engine.sandbox import host


# the environment takes SQLite's exclusive lock on its own episode database and keeps it: a POSIX lock on the file,
# which every process that opens the file sees, inside the sandbox or not
HOLD_LOCK = r'''
import glob, os, sqlite3, threading, time
taken = []
def hold(path, ready):
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    ready.set()
    while True:
        time.sleep(3600)
for path in glob.glob(os.path.join(os.getcwd(), "episodes", "*", "final.db")):
    ready = threading.Event()
    threading.Thread(target=hold, args=(path, ready), daemon=True).start()
    ready.wait(60)
    taken.append(ready.is_set())
out = taken
'''


def _needs_namespaces():
    if not host.protections().namespaces:
        pytest.skip(f"no namespace layer here: {host.protections().off.get('namespaces')}")


def _runner(tmp_path, name: str):
    """A scenario whose ``run`` tool runs the code it is given, in a worker sandbox."""
    _needs_namespaces()
    return Catalog.load([make_env_dir(tmp_path / "d", {name: RUNNER})]).get(name.lower())


def _in_thread(fn, *args):
    """Run ``fn`` on a daemon thread: (finished, result or exception). A call that never returns is reported as not
    finished (after a bound far past what it needs) instead of hanging the test run."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(150)
    return not thread.is_alive(), box


def test_a_lock_the_environment_holds_on_its_database_cannot_hang_a_snapshot(tmp_path, monkeypatch):
    """``awm agent replay`` (and the TUI's replay, and a Ray pool's ``snapshot``) copies the live episode database
    after each step with SQLite's backup API, whose Python wrapper retries for as long as the source is locked: an
    environment holding an exclusive lock on its own database hung the replay — and, the snapshot being taken on the
    event loop, everything else of that awm process — forever."""
    monkeypatch.setattr(episode_module, "SNAPSHOT_LOCK_WAIT", 3.0, raising=False)
    scenario = _runner(tmp_path, "Locker")

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=tmp_path / "run")
            held = json.loads((await episode.call_tool("run", {"code": HOLD_LOCK})).text)["out"]
            assert held == [True], held
            finished, box = _in_thread(episode.snapshot, tmp_path / "snap.db")
            await episode.close()
            return finished, box

    finished, box = asyncio.run(go())
    assert finished, "the snapshot of a database the environment keeps locked never returned"
    assert "error" in box and "lock" in str(box["error"]).lower(), box


# the environment takes a write lease on each of its episode's files: any other process's open of one then fails at
# once (O_NONBLOCK) or waits for the holder (up to fs.lease-break-time, 45 s), and the holder is only told
LEASE = r'''
import builtins, fcntl, glob, os
taken = {}
builtins._awm_leases = []
for path in glob.glob(os.path.join(os.getcwd(), "episodes", "*", "*.db")):
    try:
        fd = os.open(path, os.O_RDONLY)
        fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)  # F_SETLEASE
        builtins._awm_leases.append(fd)
        taken[os.path.basename(path)] = True
    except OSError as exc:
        taken[os.path.basename(path)] = str(exc)
out = taken
'''


def test_a_lease_the_environment_takes_on_its_databases_does_not_break_closing_the_episode(tmp_path):
    """Closing an episode takes its databases out of the worker's directory with non-blocking, no-follow opens; a
    file lease the environment holds on them made that open fail with EWOULDBLOCK, which nothing expected: the
    episode's close raised ``BlockingIOError`` (an ``awm eval`` rollout lost to an error no one could read). Now a
    leased file is refused like a symlink: named in ``unsafe_entries.txt``, and the episode closes."""
    scenario = _runner(tmp_path, "Leaser")
    run = tmp_path / "run"

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=run)
            taken = json.loads((await episode.call_tool("run", {"code": LEASE})).text)["out"]
            await episode.close()
            again = await pool.open_episode(scenario, run_dir=tmp_path / "run2")  # the worker goes on serving
            listed = await again.call_tool("list_notes", {})
            await again.close()
            return taken, listed

    taken, listed = asyncio.run(go())
    assert any(v is True for v in taken.values()), taken  # the kernel granted a lease: the attack was made
    unsafe = (run / "unsafe_entries.txt").read_text()
    assert "lease" in unsafe, unsafe
    assert not listed.is_error and "first" in listed.text
    assert (tmp_path / "run2" / "final.db").is_file()


LOOPBACK = '''
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    s.sendall(b"from-the-sandbox")
    s.close()
    print("connected")
except OSError as exc:
    print(type(exc).__name__)
'''


def test_a_sandbox_with_network_cannot_reach_the_hosts_loopback_listeners(tmp_path):
    """A sandbox with network (MCP-Universe's servers) shares the host's network namespace; Landlock lets its TCP
    connections reach only the web ports (80, 443 by default), so no loopback listener on another port (a
    database, a Ray dashboard, a model server) can be reached. The same listener is reachable when its port is
    allowed: the refusal is the port rule's, not an accident of the test."""
    import socket
    import sys

    from awm_engine.sandbox import host
    from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy

    _needs_namespaces()
    if host.landlock_abi() < 4:
        pytest.skip(f"Landlock ABI {host.landlock_abi()} < 4: no TCP port rules on this kernel (recorded as such)")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        done = Sandbox(SandboxPolicy(writable=[], network=True), "loopback").run(
            [sys.executable, "-c", LOOPBACK, str(server.getsockname()[1])], timeout=120, capture_output=True)
    finally:
        server.close()
    assert done.stdout.decode().strip() == "PermissionError", done.stdout.decode() + done.stderr.decode()[-800:]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        port = server.getsockname()[1]
        allowed = Sandbox(SandboxPolicy(writable=[], network=True, connect_ports=[port]), "loopback").run(
            [sys.executable, "-c", LOOPBACK, str(port)], timeout=120, capture_output=True)
    finally:
        server.close()
    assert allowed.stdout.decode().strip() == "connected", allowed.stderr.decode()[-800:]


def test_the_ports_a_network_sandbox_may_reach_are_named_exactly(monkeypatch):
    from awm_engine.sandbox.launcher import network_ports

    monkeypatch.delenv("AWM_SANDBOX_NET_PORTS", raising=False)
    assert network_ports() == [80, 443]
    monkeypatch.setenv("AWM_SANDBOX_NET_PORTS", "443, 9876")
    assert network_ports() == [443, 9876]
    for bad in ("443,x", "0", "70000", "80;443"):
        monkeypatch.setenv("AWM_SANDBOX_NET_PORTS", bad)
        with pytest.raises(ValueError, match="AWM_SANDBOX_NET_PORTS"):
            network_ports()


# a directory tree deeper than Python's recursion limit in the episode's own directory
DEEP = r'''
import glob, os
made = 0
for live in glob.glob(os.path.join(os.getcwd(), "episodes", "*")):
    fd = os.open(live, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
        made += 1
    os.close(fd)
out = made
'''


def test_a_directory_tree_deeper_than_the_recursion_limit_does_not_break_closing_the_episode(tmp_path):
    """The parent removes what sandboxed code leaves in a directory with ``shutil.rmtree``, which recurses once per
    level: an environment that made its episode directory 3,000 levels deep made the episode's close raise
    ``RecursionError`` (and left the tree behind). Now such trees are removed level by level, none deeper than one."""
    scenario = _runner(tmp_path, "Deep")
    run = tmp_path / "run"

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=run)
            assert not (await episode.call_tool("add_note", {"text": "kept"})).is_error
            made = json.loads((await episode.call_tool("run", {"code": DEEP})).text)["out"]
            live = episode.info.live_dir
            await episode.close()
            return made, live.exists()

    made, left = asyncio.run(go())
    assert made == 3000
    assert not left  # removed, not left behind
    import sqlite3

    assert sqlite3.connect(run / "final.db").execute("SELECT count(*) FROM notes WHERE text = 'kept'").fetchone() == (1,)


def test_removing_a_rigged_tree_follows_no_link_at_any_depth(tmp_path):
    """The level-by-level removal goes through descriptors: links to a directory and a file outside, at the top and
    3,000 levels down, are removed as links; what they point at stays."""
    import os

    from awm_engine.sandbox import safe_fs

    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "canary").write_text("keep")
    tree = tmp_path / "tree"
    tree.mkdir()
    fd = os.open(tree, os.O_RDONLY)
    for depth in range(3000):
        if depth in (0, 2999):
            os.symlink(str(outside), "to-dir", dir_fd=fd)
            os.symlink(str(outside / "inner" / "canary"), "to-file", dir_fd=fd)
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    safe_fs.remove_tree(tree)
    assert not tree.exists()
    assert (outside / "inner" / "canary").read_text() == "keep"
