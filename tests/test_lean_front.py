"""``awm env serve``'s lean front (``runtime/lean_front.py``, ``runtime/lean_handoff.py``): once a warm worker serves
the episode, the server's process becomes one of Python's built-in modules only, does the front's work exactly as the
engine's front does, and hands the episode back to the engine (same process, ``exec``) to stop, or when the worker
needs it."""
from __future__ import annotations

import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awm_engine.runtime import lean_front
from awm_engine.runtime.mcp_server import CallsLog
from tests.test_warm import call, serve, service_dir, stop, until  # noqa: F401 (service_dir: a fixture)

ALPHABET = ["a", "é", "ß", "中", "😀", "\ud800", "\udfff", "\x00", "\n", '"', "\\", "\u2028", " ", "\x7f"]


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(8)))
    if kind == 1:
        return rng.randrange(-10 ** 20, 10 ** 20)
    if kind == 2:
        return rng.choice([0.1, -2.5e-300, 1e300, 3.0, math.inf, -math.inf, math.nan, rng.random()])
    if kind == 3:
        return rng.choice([True, False, None])
    if kind in (4, 5):
        return rng.randrange(100)
    if kind in (6, 7):
        return {"".join(rng.choice(ALPHABET) for _ in range(rng.randrange(4))): _value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def records(n: int = 2000) -> list[dict]:
    rng = random.Random(25)
    return [{"tool": _value(rng), "arguments": _value(rng), "text": _value(rng), "n": rng.random()} for _ in range(n)]


def worker_line(record: dict, **extra) -> bytes:
    from awm_engine.runtime import protocol

    return protocol.encode({"event": "call", "record": record, **extra})


def test_call_records_are_read_and_written_as_the_engine_does(tmp_path):
    """What an honest worker sends decodes as ``json.loads`` decodes it, and calls.jsonl gets the engine's bytes —
    lone surrogates, non-ASCII, NaN and big numbers included, and the size limit's note at the same record."""
    rs = records()
    limit = 150_000
    engine = CallsLog(tmp_path / "engine.jsonl", limit)
    lean = lean_front.CallsLog(str(tmp_path / "lean.jsonl"), limit)
    for record in rs:
        line = worker_line(record)
        msg = lean_front.loads_line(line)
        assert json.dumps(msg, sort_keys=True) == json.dumps(json.loads(line), sort_keys=True)
        engine.write(json.loads(line)["record"])
        lean.write(msg["record"])
    engine.close()
    assert (tmp_path / "lean.jsonl").read_bytes() == (tmp_path / "engine.jsonl").read_bytes()
    assert b"reached its size limit" in (tmp_path / "lean.jsonl").read_bytes()
    assert lean.left == engine.left == 0


@pytest.mark.parametrize("line", [
    b'{"id": 3, "ok": true, "result": {}}\n',  # an answer to no request
    b'{"event": "call", "record": {}, "stuck": true}\n',  # a handler that would not stop: the engine replaces it
    b' {"event": "call", "record": {}}\n',  # not as an honest worker writes it
    b'\xef\xbb\xbf{"event": "call", "record": {}}\n',
    b'{"event": "call", "record": {}} x\n',
    b'["event"]\n',
    b'{"event": "call", "record": ' + b"[" * 100_000 + b"]" * 100_000 + b'}\n',  # deeper than any decoder goes
    b'{"event": "call", "record": {"n": ' + b"9" * 5000 + b'}}\n',  # more digits than int() takes
    b'\xff\n',
], ids=["answer", "stuck", "space", "bom", "extra", "array", "deep", "digits", "utf8"])
def test_a_line_that_is_not_a_plain_call_record_is_left_to_the_engine(tmp_path, line):
    front = object.__new__(lean_front.LeanFront)
    front.calls = lean_front.CallsLog(str(tmp_path / "calls.jsonl"), 1 << 20)
    plain = worker_line({"tool": "t"})
    front.pending, front.scanned, front.why, front.line_limit = bytearray(plain + line + plain), 0, "", 16 << 20
    front._take_lines()
    assert front.why == "worker"
    assert bytes(front.pending) == line + plain  # read by the engine, from that line on, as it would have
    assert (tmp_path / "calls.jsonl").read_text().count('"tool"') == 1


def test_a_line_past_the_engines_limit_is_left_to_it(tmp_path):
    front = object.__new__(lean_front.LeanFront)
    front.calls = lean_front.CallsLog(str(tmp_path / "calls.jsonl"), 1 << 20)
    front.pending, front.scanned, front.why, front.line_limit = bytearray(b"x" * 5000), 0, "", 4096
    front._take_lines()
    assert front.why == "worker" and len(front.pending) == 5000


def test_the_lean_front_holds_only_builtin_modules_and_is_not_dumpable(tmp_path):
    from awm_engine.runtime.lean_handoff import lean_argv

    argv = lean_argv()
    probe = argv[:4] + [argv[4].replace("lean_front.main()", "print(lean_front.nondumpable()); "
                                        "print(' '.join(sorted(sys.modules)))")]
    out = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert out[0] == "True"
    modules = set(out[1].split())
    assert {"asyncio", "json", "socket", "re", "typing", "ssl", "awm_engine", "rich"}.isdisjoint(modules)
    assert {"http_guard", "http_head", "lean_front"} <= modules


def _is_lean(pid: int) -> bool:
    try:
        return b"lean_front.main()" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "calls.jsonl").read_text().splitlines()]


