"""The transports of a served episode inside its sandboxed worker: HTTP/1.1 connections and stdio.

``awm env serve`` (the parent, outside the sandbox) owns the listening socket; it accepts each connection, reads
its first request's head, checks it (loopback ``Host``, same-origin ``Origin``, the bearer token) and only then
hands the connected socket and the bytes it read to the worker over a descriptor channel (``channel_loop``). The
worker answers every request on it with ``mcp_wire.WireServer``, checking each again: no hop through the parent on
the call path, and the sandbox can neither accept a connection the parent refused nor open one of its own (it has
no network). HTTP is parsed by ``h11``.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import os
import socket
import time
from typing import Any


from awm_engine.runtime import http_guard
from awm_engine.runtime.http_head import parse_head
from awm_engine.runtime.mcp_wire import PARSE_ERROR, HttpReply, WireServer, dumps, error_body

MAX_BODY = 16 << 20  # bytes of one request body (a 413 beyond)
MAX_HEAD = 64 << 10  # bytes of one request's line and headers
READ = 1 << 16
CHANNEL_MESSAGE = 1 << 17  # the largest message on the descriptor channel: a kind byte and what the parent read
# of a connection (its first request's head, maybe more; ``mcp_server`` never reads past it)


class Guard:
    """The parent's checks, made again on every request (the parent checks each connection's first one)."""

    def __init__(self, port: int | None, token: str | None):
        self.port, self.token = port, token
        self.hosts = http_guard.allowed_hosts(port) if port else set()
        self.origins = http_guard.allowed_origins(port) if port else set()

    def refusal(self, headers: dict[str, str]) -> tuple[int, str, dict[str, str]] | None:
        if not self.port:
            return None
        return http_guard.refusal(headers, self.hosts, self.origins, self.token)


_date: tuple[int, str] = (0, "")


def http_date() -> str:
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, email.utils.formatdate(now, usegmt=True))
    return _date[1]


def _send(conn: "h11.Connection", writer: asyncio.StreamWriter, reply: HttpReply, keep: bool = True) -> None:
    import h11
    headers = [("date", http_date()), *reply.headers, ("content-length", str(len(reply.body)))]
    if not keep:
        headers.append(("connection", "close"))
    out = conn.send(h11.Response(status_code=reply.status, headers=headers))
    if reply.body:
        out += conn.send(h11.Data(data=reply.body))
    out += conn.send(h11.EndOfMessage())
    writer.write(out)


_REASONS = {status.value: status.phrase for status in __import__("http").HTTPStatus}


def _response(reply: HttpReply, keep: bool = True) -> bytes:
    head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, '')}", f"date: {http_date()}",
            *(f"{k}: {v}" for k, v in reply.headers), f"content-length: {len(reply.body)}"]
    if not keep:
        head.append("connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body


async def serve_connection(sock: socket.socket, prefix: bytes, server: WireServer, guard: Guard) -> None:
    """Answer the requests of one HTTP connection until the client closes it (or breaks the protocol).

    The requests MCP clients send (a plain head, a ``Content-Length`` body) are read by ``parse_head``; anything
    else — a chunked body, a head it does not take — hands the connection to ``h11`` from that request on."""
    sock.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=sock, limit=READ)
    buffer = bytearray(prefix)
    try:
        while True:
            end = buffer.find(b"\r\n\r\n")
            while end < 0:
                if len(buffer) > MAX_HEAD:
                    writer.write(_response(HttpReply(431, [("content-type", "text/plain; charset=utf-8")],
                                                     b"Request Header Fields Too Large"), keep=False))
                    await writer.drain()
                    return
                chunk = await reader.read(READ)
                if not chunk:
                    return
                buffer += chunk
                end = buffer.find(b"\r\n\r\n", max(0, len(buffer) - len(chunk) - 3))
            parsed = parse_head(bytes(buffer[:end]))
            length = parsed[3].get("content-length", "0") if parsed else ""
            if parsed is None or "transfer-encoding" in parsed[3] or not length.isdigit():
                await _serve_h11(reader, writer, bytes(buffer), server, guard)
                return
            method, target, version, headers = parsed
            del buffer[:end + 4]
            length = int(length)
            if length > MAX_BODY:
                writer.write(_response(HttpReply(413, [("content-type", "text/plain; charset=utf-8")],
                                                 b"Request body too large"), keep=False))
                await writer.drain()
                return
            while len(buffer) < length:
                chunk = await reader.read(READ)
                if not chunk:
                    return
                buffer += chunk
            body = bytes(buffer[:length])
            del buffer[:length]
            refused = guard.refusal(headers)
            if refused is not None:
                status, text, extra = refused
                writer.write(_response(HttpReply(status, [("content-type", "text/plain; charset=utf-8"),
                                                          *extra.items()], text.encode()), keep=False))
                await writer.drain()
                return
            reply = await server.http(method.upper(), target.split("?", 1)[0], headers, body)
            if reply.hold is not None:  # a GET stream: silent until its session ends or the client goes
                await _hold(reply.hold, reader)
                return
            connection = headers.get("connection", "").lower()
            keep = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
            writer.write(_response(reply, keep))
            await writer.drain()
            if not keep:
                return
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _serve_h11(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, prefix: bytes, server: WireServer,
                     guard: Guard) -> None:
    """The rest of a connection through ``h11`` (chunked bodies, and the exact errors of malformed heads)."""
    import h11  # here: the plain-head path (every MCP client's) and ``awm env serve``'s parent never need it

    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    if prefix:
        conn.receive_data(prefix)
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(READ))
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                break
            if not isinstance(event, h11.Request):
                break
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
            body = bytearray()
            too_big = False
            while True:
                part = conn.next_event()
                if part is h11.NEED_DATA:
                    conn.receive_data(await reader.read(READ))
                elif isinstance(part, h11.Data):
                    if len(body) + len(part.data) > MAX_BODY:
                        too_big = True
                    else:
                        body += part.data
                elif isinstance(part, h11.EndOfMessage):
                    break
                else:
                    return
            refused = guard.refusal(headers)
            if refused is not None:
                status, text, extra = refused
                _send(conn, writer, HttpReply(status, [("content-type", "text/plain; charset=utf-8"),
                                                       *extra.items()], text.encode()), keep=False)
                await writer.drain()
                break
            if too_big:
                _send(conn, writer, HttpReply(413, [("content-type", "text/plain; charset=utf-8")],
                                              b"Request body too large"), keep=False)
                await writer.drain()
                break
            target = event.target.decode("latin-1").split("?", 1)[0]
            reply = await server.http(event.method.decode("latin-1").upper(), target, headers, bytes(body))
            if reply.hold is not None:  # a GET stream: silent until its session ends or the client goes
                await _hold(reply.hold, reader)
                break
            _send(conn, writer, reply)
            await writer.drain()
            if conn.our_state is h11.MUST_CLOSE:
                break
            conn.start_next_cycle()
    except (h11.RemoteProtocolError, h11.LocalProtocolError):
        try:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                _send(conn, writer, HttpReply(400, [("content-type", "text/plain; charset=utf-8")],
                                              b"Bad Request"), keep=False)
                await writer.drain()
        except (h11.LocalProtocolError, OSError):
            pass
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        pass


async def _hold(session: Any, reader: asyncio.StreamReader) -> None:
    if session.closed is None:
        session.closed = asyncio.Event()
    ended = asyncio.ensure_future(session.closed.wait())
    gone = asyncio.ensure_future(_until_eof(reader))
    try:
        await asyncio.wait({ended, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        gone.cancel()
        session.listening = False


async def _until_eof(reader: asyncio.StreamReader) -> None:
    while await reader.read(READ):
        pass


async def lines(reader: asyncio.StreamReader):
    """The lines of a stream until its end, or until one is longer than the reader's limit (a peer that broke the
    protocol: nothing more of it is read)."""
    while True:
        try:
            line = await reader.readline()
        except (ValueError, asyncio.LimitOverrunError):
            return
        if not line:
            return
        yield line


async def serve_stdio(in_fd: int, out_fd: int, server: WireServer) -> None:
    """MCP over a pair of pipes: one JSON-RPC message per line each way, until the input ends."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_BODY)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", 0))
    out = os.fdopen(out_fd, "wb", 0)
    lock = asyncio.Lock()
    tasks: set[asyncio.Task] = set()

    async def answer(line: bytes) -> None:
        try:
            raw = json.loads(line)
        except ValueError as exc:
            reply: dict[str, Any] | None = error_body(PARSE_ERROR, f"Parse error: {exc}", None)
        else:
            reply = await server.message(raw)
        if reply is not None:
            async with lock:
                await loop.run_in_executor(None, out.write, dumps(reply) + b"\n")

    async for line in lines(reader):
        if line.strip():
            task = asyncio.create_task(answer(line))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(tasks)
    out.close()  # the parent's relay sees the end once every answer is out


