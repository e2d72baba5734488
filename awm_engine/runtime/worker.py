"""An environment worker process: hosts loaded scenarios and their episodes, answers JSON-line requests.

Started by ``pool.EnvPool`` as ``python -m awm_engine.runtime.worker --fd N`` with a scrubbed environment;
requests and answers travel over the socket on fd N, one JSON object per line; the process's own
stdout/stderr go to a log file, so whatever generated code prints never corrupts the protocol.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import socket
import sys
import time
from typing import Any

# httpx (which encodes each tool call's request as the reference's client would) imports its command line when
# click and rich are installed: 4 MB and 0.13 s of every worker for a command nobody runs here
sys.modules.setdefault("httpx._main", None)  # before anything imports httpx

from awm_engine.runtime import caps, heap, protocol  # noqa: E402
from awm_engine.runtime.envcode import EnvCodeError  # noqa: E402
from awm_engine.runtime.hosted import load_hosted  # noqa: E402
from awm_engine.runtime.inprocess import Episode, LoadedEnv  # noqa: E402


async def call(episode: Any, tool: str, arguments: Any, timeout: float | None, result_cap: Any,
               on_timeout: str = "interrupt", inline: bool = False) -> Any:
    """One tool call of an episode here; its text cut at the result cap before it leaves (runtime/caps.py).
    ``inline``: the handler runs on this event loop's thread (``inline_call``; the served path's calls)."""
    cap = caps.worker_result_cap(result_cap)
    if isinstance(episode, Episode) and inline and on_timeout == "interrupt":
        result = await episode.call_tool_inline(tool, arguments, timeout, cap)
    elif isinstance(episode, Episode):  # cut where the text is made
        result = await episode.call_tool(tool, arguments, timeout, cap, on_timeout)
    else:
        result = caps.cap_result(await episode.call_tool(tool, arguments, timeout), cap, protocol.TEXT_BUDGET)
    if result.traceback:
        log_traceback(episode, tool, result)
    return result


class WorkerState:
    def __init__(self, emit: Any = None) -> None:
        self.emit = emit  # sends an event (a message without id) to the parent
        self.serving: tuple[Any, Any] | None = None  # (WireServer, Guard) while an episode is served over MCP
        self.channel_task: asyncio.Task | None = None
        self.envs: dict[str, LoadedEnv] = {}
        self.episodes: dict[str, Episode] = {}
        self.load_locks: dict[str, asyncio.Lock] = {}
        self.retired: list[LoadedEnv] = []  # replaced by a newer template, still serving open episodes

    def _replace(self, key: str, env: LoadedEnv) -> None:
        """New episodes of ``key`` use ``env``; the old one closes once its last episode has."""
        old = self.envs.get(key)
        self.envs[key] = env
        if old is not None:
            self.retired.append(old)
            self._close_retired()

    def _close_retired(self) -> None:
        in_use = {id(e.env) for e in self.episodes.values()}
        for env in [e for e in self.retired if id(e) not in in_use]:
            self.retired.remove(env)
            env.close()

    async def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        loop = asyncio.get_running_loop()
        if op == "ping":
            return {"pid": os.getpid(), "envs": len(self.envs), "episodes": len(self.episodes),
                    "frozen": gc.get_freeze_count()}
        if op == "load" and msg.get("hosted") is not None:  # an environment awm itself implements (hosted.py)
            key = msg["scenario"]
            async with self.load_locks.setdefault(key, asyncio.Lock()):
                if key not in self.envs:
                    self.envs[key] = await loop.run_in_executor(
                        None, lambda: load_hosted(key, msg["hosted"], msg.get("workdir")))
                    settle_heap()
            return {"tools": self.envs[key].mcp_tools(), "shared": True, "fit_reasons": [], "methods": {},
                    "template_built_at": None}
        if op == "load":
            key = msg["scenario"]
            lock = self.load_locks.setdefault(key, asyncio.Lock())
            async with lock:
                current = self.envs.get(key)
                # loaded already from the same code and template (a spare the warm service bound to this
                # scenario ahead of its server, runtime.warm): kept, not executed again
                if current is None or current.template_built_at != msg.get("template_built_at") or \
                        current.code != msg["code"] or (msg.get("template_digest") is not None and
                                                        current.sealed_digest != msg["template_digest"]):
                    self._replace(key, await loop.run_in_executor(
                        None, lambda: LoadedEnv(key, msg["code"], msg["template"], msg["workdir"],
                                                msg.get("mode", "auto"), msg.get("template_built_at"),
                                                msg.get("template_digest"))))
            settle_heap()
            env = self.envs[key]
            return {"tools": env.mcp_tools(), "shared": env.shared, "fit_reasons": env.fit.reasons,
                    "methods": {t.name: t.method for t in env.tools}, "template_built_at": env.template_built_at}
        if op == "unload":  # the pool keeps only so many scenario modules per worker (least recently used go)
            key = msg["scenario"]
            env = self.envs.pop(key, None)
            if env is not None:
                self.retired.append(env)
                self._close_retired()
                settle_heap(unfreeze=True)  # what the module held may be collected now
            return {"unloaded": env is not None}
        if op == "open" and not isinstance(self.envs.get(msg["scenario"]), LoadedEnv):  # hosted (hosted.py)
            env = self.envs[msg["scenario"]]
            episode = await loop.run_in_executor(None, lambda: env.open_episode(
                msg["run_dir"], msg["episode"], bool(msg.get("attach")), msg.get("options")))
            self.episodes[episode.id] = episode
            return {"initial_db": str(episode.initial_db), "final_db": str(episode.final_db),
                    "template_built_at": None}
        if op == "open":
            env = self.envs[msg["scenario"]]
            episode = await loop.run_in_executor(None, lambda: Episode(env, msg["run_dir"], msg["episode"],
                                                                             bool(msg.get("attach")),
                                                                             msg.get("schema_check")))
            self.episodes[episode.id] = episode
            return {"initial_db": str(episode.initial_db), "final_db": str(episode.final_db),
                    "template_built_at": env.template_built_at}
        episode = self.episodes.get(msg.get("episode", ""))
        if episode is None:
            raise KeyError(f"unknown episode {msg.get('episode')!r}")
        if op == "call":
            result = await call(episode, msg["tool"], msg.get("arguments"), msg.get("timeout"),
                                msg.get("result_cap"), msg.get("on_timeout") or "interrupt")
            return {**result.to_dict(), "stuck": episode.stuck, "left_running": getattr(episode, "left_running", 0)}
        if op == "serve":  # answer MCP clients on the connections the parent hands over (mcp_http.channel_loop)
            from awm_engine.runtime.served import episode_server

            self.serving = episode_server(episode, msg, call, self.emit)
            return {}
        if op == "list_tools":
            return {"tools": episode.list_tools()}
        if op == "reset":
            await loop.run_in_executor(None, episode.reset_now)
            return {}
        if op == "close":
            if getattr(episode, "left_running", 0):  # waits for a handler left running: not on this loop
                await loop.run_in_executor(None, episode.close_now)
            else:
                episode.close_now()
            del self.episodes[episode.id]
            self._close_retired()
            return {"stuck": episode.stuck}  # a handler left running would not stop: recycle this worker
        raise ValueError(f"unknown op {op!r}")


def log_traceback(episode: Episode, tool: str, result: Any) -> None:
    """The traceback behind a failing call, in this worker's log (``server.log`` of ``awm env serve``)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    what = f"HTTP {result.status}" if result.status else result.error_kind
    sys.stderr.write(f"[{when}] {episode.env.key} episode {episode.id}: {tool} -> {what}\n"
                     f"{result.traceback.rstrip()}\n")
    sys.stderr.flush()