def _raw(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        return data


def test_a_warm_server_goes_lean_serves_refuses_and_stops_with_its_databases(tmp_path, service_dir):
    first, port, out = serve(tmp_path, "first")  # leaves a warm worker for the next server
    stop(first)
    until(lambda: "ready" in (service_dir / "warm.log").read_text(), "a spare")
    proc, port, out = serve(tmp_path, "second")
    try:
        until(lambda: _is_lean(proc.pid), "the server to go lean")
        assert json.loads((out / "session.json").read_text())["worker"] == "warm"
        # still found by what it was started as (``pgrep -f "env serve"``, ``pkill -f``)
        assert b"\0env\0serve\0--scenario\0maple_library_lending\0" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss_kb = int(status.split("VmRSS:")[1].split()[0])
        assert rss_kb < 20_000, rss_kb  # the engine's front holds 30+ MB; built-in modules alone about 9
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert "_asyncio" not in maps and "libssl" not in maps
        assert '"branches"' in call(port, "list_branches", {})
        assert '"branches"' in call(port, "list_branches", {})
        # the guard: a foreign Host, a foreign Origin, a bad head, with the engine's answers
        assert _raw(port, b"POST /mcp HTTP/1.1\r\nHost: evil.example:80\r\nContent-Length: 0\r\n\r\n").startswith(
            b"HTTP/1.1 421 Misdirected Request")
        assert _raw(port, f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n"
                          "Content-Length: 0\r\n\r\n".encode()).startswith(b"HTTP/1.1 403 Forbidden")
        assert _raw(port, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request")
        assert _raw(port, b"GET /mcp HTTP/1.1\r\nX: " + b"a" * 70_000).startswith(b"HTTP/1.1 431")
        assert _is_lean(proc.pid)
        until(lambda: len(_records(out)) == 2, "the calls' records")  # (each sent after its answer)
        assert [x["tool"] for x in _records(out)] == ["list_branches", "list_branches"]
        # many clients at once, each its own connections: every call answered and recorded
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(24) as pool:
            answers = list(pool.map(lambda _: call(port, "list_branches", {}), range(48)))
        assert all('"branches"' in a for a in answers)
        until(lambda: len(_records(out)) == 50, "every call's record")
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err
    assert "stopped; databases in" in err
    session = json.loads((out / "session.json").read_text())
    assert session["stopped"] and session["final_db"] == str(out / "final.db")
    with __import__("sqlite3").connect(out / "final.db") as db:
        assert db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] > 0
    assert not (out / ".awm").exists()


def test_a_worker_that_dies_under_the_lean_front_is_replaced_by_the_engine(tmp_path, service_dir):
    first, port, out = serve(tmp_path, "first")
    stop(first)
    until(lambda: "ready" in (service_dir / "warm.log").read_text(), "a spare")
    proc, port, out = serve(tmp_path, "second")
    try:
        until(lambda: _is_lean(proc.pid), "the server to go lean")
        assert '"branches"' in call(port, "list_branches", {})
        until(lambda: len(_records(out)) == 1, "the call's record")
        worker = json.loads((out / "session.json").read_text())["worker_pid"]
        os.kill(worker, signal.SIGKILL)
        until(lambda: json.loads((out / "session.json").read_text())["worker_restarts"] == 1, "a new worker")
        assert not _is_lean(proc.pid)  # the engine serves on (its own worker now)
        assert '"branches"' in call(port, "list_branches", {})
        until(lambda: len(_records(out)) == 2, "the second call's record")
        assert [x.get("tool") for x in _records(out)] == ["list_branches", "list_branches"]
    finally:
        err = stop(proc)
    assert proc.returncode == 0 and "stopped; databases in" in err, err


def test_sigterm_under_the_lean_front_saves_the_episode(tmp_path, service_dir):
    first, port, out = serve(tmp_path, "first")
    stop(first)
    until(lambda: "ready" in (service_dir / "warm.log").read_text(), "a spare")
    proc, port, out = serve(tmp_path, "second")
    until(lambda: _is_lean(proc.pid), "the server to go lean")
    call(port, "list_branches", {})
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)  # a second one: ignored, the clean-up is not cut short
    err = proc.communicate(timeout=120)[1].decode()
    assert proc.returncode == 0 and "stopped; databases in" in err, err
    assert (out / "final.db").is_file() and (out / "initial.db").is_file()


