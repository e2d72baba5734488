"""Episodes keyed per request, and the pools they share.

verl creates and releases a tool instance around every tool call (spec/engine-notes.md B.5), and builds a new
agent-loop object per sample: neither can hold an episode. The episode lives here instead, keyed by the
request id of one agent-loop run, from ``open`` to ``release`` (which a ``finally`` guarantees). The pool of
environment workers is shared by every session of an event loop (``pool_for_loop``).
"""
from __future__ import annotations

import asyncio
from typing import Any

from awm_engine.data.catalog import Catalog
from awm_engine.runtime.pool import EnvPool
from awm_engine.train.gym import AWMEnv, SharedPool


class SessionRegistry:
    """request id -> the ``AWMEnv`` running that request's episode."""

    def __init__(self) -> None:
        self._sessions: dict[str, AWMEnv] = {}

    async def open(self, request_id: str, env: AWMEnv, scenario: str, task: int,
                   **reset_kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start ``env``'s episode for ``request_id`` (an id already in use is an error: ids are per request)."""
        if request_id in self._sessions:
            raise KeyError(f"request {request_id} already has an episode")
        self._sessions[request_id] = env
        try:
            return await env.reset(scenario, task, **reset_kwargs)
        except BaseException:
            self._sessions.pop(request_id, None)
            raise

    def get(self, request_id: str) -> AWMEnv:
        try:
            return self._sessions[request_id]
        except KeyError:
            raise KeyError(f"no episode for request {request_id} (released, or never opened)") from None

    async def release(self, request_id: str) -> None:
        """End the request's episode (aborted if it is still running) and forget it; unknown ids are ignored."""
        env = self._sessions.pop(request_id, None)
        if env is not None:
            await env.close()

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)


_POOLS: dict[int, tuple[asyncio.AbstractEventLoop, SharedPool]] = {}
_CATALOGS: dict[tuple[str, ...] | None, Catalog] = {}


async def pool_for_loop(workers: int | None = None) -> EnvPool:
    """The ``EnvPool`` of the running event loop (started on first use; its workers are shared)."""
    loop = asyncio.get_running_loop()
    entry = _POOLS.get(id(loop))
    if entry is None or entry[0] is not loop:
        entry = (loop, SharedPool(workers))
        _POOLS[id(loop)] = entry
    return await entry[1].get()


async def close_loop_pool() -> None:
    """Stop the running loop's shared pool (at the end of a process's training)."""
    entry = _POOLS.pop(id(asyncio.get_running_loop()), None)
    if entry is not None:
        await entry[1].close()


def catalog_for(data_dirs: list[str] | tuple[str, ...] | None) -> Catalog:
    """One catalog per set of data directories per process (loading one is not free)."""
    key = tuple(str(d) for d in data_dirs) if data_dirs else None
    if key not in _CATALOGS:
        _CATALOGS[key] = Catalog.load(list(key) if key else None)
    return _CATALOGS[key]
