"""The engine's side of ``lean_front``: ``awm env serve`` handing its front over to a process of Python's built-in
modules only (``go_lean``), and taking the episode back when that front ``exec``s ``awm`` again (``take_state``,
``readopt``).

Only what the lean front needs, and what the engine needs back, crosses an ``exec``: descriptors (the listening
socket, the leased worker's control socket, descriptor channel, output pipe and pidfd, the lease itself, the lock on
the session directory) and a state record on a memfd (``FORMAT``): the front's settings, ``calls.jsonl``'s remaining
allowance and the episode as the engine knows it on a line of JSON, then the control bytes read and not yet taken, as
they are. The lean front never writes what the engine reads of the episode; it passes it back as it got it.
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Callable

from awm_engine.runtime import lean_front

LEAN_ENV = "AWM_SERVE_LEAN"  # "0": the engine's own front serves throughout (``awm env serve``)
PROCESS_ENTRY: list[bool] = []  # [True] once ``awm``'s ``main`` runs as this process's program (never in-process)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def hold_stops() -> None:
    """SIGINT and SIGTERM blocked: one sent from now on stays pending, across an ``exec`` too, until the program then
    running has its handlers set and releases it (``release_stops``; ``lean_front`` does the same). An ``exec`` resets
    handlers to the default: a SIGTERM sent while the next program starts killed the process, and with it the
    episode's databases (the lease closed, the service removed the worker's directory); ignored, it was lost."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def release_stops() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def refusal(stdio: bool, worker: Any, hardened: bool) -> str | None:
    """Why this server keeps the engine's front (None: it goes lean)."""
    if os.environ.get(LEAN_ENV, "1") == "0":
        return f"{LEAN_ENV}=0"
    if stdio:
        return "stdio"
    if not PROCESS_ENTRY:
        return "awm runs inside another program"
    if worker.lease is None:
        return "the worker is not a warm one"
    facts = worker.lease.protections if isinstance(worker.lease.protections, dict) else {}
    if facts.get("distinct_uid") is not True or facts.get("proc_isolated") is not True or \
            facts.get("unsafe_no_sandbox") is not False:
        # the lean front is dumpable for the moment between its exec and its prctl: only a worker that can never
        # reach this process (another user, its own /proc) may run beside that moment
        return "the worker runs as this user or sees its processes"
    from awm_engine.sandbox import host

    if not host.tcp_confined(facts):  # the lean front hands the worker the client's TCP socket itself
        return "Landlock does not refuse the worker TCP here (ABI < 4): the engine's front relays its connections"
    if not hardened:
        return "this process could not be made non-dumpable"
    if not hasattr(os, "memfd_create") or not getattr(sys, "orig_argv", None):
        return "no memfd_create or orig_argv here"
    return None


def go_lean(*, listener: socket.socket, worker: Any, episode: Any, calls: Any, port: int, token: str | None,
            exit_with_parent: int | None, session: dict[str, Any], stop_requested: Callable[[], bool],
            claim: int | None = None) -> None:
    """Replace this process by ``lean_front`` (same pid: the worker, the listener and the lease stay with it). Returns
    only when a SIGINT or SIGTERM came first (``stop_requested``, the command's own signal state): its cancel of the
    server's task is on its way, the engine stops."""
    from awm_engine.runtime import mcp_server, protocol
    from awm_engine.sandbox.output import LOG_CAP, cap_note

    hold_stops()  # a stop sent from now on waits for the lean front's handlers
    if stop_requested():  # (one handled before: the engine's handler already cancels the server's task)
        release_stops()
        return
    lease = worker.lease
    lease.stop_log()
    unread = worker.detach()
    calls.fh.flush()
    fds = {"listener": listener.fileno(), "control": worker._writer.transport.get_extra_info("socket").fileno(),
           "channel": worker.channel.fileno(), "lease": lease.sock.fileno(), "output": lease.output,
           "pidfd": lease.pidfd, **({"claim": claim} if claim is not None else {})}  # (claim: held, never read)
    for fd in fds.values():
        os.set_inheritable(fd, True)
    info = episode.info
    state = {
        "format": lean_front.FORMAT, "why": "", "engine": [sys.executable, *sys.orig_argv[1:]], "fds": fds,
        "front": {"port": port, "token": token, "head_limit": mcp_server.HEAD_LIMIT,
                  "channel_message": mcp_server.CHANNEL_MESSAGE, "head_timeout": mcp_server.HEAD_TIMEOUT,
                  "max_admitting": mcp_server.MAX_ADMITTING, "line_limit": protocol.LINE_LIMIT,
                  "exit_with_parent": exit_with_parent, "need_nondumpable": True},
        "calls": {"path": str(calls.path), "left": calls.left},
        "log": {"path": str(worker.log_path), "cap": LOG_CAP, "note": cap_note(LOG_CAP).decode()},
        "control_prefix": unread,  # (bytes: raw after the state's line, ``lean_front.write_state``)
        "engine_state": {
            "lease": {"pid": lease.pid, "home": str(lease.home), "protections": lease.protections,
                      "bound": lease.bound},
            "worker": {"index": worker.index, "own_home": str(worker.own_home), "generation": worker.generation,
                       "log_path": str(worker.log_path), "scenario": worker.scenario},
            "episode": {"id": info.id, "scenario": info.scenario, "run_dir": str(info.run_dir),
                        "live_dir": str(info.live_dir), "tools": episode.tools, "shared": episode.shared,
                        "schema_check": episode.schema_check, "methods": episode.methods,
                        "task_idx": episode.task_idx, "template": episode.template, "options": episode.options},
            "session": session,
        },
    }
    # this program ends here: what it does at exit, it does now (an exec runs no ``atexit``) — the sandboxes it
    # started stopped (a template build), its memory cgroup and its sandbox view's files removed
    atexit._run_exitfuncs()
    try:
        lean_front.execute(lean_argv(), state)
    finally:  # (only when the exec failed)
        release_stops()