def test_in_process_or_switched_off_the_engine_keeps_its_front(monkeypatch):
    from awm_engine.runtime import lean_handoff

    class Leased:
        class lease:
            protections = {"distinct_uid": True, "proc_isolated": True, "unsafe_no_sandbox": False,
                           "writes_confined": True}  # (and a kernel with Landlock TCP rules: this one's)

    class SameUser:
        class lease:
            protections = {"distinct_uid": False, "proc_isolated": True, "unsafe_no_sandbox": False}

    monkeypatch.setattr(lean_handoff, "PROCESS_ENTRY", [])
    assert lean_handoff.refusal(False, Leased(), True) == "awm runs inside another program"
    monkeypatch.setattr(lean_handoff, "PROCESS_ENTRY", [True])
    assert lean_handoff.refusal(False, Leased(), True) is None
    assert lean_handoff.refusal(True, Leased(), True) == "stdio"
    assert lean_handoff.refusal(False, Leased(), False) == "this process could not be made non-dumpable"
    assert lean_handoff.refusal(False, SameUser(), True) == "the worker runs as this user or sees its processes"
    monkeypatch.setenv(lean_handoff.LEAN_ENV, "0")
    assert lean_handoff.refusal(False, Leased(), True) == "AWM_SERVE_LEAN=0"


