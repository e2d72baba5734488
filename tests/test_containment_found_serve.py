"""What attacking ``awm env serve`` (the worker that speaks MCP, the parent that checks and hands over connections, the
warm service) found, one regression test each: hostile environment code, a hostile client or web page, another
server of the same user, and races with workers, leases and services that end.

Every test waits on a condition (a log line, a file, an answer), never on a pause; the warm service's tests use a
directory of their own and stop it at the end."""
from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from awm_engine.runtime import warm
from awm_engine.runtime.mcp_http import CHANNEL_MESSAGE, Guard, channel_loop
from awm_engine.runtime.mcp_server import CallsLog, ServeFront
from awm_engine.runtime.mcp_wire import WireServer
from awm_engine.runtime.ports import free_port
from tests.test_mcp_serve import wait_for_port
from tests.test_serve_containment import DIE, INIT, OPEN_DOORS
from tests.test_warm import H, log, service_dir, until  # noqa: F401 - service_dir: the fixture
from tests.tinyenv import make_env_dir



def socket_tool(name: str, body: str) -> str:
    """Environment code of a GET tool ``name`` that runs ``body`` (with ``_s``, the socket module, and ``argv``, the
    worker's command line) and answers ``{"n": n}``."""
    model = name.capitalize() + "Out"
    return (f"\nclass {model}(BaseModel):\n    n: int\n\n"
            f'@app.get("/api/{name}", summary="{name}", description="An attack.", tags=["bad"], '
            f'operation_id="{name}", response_model={model})\n'
            f"def {name}():\n    import socket as _s\n"
            '    argv = open("/proc/self/cmdline", "rb").read().split(b"\\0")\n    n = 0\n'
            f"{body}    return {model}(n=n)\n")


def serve(tmp_path: Path, code: str, *extra: str, stdio: bool = False, env: dict | None = None, name: str = "session"):
    data = make_env_dir(tmp_path / f"data-{name}", {"hostile": code})
    port = None if stdio else free_port()
    where = ["--stdio"] if stdio else ["--port", str(port)]
    out = tmp_path / name
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "env", "serve", "--data", str(data), "--scenario",
                             "hostile", *where, "--out", str(out), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache"), **(env or {})})
    if not stdio:
        wait_for_port(port, proc)
    until(lambda: (out / "session.json").exists() or proc.poll() is not None, "the session")
    return proc, port, out


def stop(proc) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return err.decode(errors="replace")


