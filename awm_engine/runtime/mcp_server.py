"""``awm env serve``'s front: the MCP endpoint of one episode, outside the sandbox, off the call path.

The episode lives in a sandboxed worker (``pool``), which speaks MCP itself (``mcp_wire`` over ``mcp_http``) the
way the AWM reference's server does: plain JSON, the server named after the app's title with the reference's
``mcp`` version, tools with name, description and input schema only, results with content and ``isError`` only —
the traceback behind an error goes to ``calls.jsonl`` and the worker's log (``server.log``), never to the client
(``extras``, ``AWM_SERVE_EXTRAS=1``, adds ``_meta.awm`` for awm's own client: error kind, status, traceback).

This process owns the listening socket (127.0.0.1 only). It accepts each connection and reads its first request's
head; a foreign ``Host`` (DNS rebinding), a foreign ``Origin`` or a missing bearer token (``--token``) is refused
here, by trusted code; otherwise the connected socket, with the bytes read, is handed to the worker over a
descriptor channel (``SOCK_SEQPACKET``, ``SCM_RIGHTS``), which answers every request on it directly — so a call is
one hop: client → sandboxed worker. Each call's record
comes back as an event and is appended to ``calls.jsonl`` here (within ``CALLS_LOG_LIMIT``). Over stdio the worker
gets a socket, never this process's stdin and stdout (``run_stdio``).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

from awm_engine.data.jsonl import dumps_text
from awm_engine.runtime import http_guard
from awm_engine.runtime.http_head import plain_reply
from awm_engine.runtime.mcp_http import CHANNEL_MESSAGE
from awm_engine.runtime.mcp_http import lines as stream_lines
from awm_engine.runtime.mcp_wire import error_body

HOST = "127.0.0.1"
MCP_PATH = "/mcp"
EXTRAS_ENV = "AWM_SERVE_EXTRAS"
# the reference server's serverInfo: FastApiMCP(app) is named after the app's title, its version is its mcp package's
REFERENCE_MCP_VERSION = "1.26.0"
FASTAPI_DEFAULT_TITLE = "FastAPI"
HEAD_LIMIT = 64 << 10  # bytes of a connection's first request line and headers
HEAD_TIMEOUT = 30.0  # seconds a new connection has to send them
MAX_ADMITTING = 256  # connections being checked at once (more wait in the kernel's backlog)
CALLS_LOG_LIMIT = 64 << 20  # bytes of calls.jsonl; past it, one note and no more lines
STDIO_LINE_LIMIT = 32 << 20  # bytes of one stdio message either way
# accept() failures that end one connection, not the server: a client that fills this process's descriptors (many idle
# connections at once) waits in the kernel's backlog until some admission ends
ACCEPT_SHORTAGES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
ACCEPT_ERRORS = ACCEPT_SHORTAGES | {errno.ECONNABORTED, errno.EPROTO, errno.EPERM}
ACCEPT_BACKOFF = 0.1


def app_title(code: str | None) -> str:
    """The ``title=`` of the environment code's ``FastAPI(...)`` (a string literal), else FastAPI's default: the name
    the reference's ``FastApiMCP(app)`` gives its server. Read from the source, never by running it."""
    import ast

    try:
        tree = ast.parse(code or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return FASTAPI_DEFAULT_TITLE
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "FastAPI":
            for kw in node.keywords:
                if kw.arg == "title" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
            return FASTAPI_DEFAULT_TITLE
    return FASTAPI_DEFAULT_TITLE


def extras_enabled() -> bool:
    return os.environ.get(EXTRAS_ENV, "") == "1"


def listen(port: int, host: str = HOST) -> socket.socket:
    """The listening socket (``SO_REUSEADDR``: a port whose last server just exited is free again). OSError when the
    port is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def accept(loop: asyncio.AbstractEventLoop, listener: socket.socket) -> tuple[socket.socket, Any]:
    """``loop.sock_accept`` without its race: cancelled (the server stopping) in the same turn of the loop as a
    connection arrives, that one's callback set a result on the cancelled future (``InvalidStateError`` printed at
    every such stop, the connection dropped). Here the loop only says the listener is readable; the accept itself
    is this coroutine's, so a cancelled one takes nothing (the connection waits in the backlog)."""
    while True:
        try:
            return listener.accept()
        except (BlockingIOError, InterruptedError):
            pass
        readable = loop.create_future()
        loop.add_reader(listener.fileno(), _resolve, readable)
        try:
            await readable
        finally:
            loop.remove_reader(listener.fileno())


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