def lean_argv() -> list[str]:
    """The lean front's command line: imported (its compiled ``.pyc`` used, 1.4 MB less than compiling it as a
    script), from its own directory, with nothing of the site or the environment's Python variables (``-I -S``);
    then, unread, the server's own command line, so that ``ps`` and ``pgrep -f "awm env serve"`` still show it."""
    here = os.path.dirname(os.path.abspath(lean_front.__file__))
    return [sys.executable, "-I", "-S", "-c",
            f"import sys; sys.path.append({here!r}); import lean_front; lean_front.main()",
            *getattr(sys, "orig_argv", [])[1:]]


def take_state() -> dict[str, Any] | None:
    """The state the lean front handed back (``awm env serve`` resuming), or None (a server starting)."""
    value = os.environ.pop(lean_front.STATE_ENV, None)
    if value is None:
        return None
    state = lean_front.read_state(int(value))
    for fd in state["fds"].values():
        os.set_inheritable(fd, False)
    return state


async def readopt(pool: Any, scenario: Any, state: dict[str, Any], on_event: Any) -> Any:
    """The episode of ``state`` back in ``pool``: its leased worker adopted again (what the lean front had read and
    not taken is read first, its output copied into the log again), the episode as it was."""
    from awm_engine.runtime import warm
    from awm_engine.runtime.pool import EpisodeInfo, PoolEpisode, WorkerProcess

    es, fds = state["engine_state"], state["fds"]
    w, ls, ep = es["worker"], es["lease"], es["episode"]
    lease = warm.Lease(socket.socket(fileno=fds["lease"]), socket.socket(fileno=fds["control"]),
                       socket.socket(fileno=fds["channel"]), fds["output"], fds["pidfd"], ls["pid"],
                       Path(ls["home"]), ls["protections"], ls["bound"])
    lease.channel.setblocking(False)
    while next(pool._indexes) < w["index"]:
        pass
    worker = WorkerProcess(w["index"], Path(w["log_path"]), Path(w["own_home"]), channel=True)
    worker.inflight = __import__("asyncio").Semaphore(pool.max_inflight)
    worker.generation = w["generation"] - 1  # (adopting counts one)
    worker.scenario = w["scenario"]
    worker.on_event = on_event
    pool.workers.append(worker)
    await worker.adopt(lease, state["control_prefix"])
    info = EpisodeInfo(ep["id"], ep["scenario"], Path(ep["run_dir"]), Path(ep["live_dir"]))
    episode = PoolEpisode(pool, scenario, info, worker, ep["tools"], ep["shared"], ep["schema_check"])
    episode.methods, episode.task_idx, episode.template = ep["methods"], ep["task_idx"], ep["template"]
    episode.options = ep["options"]
    worker.episodes.add(info.id)
    pool.episodes[info.id] = episode
    listener = socket.socket(fileno=fds["listener"])
    listener.setblocking(False)
    return episode, listener
