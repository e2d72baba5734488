"""The sandboxed BFCL host (``python -m awm_engine.bench.bfcl.host``, started by ``sandboxed.CheckerHost``).

It imports the wheel's checkers, decoders and backends once, loads an entry's category before its first
request, and forks one child per request: the child runs as pid 1 of its own pid namespace (whatever the
model's calls start dies with it), computes (``checker``), writes its answer to a file in the sandbox's
private temp dir and exits; the host then sends the answer on. A child that outlives its timeout is killed.
The host itself never decodes, executes or checks anything, so its module globals — where the backends
cache their instances — stay pristine, and every request starts from them.

Protocol: one JSON request per line on stdin (``id``, ``kind`` = score | execute | check | ping,
``entry_id``, ``mode``, ``raw`` / ``previous``, ``timeout``), one JSON answer per line on stdout (``id``,
``ok``, ``result`` or ``error``).
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import tempfile
import time
import traceback
from collections import deque
from typing import Any

from awm_engine.bench.bfcl import checker
from awm_engine.bench.bfcl.categories import category_of
from awm_engine.sandbox.pidns import run_as_pid1


def _work(request: dict[str, Any]) -> dict[str, Any]:
    kind = request["kind"]
    if kind == "score":
        return checker.score_single(request["entry_id"], request["raw"], request["mode"])
    if kind == "execute":
        return checker.execute_step(request["entry_id"], request.get("previous") or [], request["raw"],
                                    request["mode"])
    if kind == "check":
        return checker.check_multi_turn(request["entry_id"], request["raw"], request["mode"])
    raise ValueError(f"unknown request kind {kind!r}")


def _child(request: dict[str, Any], path: str, keep: int) -> None:
    os.setsid()
    # only the wake-up pipe (it closes when this child and its pid-1 worker are gone) stays open
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)

    def work() -> int:
        try:
            answer = {"ok": True, "result": _work(request)}
        except Exception as exc:  # noqa: BLE001 - reported to awm with its traceback
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(answer, fh, default=repr)
        os.replace(tmp, path)
        return 0

    code = 1
    try:
        code = run_as_pid1(work)
    finally:
        os._exit(code)


def main() -> int:
    checker.warm_up()
    out = sys.stdout
    spool = tempfile.mkdtemp(prefix="answers_")
    limit = max(1, int(os.environ.get("AWM_BFCL_CHILDREN") or (os.cpu_count() or 1) * 2))
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin, selectors.EVENT_READ)
    waiting: deque[dict[str, Any]] = deque()
    children: dict[int, tuple[str, float, str]] = {}  # pid -> (request id, deadline, answer file)
    wakers: dict[int, int] = {}  # read end of a child's wake-up pipe -> pid
    buffer = b""
    open_input = True

    def send(answer: dict[str, Any]) -> None:
        out.write(json.dumps(answer, default=repr) + "\n")
        out.flush()

    def start(request: dict[str, Any]) -> None:
        rid = str(request["id"])
        try:
            if request["kind"] != "ping":
                checker.DATA.load(category_of(request["entry_id"]).name)
        except Exception as exc:  # noqa: BLE001 - an unknown entry: say so, keep serving
            send({"id": rid, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
            return
        if request["kind"] == "ping":
            send({"id": rid, "ok": True, "result": {"pid": os.getpid()}})
            return
        path = os.path.join(spool, f"{len(children)}_{time.monotonic_ns()}.json")
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            _child(request, path, write_end)
        os.close(write_end)
        wakers[read_end] = pid
        selector.register(read_end, selectors.EVENT_READ)
        children[pid] = (rid, time.monotonic() + float(request.get("timeout") or 60), path)

    def finish(pid: int, rid: str, path: str, status: str | None) -> None:
        for fd in [fd for fd, owner in wakers.items() if owner == pid]:
            selector.unregister(fd)
            os.close(fd)
            del wakers[fd]
        answer: dict[str, Any] = {"id": rid, "ok": False, "error": status or "the checker ended without an answer"}
        if status is None and os.path.exists(path):
            with open(path) as fh:
                answer = {"id": rid, **json.load(fh)}
        for leftover in (path, path + ".tmp"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        send(answer)

    while open_input or children or waiting:
        while waiting and len(children) < limit:
            start(waiting.popleft())
        wait = None
        if children:
            wait = max(0.0, min(0.5, min(d for _, d, _ in children.values()) - time.monotonic()))
        for key, _ in selector.select(wait) if (open_input or children) else []:
            if key.fd in wakers:
                os.read(key.fd, 1)  # EOF: the child is gone (reaped below)
                continue
            chunk = os.read(sys.stdin.fileno(), 1 << 20)
            if not chunk:
                open_input = False
                selector.unregister(sys.stdin)
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    waiting.append(json.loads(line))
        now = time.monotonic()
        for pid, (rid, deadline, path) in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                del children[pid]
                code = os.waitstatus_to_exitcode(status)
                finish(pid, rid, path, None if code == 0 else f"the checker crashed (exit code {code})")
            elif now > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:  # not yet in its own group
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                del children[pid]
                finish(pid, rid, path, "timeout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
