"""What attacking ``awm env serve``'s lean front (``runtime/lean_front.py``, ``runtime/lean_handoff.py``) found: a
hostile environment (its code writes on the worker's protocol socket, dies, floods), a stop signal at the moments the
process ``exec``s, and faults outside the sandbox. One regression test each; every test waits on a condition, and the
warm service's directory is the test's own (``service_dir``)."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.test_containment_found_serve import a_spare, initialized, notes, rpc, serve, stop
from tests.test_lean_front import _is_lean
from tests.test_serve_containment import DIE
from tests.test_warm import service_dir, until  # noqa: F401 - service_dir: the fixture

# a tool that writes ``data`` (latin-1), ``times`` over, on the worker's protocol socket
CONTROL = '''
class ControlIn(BaseModel):
    data: str
    times: int = 1

class ControlOut(BaseModel):
    sent: int

@app.post("/api/control", summary="Control", description="Writes on the protocol socket.", tags=["bad"], operation_id="control", response_model=ControlOut)
def control(req: ControlIn):
    import socket as _s
    argv = open("/proc/self/cmdline", "rb").read().split(b"\\0")
    s = _s.socket(fileno=os.dup(int(argv[argv.index(b"--fd") + 1])))
    s.setblocking(True)
    s.sendall(req.data.encode("latin-1") * req.times)
    return ControlOut(sent=req.times)
'''


def lean_server(tmp_path: Path, where: Path, code: str = "", name: str = "session", note: str | None = "kept"):
    """A server that took the warm service's spare and went lean, and (``note``) an MCP session of it that added a
    note."""
    a_spare(where)
    proc, port, out = serve(tmp_path, code, name=name)
    url = f"http://127.0.0.1:{port}/mcp"
    session = None
    try:
        assert json.loads((out / "session.json").read_text())["worker"] == "warm"
        until(lambda: _is_lean(proc.pid) or proc.poll() is not None, "the server to go lean")
        if note is not None:
            session = initialized(url)
            with httpx.Client(timeout=60) as client:
                assert rpc(client, url, session, 2, "add_note", {"text": note}).status_code == 200
    except BaseException:
        stop(proc)
        raise
    return proc, url, out, session


def control(url: str, session: str, data: str, times: int = 1) -> None:
    """The hostile tool, called without waiting for its answer (the worker may be replaced before it comes)."""
    def call() -> None:
        try:
            with httpx.Client(timeout=120) as client:
                rpc(client, url, session, 9, "control", {"data": data, "times": times})
        except httpx.HTTPError:
            pass

    threading.Thread(target=call, daemon=True).start()


def ended(proc, deadline: float) -> bool:
    try:
        proc.wait(deadline)
    except Exception:  # (subprocess.TimeoutExpired)
        return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_as_the_server_goes_lean_saves_the_episode(tmp_path, service_dir, signum):
    """The engine ``exec``s the lean front with its handlers gone: until the front had set its own, a SIGTERM killed
    the process (SIGINT: a ``KeyboardInterrupt`` ended it), the lease closed, and the service removed the worker's
    directory with the episode's databases — where the engine's own front would have saved them. A stop signal sent
    then now waits (blocked, pending across the ``exec``) for the lean front, which hands the episode back to
    close."""
    a_spare(service_dir)
    proc, port, out = serve(tmp_path, "")
    while not _is_lean(proc.pid) and proc.poll() is None:
        pass
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    err = err.decode(errors="replace")
    assert proc.returncode == 0, err
    assert "stopped; databases in" in err, err
    assert (out / "final.db").is_file() and (out / "initial.db").is_file()
    assert not (out / ".awm").exists()


def test_a_sigterm_while_the_engine_takes_the_episode_back_stops_the_server(tmp_path, service_dir):
    """The lean front ignored SIGINT and SIGTERM across its ``exec`` of the engine, also when it handed the episode
    back because the worker needs the engine (a line that is not a plain call record, a worker that died): a SIGTERM
    sent during the engine's start (a second or so) was lost, and the server served on. The engine's own front would
    have stopped."""
    proc, url, out, session = lean_server(tmp_path, service_dir, CONTROL)
    try:
        control(url, session, ' {"event": "call", "record": {}}\n')  # read by the engine: not a line the front takes
        while _is_lean(proc.pid) and proc.poll() is None:
            pass
        proc.send_signal(signal.SIGTERM)
        assert ended(proc, 120), "the server did not stop on SIGTERM"
    finally:
        err = stop(proc)
    assert proc.returncode == 0 and "stopped; databases in" in err, err
    assert notes(out / "final.db")[-1] == "kept"


def test_control_bytes_handed_back_take_no_more_memory_than_the_engines_front(tmp_path, service_dir):
    """What the lean front had read of the worker and not taken went back to the engine as a JSON string of the state,
    ASCII-escaped: a worker that sent 16 MiB of 0xff bytes without a newline made six bytes of each, and the server
    peaked at about 340 MB handing them over and reading them back (the engine's own front, reading the same line:
    about 50 MB). They go raw now, after the state's line."""
    proc, url, out, session = lean_server(tmp_path, service_dir, CONTROL)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peak[0] = max(peak[0], int(status.split("VmRSS:")[1].split()[0]))
            except (OSError, IndexError, ValueError):
                pass
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        control(url, session, "\xff" * (1 << 20), 17)  # past the protocol's line limit, no newline: the worker goes
        until(lambda: json.loads((out / "session.json").read_text())["worker_restarts"] == 1, "a new worker")
        session = initialized(url)
        with httpx.Client(timeout=60) as client:
            assert "kept" in rpc(client, url, session, 3, "list_notes", {}).text
    finally:
        done.set()
        sampler.join()
        err = stop(proc)
    assert proc.returncode == 0, err
    assert peak[0] < 150_000, f"the server peaked at {peak[0]} kB"


