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
import json
import os
import socket
from pathlib import Path
from typing import Any

from awm_engine.runtime import http_guard

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


class CallsLog:
    """``calls.jsonl``: one line per call, from the worker's events, within ``CALLS_LOG_LIMIT`` bytes in all."""

    def __init__(self, path: Path, limit: int = CALLS_LOG_LIMIT):
        self.fh = open(path, "a", encoding="utf-8")
        self.left = limit

    def write(self, record: Any) -> None:
        if self.left <= 0 or not isinstance(record, dict):
            return
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        if len(line) > self.left:
            line = json.dumps({"note": "calls.jsonl reached its size limit: later calls are not recorded"}) + "\n"
            self.left = 0
        else:
            self.left -= len(line)
        self.fh.write(line)
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


class ServeFront:
    """Accepts, checks and hands over connections to the current worker of one served episode."""

    def __init__(self, worker: Any, port: int | None, token: str | None):
        self.worker = worker
        self.port = port
        self.token = token
        self.hosts = http_guard.allowed_hosts(port) if port else set()
        self.origins = http_guard.allowed_origins(port) if port else set()
        self._admitting = asyncio.Semaphore(MAX_ADMITTING)

    async def run_http(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task] = set()
        try:
            while True:
                await self._admitting.acquire()
                try:
                    conn, _ = await loop.sock_accept(listener)
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
            if not self._hand(b"h" + data, [conn.fileno()]):
                await self._reply(conn, 503, "Service Unavailable: the environment is restarting", {})
        except (asyncio.TimeoutError, TimeoutError, OSError):
            pass
        finally:
            conn.close()
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
            chunk = await loop.sock_recv(conn, 1 << 16)
            if not chunk:
                return None
            data += chunk
            parser.receive_data(chunk)

    def _hand(self, message: bytes, fds: list[int]) -> bool:
        channel = getattr(self.worker, "channel", None)
        if channel is None or not getattr(self.worker, "alive", False):
            return False
        try:
            socket.send_fds(channel, [message], fds)
        except (BlockingIOError, OSError):
            return False
        return True

    async def run_stdio(self) -> None:
        """MCP over this process's stdin/stdout. The worker never gets those descriptors (they may be the user's
        terminal): it gets one end of a socket pair, and this relays whole lines both ways — what it sends back is
        re-encoded as JSON (ASCII-escaped when stdout is a terminal), anything else dropped. Returns when the
        worker has answered everything sent before stdin ended."""
        ours, theirs = socket.socketpair()
        try:
            if not self._hand(b"s", [theirs.fileno(), theirs.fileno()]):
                raise RuntimeError("the environment worker is not running")
        finally:
            theirs.close()
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_connection(sock=ours, limit=STDIO_LINE_LIMIT)
        ascii_only = os.isatty(1)

        async def inbound() -> None:
            stdin = os.fdopen(os.dup(0), "rb", buffering=0)
            try:
                while True:
                    line = await loop.run_in_executor(None, _read_line, stdin)
                    if not line:
                        break
                    writer.write(line if line.endswith(b"\n") else line + b"\n")
                    await writer.drain()
            finally:
                stdin.close()
                if writer.can_write_eof():
                    writer.write_eof()

        feeding = asyncio.create_task(inbound())
        try:
            from awm_engine.runtime.mcp_http import lines

            async for line in lines(reader):  # ends early at a line longer than any answer (a broken protocol)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                data = (json.dumps(message, ensure_ascii=ascii_only, separators=(",", ":")) + "\n").encode()
                await loop.run_in_executor(None, _write_all, 1, data)
        finally:
            feeding.cancel()
            writer.close()

    @staticmethod
    async def _reply(conn: socket.socket, status: int, text: str, extra: dict[str, str]) -> None:
        body = text.encode()
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "content-type: text/plain; charset=utf-8",
                f"content-length: {len(body)}", "connection: close", *(f"{k}: {v}" for k, v in extra.items())]
        try:
            await asyncio.get_running_loop().sock_sendall(conn, ("\r\n".join(head) + "\r\n\r\n").encode() + body)
        except OSError:
            pass


def _read_line(stream: Any) -> bytes:
    return stream.readline(STDIO_LINE_LIMIT)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 421: "Misdirected Request",
            431: "Request Header Fields Too Large", 503: "Service Unavailable"}


async def list_remote_tools(url: str, timeout: float = 10.0, token: str | None = None) -> list[dict[str, Any]]:
    """``tools/list`` on any MCP server (streamable HTTP URL), with a bearer token when given."""
    from fastmcp import Client

    async with Client(url, timeout=timeout, auth=token) as client:
        tools = await client.list_tools()
    return [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema} for t in tools]
