"""What a new user found serving environments (``awm env serve``, its warm worker and lean front): one test per
finding."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tinyenv import make_env_dir, slow_write

from awm_engine.runtime.ports import free_port
from tests.test_exit_codes import awm
from tests.test_mcp_serve import wait_for_port
from tests.test_warm import call, log, service_dir, until  # noqa: F401 (service_dir: a fixture)


def _serve(data: Path, out: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--data", str(data), "--scenario",
                             "tiny", "--port", str(port), "--out", str(out), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_port(port, proc)
    until(lambda: (out / "session.json").exists(), "the session")
    return proc, port


def _notes(db: Path) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return [text for (text,) in conn.execute("SELECT text FROM notes ORDER BY id")]


def test_a_stop_right_after_a_handler_that_would_not_stop_keeps_a_warm_workers_databases(tmp_path, service_dir):
    """A call whose handler would not stop gets its (warm, leased) worker replaced; a Ctrl-C before the replacement
    made ``close`` replace it instead — and that replacement left the episode's databases in the leased worker's
    directory, which the warm service removes: the session had no initial.db nor final.db (``session.json`` said
    null), while the server printed ``stopped; databases in …`` and exited 0."""
    data = make_env_dir(tmp_path / "data", {"tiny": slow_write(60)})
    first, _ = _serve(data, tmp_path / "first")
    # asked by the first server once it serves (a stop before the service it started listens loses the ask)
    until(lambda: "bound to 'tiny'" in log(service_dir), "a spare bound to the scenario")
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=120) == 0
    out = tmp_path / "second"
    proc, port = _serve(data, out, "--timeout", "1")
    assert json.loads((out / "session.json").read_text())["worker"] == "warm"
    text = call(port, "slow_write", {"text": "kept"})
    assert "(the environment worker was restarted)" in text, text  # the handler would not stop
    proc.send_signal(signal.SIGINT)  # before the server has replaced that worker
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0, err
    session = json.loads((out / "session.json").read_text())
    assert session["final_db"] == str(out / "final.db") and session["initial_db"] == str(out / "initial.db"), err
    assert _notes(out / "final.db") == ["first", "second", "kept"]
    assert _notes(out / "initial.db") == ["first", "second"]


def test_a_second_server_on_the_same_out_is_refused_while_the_first_still_starts(tmp_path):
    """``--out`` was refused only once it held ``session.json``, written when the first server serves: a second
    server started meanwhile (a slow load, a template build) served in the same directory — one ``calls.jsonl`` for
    both, and the databases of whichever stopped last over the other's, both saying ``stopped; databases in …``."""
    data = make_env_dir(tmp_path / "data", {"tiny": "import time as _t\n_t.sleep(600)\n"})  # a load that never ends
    out = tmp_path / "session"
    first = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--data", str(data),
                              "--scenario", "tiny", "--port", "0", "--out", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: (out / "calls.jsonl").exists() or first.poll() is not None, "the first server's start")
        second = awm("env", "serve", "--data", str(data), "--scenario", "tiny", "--port", "0", "--out", str(out),
                     timeout=120)
        assert second.returncode == 2, second.stderr
        assert "another awm env serve, which is still starting or serving" in second.stderr, second.stderr
        assert first.poll() is None  # the first one is untouched
    finally:
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=120) == 0
    assert not (out / ".serve.lock").exists()  # gone with the server that held it


def test_a_stop_landing_as_a_workers_answer_comes_is_not_lost(tmp_path):
    """Ctrl-C (or SIGTERM) cancels the server's task; one that landed in the same turn as the answer a worker request
    awaited was dropped (``asyncio.wait_for`` of Python 3.11 returns the answer then): the server went on starting,
    served, and ignored every later Ctrl-C and SIGTERM as ``still stopping`` — only SIGKILL ended it, leaving its
    worker's directory behind. Seen once in a few dozen stops sent while a server started."""
    import asyncio

    from awm_engine.runtime.pool import WorkerProcess

    class Writer:
        def write(self, data: bytes) -> None:
            pass

        async def drain(self) -> None:
            pass

    async def main() -> None:
        worker = WorkerProcess(0, tmp_path / "log", tmp_path)
        worker.alive, worker._writer = True, Writer()
        task = asyncio.create_task(worker.request("list_tools"))
        while not worker.pending:
            await asyncio.sleep(0)
        (rid, answer), = worker.pending.items()
        answer.set_result({"id": rid, "ok": True, "result": {}})  # the answer comes …
        task.cancel()  # … and the stop, in the same turn
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the cancel was lost")

    asyncio.run(main())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["int", "term"])
