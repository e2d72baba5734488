"""``awm env serve``'s own front stops cleanly when it is cancelled in the same turn of the loop as a connection
arrives (asyncio's ``sock_accept`` set a result on the cancelled future there: ``InvalidStateError`` at a stop, the
connection dropped; found by the lean front's red team under the engine's front)."""
from __future__ import annotations

import asyncio
import socket

from awm_engine.runtime.mcp_server import accept


async def _cancelled_as_a_connection_arrives(take) -> tuple[list, socket.socket, socket.socket]:
    loop = asyncio.get_running_loop()
    errors: list = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context.get("exception") or context["message"]))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    task = asyncio.ensure_future(take(loop, listener))
    for _ in range(2):
        await asyncio.sleep(0)  # waiting for a connection (the listener watched by the loop)
    client = socket.create_connection(listener.getsockname(), timeout=10)
    loop.call_soon(task.cancel)  # in the same turn as the loop sees the connection
    for _ in range(5):
        await asyncio.sleep(0)
    assert task.cancelled()
    return errors, listener, client


async def test_a_cancelled_accept_raises_nothing_and_leaves_the_connection_waiting():
    errors, listener, client = await _cancelled_as_a_connection_arrives(accept)
    try:
        assert errors == []
        conn, _ = await asyncio.wait_for(accept(asyncio.get_running_loop(), listener), 10)  # still there
        conn.close()
    finally:
        client.close()
        listener.close()


async def test_asyncios_own_accept_has_the_race_this_avoids():
    """(What the test above guards against: should asyncio fix it, this one fails and ``accept`` can go.)"""
    errors, listener, client = await _cancelled_as_a_connection_arrives(lambda loop, s: loop.sock_accept(s))
    client.close()
    listener.close()
    assert [type(e).__name__ for e in errors] == ["InvalidStateError"]
