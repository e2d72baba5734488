"""SIGTERM to `awm env serve` cleans up as Ctrl-C does: the episode's databases end up in the session directory and
nothing else is left behind — no `<out>/.awm` (the worker's directory), nothing in TMPDIR (sandboxes)."""
from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from awm_engine.runtime.ports import free_port

SCENARIO = "maple_library_lending"


def wait_until_serving(proc: subprocess.Popen, out, port: int | None, deadline: float = 120.0) -> None:
    """Until the session is written (and, over HTTP, the port accepts): generous, never a tight timing."""
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"awm env serve exited with {proc.returncode}: {proc.stderr.read()}")
        if (out / "session.json").is_file():
            if port is None:
                return
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("awm env serve did not start")


@pytest.mark.parametrize("transport,sig", [("http", signal.SIGTERM), ("http", signal.SIGINT),
                                           ("stdio", signal.SIGTERM)], ids=["http-sigterm", "http-sigint",
                                                                           "stdio-sigterm"])
def test_a_stopped_server_leaves_its_databases_and_nothing_else(tmp_path, transport, sig):
    tmpdir, out = tmp_path / "tmp", tmp_path / "session"
    tmpdir.mkdir()
    port = free_port() if transport == "http" else None
    where = ["--port", str(port)] if port else ["--stdio"]
    env = {**os.environ, "TMPDIR": str(tmpdir), "AWM_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario", SCENARIO, *where,
                             "--out", str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until_serving(proc, out, port)
        assert (out / ".awm").is_dir()  # the worker's directory, while it serves
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopped; databases in" in err
    for name in ("initial.db", "final.db"):
        with sqlite3.connect(out / name) as db:  # moved into place whole: a database with the scenario's tables
            assert db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] > 0
    assert not (out / ".awm").exists()
    assert sorted(p.name for p in out.iterdir()) == ["calls.jsonl", "final.db", "initial.db", "server.log",
                                                    "server_code.py", "session.json"]
    assert list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("signals", [(signal.SIGINT, signal.SIGINT), (signal.SIGINT, signal.SIGTERM),
                                     (signal.SIGTERM, signal.SIGINT)], ids=["int-int", "int-term", "term-int"])
def test_signals_after_the_first_do_not_cut_the_clean_up_short(tmp_path, signals):
    """`timeout` and a user (or a process group's ctrl+c) often send a SIGINT at once: the first signal stops the
    server, every later one is ignored with a note while the clean-up saves the databases. Before, asyncio's second
    SIGINT raised KeyboardInterrupt inside the clean-up: the server said "interrupted while stopping" and the
    session had no databases. The later signal is repeated until the server says it is ignoring it (no timing)."""
    out = tmp_path / "session"
    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmp_path), "AWM_CACHE_DIR": str(tmp_path / "cache")}
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario", SCENARIO,
                                 "--port", str(port), "--out", str(out)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err_file, env=env)
    try:
        proc.stderr = open(err_path)  # what wait_until_serving reports if the server exits early
        wait_until_serving(proc, out, port)
        proc.send_signal(signals[0])
        for _ in range(600):  # until the note, or the server is gone (a later signal never landed in time)
            if proc.poll() is not None or "still stopping" in err_path.read_text():
                break
            proc.send_signal(signals[1])
            time.sleep(0.05)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    err = err_path.read_text()
    assert proc.returncode == 0, err
    assert "interrupted while stopping" not in err, err
    assert "stopped; databases in" in err, err
    for name in ("initial.db", "final.db"):
        with sqlite3.connect(out / name) as db:
            assert db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] > 0
    assert not (out / ".awm").exists()