def test_a_stop_while_the_server_imports_exits_0_without_a_traceback(tmp_path, signum):
    """``awm env serve`` spends half a second importing before it sets its handlers: a Ctrl-C then printed a
    ``KeyboardInterrupt`` traceback and a SIGTERM killed the process (143), where the docs promise exit 0 for either,
    while serving or still loading. The stop is sent here from inside the start, as the parser is built."""
    out = tmp_path / "session"
    code = ("import os, signal, sys; import awm_engine.cli as cli; build = cli.build_parser; "
            f"cli.build_parser = lambda argv=None: (os.kill(os.getpid(), {int(signum)}), build(argv))[1]; "
            f"sys.argv = ['awm', 'env', 'serve', '--scenario', 'maple_library_lending', '--port', '0', '--out', "
            f"{str(out)!r}]; sys.exit(cli.main())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stderr.strip() == "stopped before serving", done.stderr
    assert not out.exists()  # nothing was created


@pytest.mark.parametrize("verb", ["replay", "verify"])
def test_replaying_a_served_session_says_where_its_calls_and_changes_are(tmp_path, verb):
    """``awm replay`` (or ``awm verify``) of a session directory said only ``has no trajectory.json``: a user who
    served an episode and wants to see what the client did is told where its calls are and how to see its changes."""
    out = tmp_path / "session"
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario",
                             "maple_library_lending", "--port", "0", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    until(lambda: (out / "session.json").exists() or proc.poll() is not None, "the session")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 0
    shown = awm(verb, str(out))
    assert shown.returncode == 2, shown.stderr
    assert "session directory of an awm env serve" in shown.stderr and "calls.jsonl" in shown.stderr, shown.stderr
    assert "awm db diff" in shown.stderr, shown.stderr


def test_a_warm_server_killed_outright_leaves_its_databases_in_the_session(tmp_path, service_dir):
    """``kill -9`` of a server (the OOM killer, a harness giving up on it) left its own worker's databases in the
    session directory (``.awm/w0/episodes/…``, where session.json says), but a warm worker's went with the
    directory the service removes once the lease ends: nothing of the episode was left. The service now moves them
    into the session directory first."""
    data = make_env_dir(tmp_path / "data", {"tiny": ""})
    first, _ = _serve(data, tmp_path / "first")
    # asked by the first server once it serves (a stop before the service it started listens loses the ask)
    until(lambda: "bound to 'tiny'" in log(service_dir), "a spare bound to the scenario")
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=120) == 0
    out = tmp_path / "second"
    proc, port = _serve(data, out)
    assert json.loads((out / "session.json").read_text())["worker"] == "warm"
    assert '"text": "kept"' in call(port, "add_note", {"text": "kept"})
    proc.kill()
    proc.wait(timeout=60)
    until(lambda: "are kept in" in log(service_dir), "the service to keep the databases")
    assert _notes(out / "final.db") == ["first", "second", "kept"]
    assert _notes(out / "initial.db") == ["first", "second"]
    assert not list((service_dir / "spares").glob("*/w*/episodes/*/*.db"))


def test_an_out_that_cannot_be_created_is_refused_without_a_traceback(tmp_path):
    """``--out`` below a file (or where this user may not write) ended the server with a ``PermissionError`` /
    ``NotADirectoryError`` traceback; it is refused as other unusable ``--out`` are (exit 2, nothing started)."""
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    done = awm("env", "serve", "--scenario", "maple_library_lending", "--port", "0", "--out", str(afile / "session"),
               timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "cannot write a session there" in done.stderr, done.stderr
    assert afile.read_text() == "keep me"