async def serve(sock: socket.socket, channel: socket.socket | None = None) -> None:
    reader, writer = await asyncio.open_connection(sock=sock, limit=protocol.LINE_LIMIT)
    write_lock = asyncio.Lock()

    def emit(event: dict[str, Any]) -> None:  # from the loop's thread; written in order with the answers
        writer.write(protocol.encode(event))

    state = WorkerState(emit)
    if channel is not None:
        from awm_engine.runtime.mcp_http import channel_loop

        state.channel_task = asyncio.create_task(channel_loop(channel, lambda: state.serving or (None, None)))

    async def answer(msg: dict[str, Any]) -> None:
        try:
            data = protocol.ok_reply(msg.get("id"), await state.handle(msg))
        except EnvCodeError as exc:
            data = protocol.error_reply(msg.get("id"), exc, "env_code")
        except Exception as exc:  # noqa: BLE001 - reported to the parent, the worker keeps serving
            data = protocol.error_reply(msg.get("id"), exc)
        async with write_lock:
            writer.write(data)
            await writer.drain()

    tasks: set[asyncio.Task] = set()
    while True:
        line = await reader.readline()
        if not line:
            break
        msg = protocol.decode(line)
        if msg.get("op") == "shutdown":
            break
        task = asyncio.create_task(answer(msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for episode in list(state.episodes.values()):
        episode.close_now()


def settle_heap(unfreeze: bool = False) -> None:
    """After a scenario module is loaded: collect once, then freeze what survives (the module, FastAPI, SQLAlchemy
    and pydantic objects) so the garbage collector's full passes, which otherwise scan all of it every so often,
    stop pausing tool calls and episode opens (measured: 30-150 ms pauses per full pass in a loaded worker); then
    give the heap's free pages back (``heap.trim``). ``unfreeze`` first (after an unload) lets the unloaded module's
    objects be collected."""
    heap.settle(unfreeze)


def prewarm() -> None:
    """Import what every environment module imports, and warm it (``warmup``), before any scenario is assigned: a
    spare sandbox is ready to load its scenario at once."""
    try:
        import fastapi  # noqa: F401
        import pydantic  # noqa: F401
        import sqlalchemy.orm  # noqa: F401
    except ImportError:
        pass
    else:
        from awm_engine.runtime.warmup import warm_up

        warm_up()
    settle_heap()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="awm-worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--channel", type=int, help="descriptor channel of a served episode (mcp_http)")
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    channel = socket.socket(fileno=args.channel) if args.channel is not None else None
    prewarm()
    # one sandbox per scenario means many workers share the cores: the default switch interval (5 ms) wastes less
    # of them on GIL hand-offs than the 0.5 ms a few shared workers used (calls/s 502 -> 662 for 256 episodes)
    sys.setswitchinterval(float(os.environ.get("AWM_SWITCH_INTERVAL") or 0.005))
    try:
        asyncio.run(serve(sock, channel))
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
    os._exit(0)  # do not wait for handler threads that a timeout could not stop


if __name__ == "__main__":
    sys.exit(main())