def test_exit_with_parent_under_the_lean_front_saves_the_episode(tmp_path, service_dir):
    """The process that started the server goes: the lean front hands back, the engine closes the episode."""
    from awm_engine.runtime.ports import free_port

    first, port, out = serve(tmp_path, "first")
    stop(first)
    until(lambda: "ready" in (service_dir / "warm.log").read_text(), "a spare")
    port, out = free_port(), tmp_path / "child"
    starter = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-m', 'awm_engine.cli', 'env', 'serve', "
        f"'--scenario', 'maple_library_lending', '--port', '{port}', '--out', {str(out)!r}, '--exit-with-parent'], "
        f"stderr=open({str(tmp_path / 'err.txt')!r}, 'wb')); print(p.pid, flush=True); time.sleep(600)")],
        stdout=subprocess.PIPE, text=True)
    server = int(starter.stdout.readline())
    try:
        until(lambda: _is_lean(server), "the server to go lean")
        assert '"branches"' in call(port, "list_branches", {})
    finally:
        starter.kill()
        starter.wait()
    until(lambda: not Path(f"/proc/{server}").exists() or "Z" in Path(f"/proc/{server}/stat").read_text().split()[2],
          "the server to stop")
    assert "stopped; databases in" in (tmp_path / "err.txt").read_text()
    assert json.loads((out / "session.json").read_text())["stopped"]
    assert (out / "final.db").is_file()


def test_a_worker_that_dies_after_its_data_went_away_still_leaves_the_databases(tmp_path, service_dir):
    """The engine replaces a worker from the scenario's data; data removed while serving cannot be loaded again:
    the episode is closed with its databases (exit 1, said), never left in the sandbox's directory."""
    import shutil

    from awm_engine.runtime.ports import free_port
    from tests.test_mcp_serve import wait_for_port

    first, port, out = serve(tmp_path, "first")
    stop(first)
    until(lambda: "ready" in (service_dir / "warm.log").read_text(), "a spare")
    data = tmp_path / "data"
    shutil.copytree(Path(__file__).resolve().parents[1] / "sample_envs", data)
    port, out = free_port(), tmp_path / "second"
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario",
                             "maple_library_lending", "--data", str(data), "--port", str(port), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, proc)
        until(lambda: _is_lean(proc.pid), "the server to go lean")
        call(port, "list_branches", {})
        shutil.rmtree(data)
        os.kill(json.loads((out / "session.json").read_text())["worker_pid"], signal.SIGKILL)
        err = proc.communicate(timeout=120)[1].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "can no longer be loaded" in err and "stopped; databases in" in err
    with __import__("sqlite3").connect(out / "final.db") as db:
        assert db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] > 0


ENGINE_STANDIN = (  # what the lean front exec's to hand back: this writes what it was handed, then exits
    "import json, os, sys; from awm_engine.runtime import lean_front; "
    "state = lean_front.read_state(int(os.environ['AWM_SERVE_STATE_FD'])); "
    "state['inheritable'] = {k: os.get_inheritable(v) for k, v in state['fds'].items()}; "
    "state['control_prefix'] = state['control_prefix'].decode('latin-1'); "
    "open(sys.argv[1], 'w').write(json.dumps(state))")


def run_lean(tmp_path, calls_path: str | None = None, prefix: bytes = b"", then=None) -> dict:
    """The lean front as a process over stand-in descriptors (no worker, no warm service); ``then(front)`` acts on
    it; returns the state it handed back to the engine's stand-in."""
    from awm_engine.runtime.lean_handoff import lean_argv

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    control, worker_control = socket.socketpair()
    channel, worker_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    out_r, out_w = os.pipe()
    sleeper = subprocess.Popen(["sleep", "600"])
    pidfd = os.pidfd_open(sleeper.pid)
    lease, _lease_peer = socket.socketpair()
    fds = {"listener": listener.fileno(), "control": control.fileno(), "channel": channel.fileno(),
           "lease": lease.fileno(), "output": out_r, "pidfd": pidfd}
    handed = tmp_path / "handed.json"
    state = {"format": lean_front.FORMAT, "why": "", "fds": fds,
             "engine": [sys.executable, "-c", ENGINE_STANDIN, str(handed)],
             "front": {"port": listener.getsockname()[1], "token": None, "head_limit": 65536,
                       "channel_message": 131072, "head_timeout": 30.0, "max_admitting": 256,
                       "line_limit": 16 << 20, "exit_with_parent": None, "need_nondumpable": True},
             "calls": {"path": calls_path or str(tmp_path / "calls.jsonl"), "left": 1 << 20},
             "log": {"path": str(tmp_path / "server.log"), "cap": 1 << 20, "note": "[cap]\n"},
             "control_prefix": prefix, "engine_state": {"kept": ["as", "it", "was"]}}
    fd = lean_front.write_state(state)
    proc = subprocess.Popen(lean_argv(), pass_fds=[*fds.values(), fd], stderr=subprocess.PIPE,
                            env={**os.environ, lean_front.STATE_ENV: str(fd), "PYTHONPATH": os.getcwd()})
    os.close(fd)
    try:
        if then is not None:
            then(proc, worker_control, listener.getsockname()[1])
        err = proc.communicate(timeout=60)[1].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        sleeper.kill()
        sleeper.wait()
    assert proc.returncode == 0, err
    result = json.loads(handed.read_text())
    result["stderr"] = err
    return result