async def channel_loop(channel: socket.socket, server_of: Any) -> None:
    """Take what the parent hands over on the descriptor channel: ``h`` + the bytes of a request head it read, with
    one connected socket; ``s`` with the two ends (in, out) of the parent's stdio relay. ``server_of()`` is the
    (server, guard) then current (None: not serving: what came is closed). Ends when the parent closes the channel."""
    loop = asyncio.get_running_loop()
    channel.setblocking(False)
    tasks: set[asyncio.Task] = set()
    ready = asyncio.Event()
    loop.add_reader(channel.fileno(), ready.set)
    try:
        while True:
            await ready.wait()
            ready.clear()
            while True:
                try:
                    data, fds, flags, _addr = socket.recv_fds(channel, CHANNEL_MESSAGE, 2,
                                                              socket.MSG_CMSG_CLOEXEC)
                except BlockingIOError:
                    break
                if not data and not fds:
                    return  # the parent closed the channel
                server, guard = server_of()
                cut = flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)  # never serve bytes other than those checked
                if server is None or cut or not data or (data[:1] == b"h" and len(fds) != 1) or \
                        (data[:1] == b"s" and len(fds) != 2) or data[:1] not in (b"h", b"s"):
                    for fd in fds:
                        os.close(fd)
                    continue
                if data[:1] == b"h":
                    coro = serve_connection(socket.socket(fileno=fds[0]), data[1:], server, guard)
                else:
                    coro = serve_stdio(fds[0], fds[1], server)
                task = asyncio.create_task(coro)
                tasks.add(task)
                task.add_done_callback(tasks.discard)
    finally:
        loop.remove_reader(channel.fileno())
        for task in tasks:
            task.cancel()