def rpc(client: httpx.Client, url: str, session: str, rid: int, tool: str, arguments: dict) -> httpx.Response:
    return client.post(url, headers={**H, "mcp-session-id": session},
                       json={"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}})


def initialized(url: str, deadline: float = 180.0) -> str:
    """A new MCP session, once the server answers (a replaced worker serves again)."""
    found: list[str] = []

    def answered() -> bool:
        try:
            with httpx.Client(timeout=60) as client:
                answer = client.post(url, json=INIT, headers=H)
        except httpx.HTTPError:
            return False
        if answer.status_code == 200:
            found.append(answer.headers["mcp-session-id"])
        return bool(found)

    until(answered, "the server to answer", deadline)
    return found[0]


def notes(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT text FROM notes ORDER BY id")]


# -- the warm service ---------------------------------------------------------------------------------------------


def a_spare(where: Path, services: int = 1) -> None:
    """A service (the ``services``-th started here) with a spare ready."""
    warm.ensure_service()
    until(lambda: log(where).count("service started") >= services and
          " ready (pid " in log(where).rsplit("service started", 1)[-1], "a spare")


def a_warm_server(tmp_path: Path, where: Path, code: str, note: str, name: str = "session"):
    """A server that took the service's spare, and an MCP session of it that added the note ``note``."""
    a_spare(where)
    proc, port, out = serve(tmp_path, code, name=name)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert json.loads((out / "session.json").read_text())["worker"] == "warm"
        with httpx.Client(timeout=60) as client:
            session = client.post(url, json=INIT, headers=H).headers["mcp-session-id"]
            assert rpc(client, url, session, 2, "add_note", {"text": note}).status_code == 200
    except BaseException:
        stop(proc)
        raise
    return proc, url, out, session


def test_a_warm_worker_that_dies_is_replaced_on_the_episodes_databases(tmp_path, service_dir):
    """A worker taken from the warm service lives in the service's directory, which goes with the lease: before,
    replacing it removed the episode's databases, the new worker could not attach them, the server never answered
    again and its clean-up failed."""
    proc, url, out, session = a_warm_server(tmp_path, service_dir, DIE, "before the crash")
    try:
        with httpx.Client(timeout=60) as client:
            with pytest.raises(httpx.HTTPError):
                rpc(client, url, session, 3, "die", {})
        session = initialized(url)
        with httpx.Client(timeout=60) as client:
            listed = rpc(client, url, session, 4, "list_notes", {}).json()["result"]["content"][0]["text"]
            assert "before the crash" in listed
            assert rpc(client, url, session, 5, "add_note", {"text": "after the crash"}).status_code == 200
        written = json.loads((out / "session.json").read_text())
        assert written["worker"] == "own" and written["worker_restarts"] == 1  # said as it is now
        assert notes(Path(written["final_db"]))[-2:] == ["before the crash", "after the crash"]
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert notes(out / "final.db")[-2:] == ["before the crash", "after the crash"]
    assert not (out / ".awm").exists()


def test_a_stale_service_leaves_running_servers_their_workers(tmp_path, service_dir):
    """A server with other settings makes the service stale; before, the service then killed the workers every
    running server had taken from it (and removed their directories, databases included)."""
    first, url, out, session = a_warm_server(tmp_path, service_dir, "", "one", name="first")
    try:
        other, _, other_out = serve(tmp_path, "", name="other", env={"AWM_SANDBOX_LOG_MB": "7"})
        try:
            assert json.loads((other_out / "session.json").read_text())["worker"] == "own"
            # the stale service stopped taking servers; the other server started one with its settings in its place
            until(lambda: log(service_dir).count("service started") == 2, "a service with the other settings")
            with httpx.Client(timeout=60) as client:  # the same MCP session: the same worker goes on
                answer = rpc(client, url, session, 3, "add_note", {"text": "two"})
                assert answer.status_code == 200 and not answer.json()["result"]["isError"], answer.text
        finally:
            stop(other)
    finally:
        err = stop(first)
    assert first.returncode == 0, err
    assert "starting a new one" not in err
    assert notes(out / "final.db")[-2:] == ["one", "two"]
    until(lambda: "service stopped" in log(service_dir), "the stale service to end with its last lease")


def test_a_server_outlives_the_service_it_took_its_worker_from(tmp_path, service_dir):
    """SIGKILL of the service: the workers it started die with it; a server that had taken one goes on with one of
    its own, on the episode's databases (before, they could not be attached again)."""
    proc, url, out, _ = a_warm_server(tmp_path, service_dir, "", "before")
    try:
        taken = json.loads((out / "session.json").read_text())["worker_pid"]
        kill_service(service_dir)
        until(lambda: gone(taken), "the worker to die with its service")
        session = initialized(url, 120)  # (a worker of its own: its MCP sessions are new)
        assert json.loads((out / "session.json").read_text())["worker"] == "own"
        with httpx.Client(timeout=60) as client:
            assert "before" in rpc(client, url, session, 3, "list_notes", {}).json()["result"]["content"][0]["text"]
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err
    assert notes(out / "final.db")[-1] == "before"
    dead = set(service_dir.glob("spares/*"))
    a_spare(service_dir, 2)  # the next service removes what the killed one left
    assert not any(p.exists() for p in dead)


def kill_service(where: Path) -> int:
    """SIGKILL the service (started by ``warm.ensure_service``, detached: nobody's child), and wait until it is dead
    (a zombie of whoever inherited it counts: its socket is closed then)."""
    pid = int(log(where).split("service started (pid ")[1].split(")")[0])
    os.kill(pid, signal.SIGKILL)
    until(lambda: gone(pid), "the killed service to die")
    return pid


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_what_a_killed_service_left_is_removed_never_reused(tmp_path, service_dir):
    """Spares lived in ``spares/w<N>`` with N counted from 1 by every service: a killed service's directories stayed
    and the next service's spare started in the same one (what environment code had left there included)."""
    a_spare(service_dir)
    before = set(service_dir.glob("spares/**/w1"))
    assert before
    pid = kill_service(service_dir)
    a_spare(service_dir, 2)
    after = set(service_dir.glob("spares/**/w1"))
    assert after and not before & after, (before, after)
    assert not any(p.exists() for p in before)
    mounts = Path("/proc/self/mountinfo").read_text()
    assert f"-{pid} " not in mounts  # its quota mounts went too


def test_a_spare_is_taken_only_where_its_sandbox_would_be_the_same(tmp_path, service_dir, monkeypatch):
    """The signature covered awm's code and AWM_* variables only: a spare started under another time zone (or
    locale, hash seed …) served a server whose sandbox would have had its own."""
    monkeypatch.setenv("TZ", "UTC")
    a_spare(service_dir)
    proc, _, out = serve(tmp_path, "", env={"TZ": "Asia/Tokyo"})
    try:
        assert json.loads((out / "session.json").read_text())["worker"] == "own"
    finally:
        stop(proc)


def test_the_signature_follows_whether_the_sandbox_may_be_left_out(tmp_path, monkeypatch):
    """``unsafe_no_sandbox = true`` in the configuration file lets untrusted code run without the namespace layer: a
    spare started while it was set must not serve a server started after it was taken out."""
    config = tmp_path / "config.toml"
    monkeypatch.setenv("AWM_CONFIG", str(config))
    config.write_text("[sandbox]\nunsafe_no_sandbox = true\n")
    allowed = warm.signature()
    config.write_text("[sandbox]\n")
    assert warm.signature() != allowed


# -- the worker's answers and records ------------------------------------------------------------------------------


def test_arguments_no_request_can_carry_get_the_references_error_result(tmp_path):
    """A lone surrogate in a tool's arguments (a JSON ``"\\ud800"`` escape): the reference's MCP server answers the
    exception its HTTP request raised as an error result; here the worker dropped the connection unanswered and
    recorded nothing."""
    proc, port, out = serve(tmp_path, "")
    url = f"http://127.0.0.1:{port}/mcp"
    body = (b'{"jsonrpc":"2.0","id":2,"method":"tools/call",'
            b'"params":{"name":"add_note","arguments":{"text":"a\\ud800b"}}}')
    try:
        with httpx.Client(timeout=60) as client:
            session = client.post(url, json=INIT, headers=H).headers["mcp-session-id"]
            answer = client.post(url, content=body, headers={**H, "mcp-session-id": session})
    finally:
        stop(proc)
    try:
        httpx.Request("POST", "http://x/api/notes", json={"text": "a\ud800b"})
    except ValueError as exc:
        expected = str(exc)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"content": [{"type": "text", "text": expected}], "isError": True}
    records = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert [(r["tool"], r["arguments"], r["is_error"]) for r in records] == [("add_note", {"text": "a\ud800b"}, True)]


def test_calls_jsonl_is_capped_in_bytes_and_takes_any_record(tmp_path):
    """The cap counted characters (a record of emoji took four times its share of the disk) and a lone surrogate
    in a record raised in the parent's reader (which then killed the worker as if it had broken the protocol)."""
    path = tmp_path / "calls.jsonl"
    calls = CallsLog(path, limit=4000)
    calls.write({"tool": "t", "arguments": {"text": "a\ud800b"}})
    for _ in range(20):
        calls.write({"tool": "t", "arguments": {"text": "\U0001F600" * 200}})
    calls.close()
    assert path.stat().st_size <= 4000 + 200
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["arguments"]["text"] == "a\ud800b"
    assert "size limit" in lines[-1]


# -- the parent's reading and handing over ---------------------------------------------------------------------------


def test_what_the_parent_read_reaches_the_worker_whole(tmp_path):
    """A head that ends just past one read: the parent read 128 KiB, one byte more than the worker's message buffer
    holds (kind byte included), and the worker served what was left of it — other bytes than those checked."""
    first = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-Pad: "
    first += b"a" * ((1 << 16) - len(first))
    rest = b"\r\n\r\n" + b"b" * ((1 << 16) - 4)
    client, conn = socket.socketpair()
    try:
        client.sendall(first + rest)
        conn.setblocking(False)
        head = asyncio.run(ServeFront(None, 1, None)._read_head(conn))
    finally:
        client.close()
        conn.close()
    assert head is not None
    assert 1 + len(head[0]) <= CHANNEL_MESSAGE


def test_the_worker_refuses_a_message_it_could_not_read_whole(tmp_path):
    async def call(name, arguments):
        return {"text": "", "is_error": False, "meta": None}

    async def scenario() -> tuple[bytes, bytes]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server = WireServer("x", [], call)
        loop_task = asyncio.create_task(channel_loop(theirs, lambda: (server, Guard(None, None))))
        results = []
        try:
            for prefix in (b"h" + b"x" * CHANNEL_MESSAGE, b"h"):
                client, handed = socket.socketpair()
                socket.send_fds(ours, [prefix], [handed.fileno()])
                handed.close()
                request = json.dumps(INIT).encode()
                try:
                    client.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   b"Accept: application/json\r\nConnection: close\r\nContent-Length: "
                                   + str(len(request)).encode() + b"\r\n\r\n" + request)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # closed already
                client.setblocking(False)
                data = b""
                while True:
                    try:
                        chunk = await asyncio.get_running_loop().sock_recv(client, 1 << 16)
                    except ConnectionResetError:
                        chunk = b""
                    if not chunk:
                        break
                    data += chunk
                client.close()
                results.append(data)
        finally:
            ours.close()
            await loop_task
            theirs.close()
        return results[0], results[1]

    cut, whole = asyncio.run(scenario())
    assert cut == b""  # closed unanswered: never served from bytes other than those sent
    assert whole.startswith(b"HTTP/1.1 200")  # and the channel goes on


def test_a_worker_that_breaks_the_protocol_with_deep_json_is_replaced(tmp_path):
    """A line nested past the JSON decoder's depth raised RecursionError in the parent's reader, which then stopped
    reading the worker without replacing it: 503 for every connection from then on."""
    code = socket_tool("deep", """
    s = _s.socket(fileno=os.dup(int(argv[argv.index(b"--fd") + 1])))  # the worker's protocol socket
    s.setblocking(True)
    s.sendall(b'{"event": "call", "record": ' + b"[" * 100000 + b"]" * 100000 + b"}\\n")
""")
    proc, port, out = serve(tmp_path, code)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with httpx.Client(timeout=60) as client:
            session = client.post(url, json=INIT, headers=H).headers["mcp-session-id"]
            try:  # answered or not: its worker is replaced as soon as the parent reads the line
                rpc(client, url, session, 2, "deep", {})
            except httpx.HTTPError:
                pass
        until(lambda: json.loads((out / "session.json").read_text()).get("worker_restarts") == 1, "a new worker")
        session = initialized(url)
        with httpx.Client(timeout=60) as client:
            assert rpc(client, url, session, 3, "list_notes", {}).status_code == 200
    finally:
        err = stop(proc)
    assert "malformed answer" in err or "starting a new one" in err


# -- stdio ----------------------------------------------------------------------------------------------------------

# a tool that writes raw lines on every unix stream socket it holds but the protocol's and the channel's: the stdio
# relay among them (what is not the relay either refuses or is left alone by the timeout)
STDIO_SPAM = socket_tool("spam", """
    mine = {int(argv[argv.index(b"--fd") + 1]), int(argv[argv.index(b"--channel") + 1])}
    deep = b"[" * 200000 + b"]" * 200000 + b"\\n"
    lone = b'{"jsonrpc": "2.0", "id": 9, "result": {"x": "\\\\ud800"}}\\n'
    seen = set()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in mine:
            continue
        try:
            inode = os.fstat(fd).st_ino
        except OSError:
            continue
        if inode in seen:  # the relay's two descriptors (in and out) are one socket
            continue
        seen.add(inode)
        try:
            s = _s.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if s.type == _s.SOCK_STREAM and s.family == _s.AF_UNIX and s.getpeername() == "":
                s.settimeout(0.5)
                s.sendall(deep + lone)
                n += 1
        except OSError:
            pass
""")


def read_answer(proc, deadline: float = 120.0) -> dict:
    """The next line the server writes on stdout (failing, not hanging, when none comes)."""
    line = b""
    start = time.monotonic()
    while not line.endswith(b"\n"):
        left = deadline - (time.monotonic() - start)
        assert left > 0, "no answer on stdout"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 1)
            assert chunk, "stdout ended"
            line += chunk
    return json.loads(line)