def test_the_state_hands_over_control_bytes_exactly():
    from awm_engine.runtime import lean_front

    unread = bytes(range(256)) * 3 + b"\n{\"event\": \"call\"}\n" + b"\xff" * 1000
    state = {"format": lean_front.FORMAT, "why": "worker", "note": "\ud800 \n é", "control_prefix": unread}
    back = lean_front.read_state(lean_front.write_state(state))
    assert back == state and type(back["control_prefix"]) is bytes


def test_a_fault_of_the_lean_front_hands_the_episode_back(tmp_path, service_dir):
    """An exception in the lean front (here: a write error on calls.jsonl, as on a full disk: ``/dev/full``) ended
    the process with a traceback; the lease closed and the service removed the worker's directory with the episode's
    databases. The engine's front, on the same fault, stops reading the worker and keeps the episode. Now the lean
    front says what happened and hands the episode back to the engine."""
    a_spare(service_dir)
    (tmp_path / "session").mkdir()
    (tmp_path / "session" / "calls.jsonl").symlink_to("/dev/full")
    proc, port, out = serve(tmp_path, "")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        until(lambda: _is_lean(proc.pid), "the server to go lean")
        session = initialized(url)
        with httpx.Client(timeout=60) as client:
            assert rpc(client, url, session, 2, "add_note", {"text": "kept"}).status_code == 200
        until(lambda: not _is_lean(proc.pid), "the lean front to end")
    finally:
        err = stop(proc)
    assert proc.returncode == 0 and "stopped; databases in" in err, err
    assert "the lean front failed" in err, err
    assert notes(out / "final.db")[-1] == "kept"


def test_the_engines_exit_clean_up_runs_before_it_execs_the_lean_front(tmp_path, service_dir):
    """An ``exec`` runs no ``atexit``: the engine that built the scenario's template (a sandbox of its own) left its
    sandbox view's directory (``/tmp/awm_view_*``) and its memory cgroup (``awm-total-<pid>-all``) behind for good
    — the engine it execs again later knows neither — until a later pool start swept them after the server's end
    (the test suite's own check found the directory). What the engine does at exit, it now does before the exec."""
    from awm_engine.sandbox import limits, owned

    proc, url, out, _ = lean_server(tmp_path, service_dir, note=None)
    try:
        views = [p for p in Path("/tmp").glob("awm_view_*") if (owned.owner_of(p) or {}).get("pid") == str(proc.pid)]
        groups = [g for root in limits.cgroup_support()[0].values() for g in root.rglob(f"awm-*-{proc.pid}-*")]
        assert _is_lean(proc.pid)
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err
    assert not views and not groups, (views, groups)


def test_a_stop_signal_after_the_worker_needs_the_engine_still_stops_the_server():
    """A SIGTERM that came once the lean front had decided to hand the episode back because of the worker (it died,
    broke the protocol) — while it drained the worker's output or closed its admissions — was taken by its handler and
    dropped (``why`` stayed ``worker``): the engine took the episode back and served on. The engine's own front would
    have stopped. A stop now wins over the worker's reason (the engine closes the episode whatever the worker did)."""
    from awm_engine.runtime import lean_front

    front = object.__new__(lean_front.LeanFront)
    front.why = "worker"
    front._on_signal(signal.SIGTERM, None)
    assert front.why == "stop"