class CallsLog:
    """``calls.jsonl``: one line per call, from the worker's events, within ``CALLS_LOG_LIMIT`` bytes in all (UTF-8
    bytes, not characters; a lone surrogate is written as its JSON escape)."""

    def __init__(self, path: Path, limit: int = CALLS_LOG_LIMIT):
        self.path = path
        self.fh = open(path, "ab")
        self.left = limit  # (what is left of it: the lean front's, when it hands the episode back)

    def write(self, record: Any) -> None:
        if self.left <= 0 or not isinstance(record, dict):
            return
        try:
            line = (dumps_text(record, default=str) + "\n").encode()
        except (ValueError, RecursionError):  # nested deeper than the encoder goes: said, not written
            line = json.dumps({"note": "a call record the worker sent could not be written"}).encode() + b"\n"
        if len(line) > self.left:
            line = json.dumps({"note": "calls.jsonl reached its size limit: later calls are not recorded"}).encode()
            line += b"\n"
            self.left = 0
        else:
            self.left -= len(line)
        self.fh.write(line)
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


class ServeFront:
    """Accepts, checks and hands over connections to the current worker of one served episode."""

    def __init__(self, worker: Any, port: int | None, token: str | None, relay: bool | None = None):
        self.worker = worker
        # relay: the worker gets a unix socket whose bytes this process copies to and from the client's, never the
        # client's TCP socket itself — where Landlock does not refuse the sandbox TCP (``host.tcp_confined``): a
        # TCP socket stays in the host's network namespace, and the worker could disconnect it (connect AF_UNSPEC)
        # and connect it anywhere the host can, its loopback listeners included
        self.relay = (not _tcp_confined(worker)) if relay is None else relay
        self.port = port
        self.token = token
        self.hosts = http_guard.allowed_hosts(port) if port else set()
        self.origins = http_guard.allowed_origins(port) if port else set()
        self._admitting = asyncio.Semaphore(MAX_ADMITTING)
        # the generation of the worker that serves the episode now (None: none does, e.g. while one is replaced)
        self.serving: int | None = None
        self._changed = asyncio.Condition()

    async def ready(self) -> None:
        """The current worker serves the episode (its ``serve`` request was answered): connections go to it."""
        async with self._changed:
            self.serving = self.worker.generation
            self._changed.notify_all()

    def gone(self) -> None:
        """The current worker stopped serving (it died, or is being replaced): nothing is handed to it."""
        self.serving = None

    async def _next_worker(self, after: int | None) -> int:
        """The generation of a serving worker other than ``after`` (waits for one)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.serving is not None and self.serving != after)
            return self.serving

    async def run_http(self, listener: socket.socket) -> None:
        # what an admission imports, imported before the first one: a lazy import opens files, and with every
        # descriptor taken by idle connections (EMFILE) it failed each admission at once — connections dropped as
        # fast as they came, instead of waiting for one to end
        import h11  # noqa: F401

        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task] = set()
        try:
            while True:
                await self._admitting.acquire()
                try:
                    conn, _ = await accept(loop, listener)
                except OSError as exc:  # out of descriptors, or a connection gone before it was taken: not the end
                    self._admitting.release()
                    if exc.errno not in ACCEPT_ERRORS:
                        raise
                    if exc.errno in ACCEPT_SHORTAGES:  # let admissions in flight end (each frees one) first
                        await asyncio.sleep(ACCEPT_BACKOFF)
                    continue
                except BaseException:
                    self._admitting.release()
                    raise
                task = asyncio.create_task(self._admit(conn))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            for task in tasks:
                task.cancel()

    async def _admit(self, conn: socket.socket) -> None:
        admitted = True
        try:
            conn.setblocking(False)
            head = await asyncio.wait_for(self._read_head(conn), HEAD_TIMEOUT)
            if head is None:
                return
            data, headers = head
            refused = http_guard.refusal(headers, self.hosts, self.origins, self.token)
            if refused is not None:
                await self._reply(conn, *refused)
                return
            if not self.relay:
                if not self._hand(b"h" + data, [conn.fileno()]):
                    await self._reply(conn, 503, "Service Unavailable: the environment is restarting", {})
                return
            ours, theirs = socket.socketpair()
            try:
                handed = self._hand(b"h" + data, [theirs.fileno()])
            finally:
                theirs.close()
            if not handed:
                ours.close()
                await self._reply(conn, 503, "Service Unavailable: the environment is restarting", {})
                return
            admitted = False
            self._admitting.release()  # (a relayed connection may stay open: it holds no admission's place)
            await _relay(conn, ours)
        except (asyncio.TimeoutError, TimeoutError, OSError):
            pass
        finally:
            conn.close()
            if admitted:
                self._admitting.release()

    async def _read_head(self, conn: socket.socket) -> tuple[bytes, dict[str, str]] | None:
        """The bytes read until the first request's head is complete, and its headers (``h11``'s parse, as the
        worker's); None when the client closed, or after answering 400/431."""
        import h11

        loop = asyncio.get_running_loop()
        parser = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        data = b""
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                too_big = "maximum" in str(exc) or len(data) > HEAD_LIMIT
                await self._reply(conn, 431 if too_big else 400,
                                  "Request Header Fields Too Large" if too_big else "Bad Request", {})
                return None
            if isinstance(event, h11.Request):
                return data, {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
            if event is not h11.NEED_DATA:
                return None
            room = CHANNEL_MESSAGE - 1 - len(data)  # what is read goes to the worker whole, in one message
            if room <= 0:
                await self._reply(conn, 431, "Request Header Fields Too Large", {})
                return None
            chunk = await loop.sock_recv(conn, min(1 << 16, room))
            if not chunk:
                return None
            data += chunk
            parser.receive_data(chunk)

    def _hand(self, message: bytes, fds: list[int], generation: int | None = None) -> bool:
        """Send ``message`` with ``fds`` to the worker that serves the episode now (``generation``: only to that one).
        False when none does (a worker that has not been told to serve yet would close what it got unanswered)."""
        channel = getattr(self.worker, "channel", None)
        if channel is None or not getattr(self.worker, "alive", False) or self.serving is None or \
                self.serving != self.worker.generation or (generation is not None and generation != self.serving):
            return False
        try:
            socket.send_fds(channel, [message], fds)
        except (BlockingIOError, OSError):
            return False
        return True

    async def run_stdio(self) -> None:
        """MCP over this process's stdin/stdout. The worker never gets those descriptors (they may be the user's
        terminal): it gets one end of a socket pair, and this relays whole lines both ways — what it sends back is
        re-encoded as JSON (ASCII-escaped when stdout is a terminal), anything else dropped. A worker that stops
        (it died, or closed its end) is replaced (``_keep_serving``): requests it had not answered get a JSON-RPC
        error, and the relay goes on with the new one. Returns when the worker has answered everything sent before
        stdin ended."""
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=64)
        threading.Thread(target=_feed_stdin, args=(loop, lines), name="awm-stdin", daemon=True).start()
        ascii_only = os.isatty(1)
        state = {"stdin_ended": False}
        generation: int | None = None
        while True:
            generation = await self._next_worker(generation)
            ours, theirs = socket.socketpair()
            try:
                handed = self._hand(b"s", [theirs.fileno(), theirs.fileno()], generation)
            finally:
                theirs.close()
            if not handed:  # gone meanwhile, or it does not take what it is handed: replaced either way
                ours.close()
                self._broken(generation)
                continue
            pending: dict[str, Any] = {}  # requests sent to this worker and not answered yet (by their id's JSON)
            reader, writer = await asyncio.open_connection(sock=ours, limit=STDIO_LINE_LIMIT)
            feeding = asyncio.create_task(_feed_worker(lines, writer, pending, state))
            try:
                await _relay_answers(reader, pending, ascii_only)
            finally:
                feeding.cancel()
                await asyncio.gather(feeding, return_exceptions=True)  # (a write to a worker that went)
                writer.close()
            if pending:  # asked, never answered: said, so that the client does not wait forever
                await loop.run_in_executor(None, _write_all, 1, b"".join(
                    _encode_line(error_body(INTERNAL_ERROR, WORKER_STOPPED, rid), ascii_only)
                    for rid in pending.values()))
            if state["stdin_ended"]:
                return  # everything sent before the end of stdin was answered (or said to be lost)
            self._broken(generation)

    def _broken(self, generation: int) -> None:
        """The worker of ``generation`` closed its end of the stdio relay (or would not take one): it no longer
        serves, and one that is still running is stopped, so that it is replaced."""
        if self.serving == generation:
            self.serving = None
        if self.worker.generation == generation and getattr(self.worker, "alive", False):
            self.worker.kill()

    @staticmethod
    async def _reply(conn: socket.socket, status: int, text: str, extra: dict[str, str]) -> None:
        try:
            await asyncio.get_running_loop().sock_sendall(conn, plain_reply(status, text, extra))
        except OSError:
            pass