def finish(proc) -> str:
    """Close the server's stdin (its end over stdio) and what it wrote on stderr once it exited."""
    proc.stdin.close()
    proc.wait(120)
    return proc.stderr.read().decode(errors="replace")


def send(proc, message: dict) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def tool_call(request_id: int, name: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def test_the_stdio_relay_survives_what_a_worker_writes(tmp_path):
    """A line nested past the decoder's depth, or holding a lone surrogate, raised in the parent's relay: it stopped
    relaying, and the server hung (its stdin was read in a thread that kept the process alive)."""
    proc, _, _ = serve(tmp_path, STDIO_SPAM, stdio=True)
    try:
        send(proc, INIT)
        assert read_answer(proc)["id"] == 1
        send(proc, tool_call(2, "spam", {}))
        seen = [read_answer(proc), read_answer(proc)]
        assert {m["id"] for m in seen} == {9, 2}
        assert next(m for m in seen if m["id"] == 9)["result"]["x"] == "\ud800"
        send(proc, tool_call(3, "list_notes", {}))
        assert "first" in read_answer(proc)["result"]["content"][0]["text"]
    finally:
        err = finish(proc)
    assert proc.returncode == 0, err


def test_a_stdio_server_replaces_a_worker_that_dies(tmp_path):
    """Over stdio the relay ended with the worker that died: no answer to anything after, and the server hung until
    stdin closed."""
    proc, _, out = serve(tmp_path, DIE, stdio=True)
    try:
        send(proc, INIT)
        assert read_answer(proc)["id"] == 1
        send(proc, tool_call(2, "add_note", {"text": "before the crash"}))
        assert not read_answer(proc)["result"]["isError"]
        send(proc, tool_call(3, "die", {}))
        lost = read_answer(proc)
        assert lost["id"] == 3 and "error" in lost  # said, not left waiting
        send(proc, tool_call(4, "list_notes", {}))
        assert "before the crash" in read_answer(proc)["result"]["content"][0]["text"]
    finally:
        err = finish(proc)
    assert proc.returncode == 0, err
    assert "starting a new one" in err
    assert "before the crash" in notes(out / "final.db")


# -- a web page ----------------------------------------------------------------------------------------------------


def test_a_cross_site_request_without_origin_is_refused(tmp_path):
    """A browser sends no Origin with a plain cross-site GET (an <img>, a no-cors fetch): the parent let it through
    to the worker, and each such GET opened an MCP session — enough of them evicted the real client's."""
    proc, port, _ = serve(tmp_path, OPEN_DOORS)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with httpx.Client(timeout=60) as client:
            for site in ("cross-site", "same-site"):
                answer = client.get(url, headers={"Accept": "*/*", "Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors"})
                assert answer.status_code == 403, (site, answer.status_code, answer.text)
            own = client.post(url, json=INIT, headers={**H, "Sec-Fetch-Site": "same-origin"})
            assert own.status_code == 200
    finally:
        stop(proc)


def test_a_client_that_fills_the_servers_descriptors_does_not_stop_it(tmp_path):
    """Idle connections past the parent's descriptor limit: accept() failed with EMFILE, which ended the accepting
    task and with it the server."""
    import resource

    proc, port, _ = serve(tmp_path, "")
    url = f"http://127.0.0.1:{port}/mcp"
    fds = Path(f"/proc/{proc.pid}/fd")
    limit = len(list(fds.iterdir())) + 24
    resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    idle = []
    try:
        for _ in range(limit + 16):
            idle.append(socket.create_connection(("127.0.0.1", port)))
        until(lambda: proc.poll() is not None or len(list(fds.iterdir())) >= limit - 1, "the descriptors to fill")
    except AssertionError:  # what the server held and said, for the failure's report; and the server stopped
        held = sorted(int(f.name) for f in fds.iterdir()) if fds.exists() else []
        raise AssertionError(f"descriptors {held} (limit {limit}); the server said: {stop(proc)[-3000:]}") from None
    finally:
        for conn in idle:
            conn.close()
    try:
        assert proc.poll() is None, "the server stopped"
        with httpx.Client(timeout=60) as client:
            assert client.post(url, json=INIT, headers=H).status_code == 200
    finally:
        err = stop(proc)
    assert proc.returncode == 0, err


def test_a_call_as_large_as_a_request_may_be_does_not_cost_the_worker(tmp_path):
    """A 16 MiB request (the largest a worker takes) made a call record over the worker protocol's 16 MiB line, and
    the parent replaced the worker for it: every client's MCP session gone."""
    proc, port, out = serve(tmp_path, "")
    url = f"http://127.0.0.1:{port}/mcp"
    start = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_note","arguments":{"text":"'
    end = b'"}}}'
    body = start + b"a" * ((16 << 20) - len(start) - len(end)) + end
    log = out / "calls.jsonl"
    try:
        with httpx.Client(timeout=120) as client:
            session = client.post(url, json=INIT, headers=H).headers["mcp-session-id"]
            assert client.post(url, content=body, headers={**H, "mcp-session-id": session}).status_code == 200
            until(lambda: proc.poll() is not None or "add_note" in log.read_text(), "the call's record")
            answer = rpc(client, url, session, 3, "list_notes", {})  # the same session: the same worker
            assert answer.status_code == 200, answer.text
    finally:
        err = stop(proc)
    assert "starting a new one" not in err
    record = json.loads(log.read_text().splitlines()[0])
    assert record["tool"] == "add_note" and record["arguments"] is None
    cut = record["arguments_cut"]
    assert cut["characters"] > 16_000_000 and cut["start"].startswith('{"text": "aaa')