def test_a_fault_of_the_lean_front_hands_the_episode_back_intact(tmp_path):
    (tmp_path / "calls.jsonl").mkdir()  # calls.jsonl it cannot open: its fault, not the episode's
    handed = run_lean(tmp_path, calls_path=str(tmp_path / "calls.jsonl"), prefix=b'{"event": "call"')
    assert handed["why"] == "lean_failed"
    assert "the lean front failed (IsADirectoryError" in handed["stderr"]
    assert handed["control_prefix"] == '{"event": "call"' and handed["engine_state"] == {"kept": ["as", "it", "was"]}
    assert all(handed["inheritable"].values())  # every named descriptor crossed the exec back


def test_a_signal_hands_back_for_the_engine_to_stop_and_unread_lines_stay_unread(tmp_path):
    plain = worker_line({"tool": "a"})

    def act(proc, worker, port):
        worker.sendall(plain + b'{"id": 7, "ok": true}\n' + plain)
        until(lambda: (tmp_path / "calls.jsonl").exists() and (tmp_path / "calls.jsonl").read_text(), "a record")
        proc.send_signal(signal.SIGTERM)

    handed = run_lean(tmp_path, then=act)
    assert handed["why"] == "worker"  # the answer to no request came first: the engine's to read
    assert handed["control_prefix"].encode("latin-1") == b'{"id": 7, "ok": true}\n' + plain
    assert (tmp_path / "calls.jsonl").read_text() == '{"tool": "a"}\n'


def test_sigterm_hands_back_to_stop(tmp_path):
    def act(proc, worker, port):
        _raw(port, b"GARBAGE\r\n\r\n")  # answered: it is up
        proc.send_signal(signal.SIGTERM)

    handed = run_lean(tmp_path, then=act)
    assert handed["why"] == "stop" and handed["control_prefix"] == ""


def test_a_stuck_handler_under_the_lean_front_gets_its_worker_replaced(tmp_path, service_dir):
    """The worker's record says its handler would not stop: the engine takes the episode back and replaces the
    worker, and the episode is served on from its databases (as under the engine's own front)."""
    from tests.test_containment_found_inline import LEFTOVERS, stuck_call_replaces_the_worker
    from tests.test_containment_found_serve import notes
    from tests.test_containment_found_serve import serve as serve_hostile
    from tests.test_containment_found_serve import stop as stop_hostile

    first, _, _ = serve_hostile(tmp_path, LEFTOVERS, "--timeout", "0.3", name="first")
    stop_hostile(first)
    until(lambda: "ready" in (service_dir / "warm.log").read_text(), "a spare")
    proc, port, out = serve_hostile(tmp_path, LEFTOVERS, "--timeout", "0.3", name="second")
    try:
        until(lambda: _is_lean(proc.pid), "the server to go lean")
        stuck_call_replaces_the_worker(f"http://127.0.0.1:{port}/mcp", out)
        assert any(r.get("tool") == "slow_write" for r in _records(out))  # its record, taken by the engine
    finally:
        err = stop_hostile(proc)
    assert "stopped; databases in" in err, err
    assert notes(out / "final.db") == ["first", "second"]