def _tcp_confined(worker: Any) -> bool:
    """Whether ``worker``'s sandbox is refused TCP by Landlock (its lease's measured protections, else this host's)."""
    from awm_engine.sandbox import host

    lease = getattr(worker, "lease", None)
    facts = lease.protections if lease is not None and isinstance(lease.protections, dict) else host.protections()
    return host.tcp_confined(facts)


RELAY_CHUNK = 1 << 16


async def _relay(client: socket.socket, worker: socket.socket) -> None:
    """Copy bytes both ways between a client's TCP socket and the worker's end of a socket pair until both
    directions have ended (each end's EOF passed on as a shutdown of the other's writing side)."""
    loop = asyncio.get_running_loop()
    worker.setblocking(False)

    async def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                chunk = await loop.sock_recv(src, RELAY_CHUNK)
                if not chunk:
                    break
                await loop.sock_sendall(dst, chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    try:
        up = asyncio.ensure_future(pump(client, worker))
        down = asyncio.ensure_future(pump(worker, client))
        try:
            # the worker ending its side ends the exchange (a client still sending has nobody to read it)
            await down
        finally:
            up.cancel()
            await asyncio.gather(up, return_exceptions=True)
    finally:
        worker.close()


INTERNAL_ERROR = -32603
WORKER_STOPPED = ("the environment worker stopped before answering (awm starts a new one on the episode's databases; "
                  "the request may or may not have taken effect)")


def _feed_stdin(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue) -> None:
    """This process's stdin, line by line, into ``lines`` (None at its end). A daemon thread: a client that never
    closes stdin never keeps the server from exiting."""
    try:
        stdin = os.fdopen(os.dup(0), "rb")
    except OSError:
        stdin = None
    try:
        while stdin is not None:
            line = stdin.readline(STDIO_LINE_LIMIT)
            if not line:
                break
            asyncio.run_coroutine_threadsafe(lines.put(line if line.endswith(b"\n") else line + b"\n"), loop).result()
    except (OSError, ValueError, RuntimeError, concurrent.futures.CancelledError):
        pass
    finally:
        if stdin is not None:
            stdin.close()
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(lines.put(None), loop)


async def _feed_worker(lines: asyncio.Queue, writer: asyncio.StreamWriter, pending: dict[str, Any],
                       state: dict[str, bool]) -> None:
    """Client lines to the worker, noting the id of each request; at the end of stdin, the end of the worker's
    input."""
    while not state["stdin_ended"]:
        line = await lines.get()
        if line is None:
            state["stdin_ended"] = True
            break
        rid = _request_id(line)
        if rid is not None:
            pending[_id_key(rid)] = rid
        writer.write(line)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def _relay_answers(reader: asyncio.StreamReader, pending: dict[str, Any], ascii_only: bool) -> None:
    """The worker's lines to stdout, each re-encoded (what is not a JSON object is dropped), until it closes."""
    loop = asyncio.get_running_loop()
    async for line in stream_lines(reader):  # ends early at a line longer than any answer (a broken protocol)
        try:
            message = json.loads(line)
            data = _encode_line(message, ascii_only)
        except (ValueError, RecursionError):  # not JSON, nested past what JSON is decoded to here
            continue
        if isinstance(message, dict) and ("result" in message or "error" in message):
            pending.pop(_id_key(message.get("id")), None)
        await loop.run_in_executor(None, _write_all, 1, data)


def _request_id(line: bytes) -> Any:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, dict) and isinstance(message.get("method"), str) and (
            isinstance(message.get("id"), str) or type(message.get("id")) is int):
        return message["id"]
    return None


def _id_key(rid: Any) -> str:
    return json.dumps(rid) if isinstance(rid, (str, int)) else ""


def _encode_line(message: Any, ascii_only: bool) -> bytes:
    if ascii_only:
        return (json.dumps(message, separators=(",", ":")) + "\n").encode()
    return (dumps_text(message, separators=(",", ":")) + "\n").encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]




async def list_remote_tools(url: str, timeout: float = 10.0, token: str | None = None) -> list[dict[str, Any]]:
    """``tools/list`` on any MCP server (streamable HTTP URL), with a bearer token when given."""
    from fastmcp import Client

    async with Client(url, timeout=timeout, auth=token) as client:
        tools = await client.list_tools()
    return [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema} for t in tools]
