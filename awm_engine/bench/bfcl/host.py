"""The sandboxed BFCL host (``python -m awm_engine.bench.bfcl.host``, started by ``sandboxed.CheckerHost``).

It imports the wheel's checkers, decoders and backends once and forks a small pool of persistent workers
(``AWM_BFCL_WORKERS``: one per core, at most 16, unless set) that serve the requests, one at a time each, with a
few more queued at each (so a worker never waits for the host between two requests). A worker computes
(``checker``) and, after every request, removes the backend instances the wheel cached in its module globals
(``checker.reset``), so each request starts from backends built from the entry's initial configuration — as
the official harness starts each entry, and as a fresh process would. A worker that outlives a request's
timeout is killed with its process group, one that dies fails its request (those queued behind it go to the
other workers); either is replaced by a new fork of the host, which itself never decodes, executes or checks anything. The pool lives as long as the host: one
scoring run (one ``CheckerHost``), in one sandbox, ended with it; nothing survives into another run.

Protocol (one line per message): a request is ``<id> <timeout> <json>`` (the JSON has ``kind`` = score |
execute | check | states | ping, ``entry_id``, ``mode``, ``raw`` / ``previous``, ``display``), an answer is
``<id> <json>`` (``ok``, ``result`` or ``error``). The host reads only the two header fields and forwards the
JSON as it is, both ways.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import time
import traceback
from collections import deque
from typing import Any

from awm_engine.bench.bfcl import checker

PIPELINE = 4  # requests queued at a worker at once


def _work(request: dict[str, Any]) -> dict[str, Any]:
    kind = request["kind"]
    if kind == "score":
        return checker.score_single(request["entry_id"], request["raw"], request["mode"],
                                    request.get("display", True))
    if kind == "execute":
        return checker.execute_step(request["entry_id"], request.get("previous") or [], request["raw"],
                                    request["mode"])
    if kind == "check":
        return checker.check_multi_turn(request["entry_id"], request["raw"], request["mode"])
    if kind == "states":
        return checker.turn_states(request["entry_id"], request["raw"], request["mode"])
    if kind == "ping":
        return {"pid": os.getpid()}
    raise ValueError(f"unknown request kind {kind!r}")


def _answer(payload: bytes) -> bytes:
    try:
        answer = {"ok": True, "result": _work(json.loads(payload))}
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a model's call too: reported, the worker goes on
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    finally:
        checker.reset()
    try:
        return json.dumps(answer, default=repr).encode()
    except (TypeError, ValueError) as exc:  # e.g. a cycle
        return json.dumps({"ok": False, "error": f"the answer could not be written: {exc}"}).encode()


def _serve(requests: int, answers: int) -> None:
    """A worker: its own session (killed as a group), only its two pipes open, stdio on /dev/null."""
    code = 1
    try:
        os.setsid()
        keep = sorted((requests, answers))
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, 1 << 16)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        with os.fdopen(requests, "rb") as inbox, os.fdopen(answers, "wb") as outbox:
            for line in inbox:
                outbox.write(_answer(line) + b"\n")
                outbox.flush()
        code = 0
    finally:
        os._exit(code)


class _Worker:
    """A forked worker and what it has been given: ``jobs`` in order (it answers in that order), the first
    one running since ``deadline`` minus its timeout."""

    def __init__(self) -> None:
        request_read, self.inbox = os.pipe()
        self.outbox, answer_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.inbox)
            os.close(self.outbox)
            _serve(request_read, answer_write)
        os.close(request_read)
        os.close(answer_write)
        os.set_blocking(self.inbox, False)  # a full pipe must never stop the host (the worker may be writing)
        self.unsent = bytearray()
        self.buffer = b""
        self.jobs: deque[tuple[bytes, float, bytes]] = deque()  # (request id, timeout, request)
        self.deadline = 0.0

    def give(self, job: tuple[bytes, float, bytes]) -> None:
        if not self.jobs:
            self.deadline = time.monotonic() + job[1]
        self.jobs.append(job)
        self.unsent += job[2] + b"\n"
        self.flush()

    def flush(self) -> None:
        """Write what the pipe takes now (raises ``OSError`` when the worker is gone)."""
        try:
            while self.unsent:
                del self.unsent[:os.write(self.inbox, self.unsent)]
        except BlockingIOError:
            pass

    def answered(self) -> bytes:
        """The first job is answered: its id (the next one starts now)."""
        rid = self.jobs.popleft()[0]
        if self.jobs:
            self.deadline = time.monotonic() + self.jobs[0][1]
        return rid

    def stop(self, kill: bool) -> str:
        """Close its pipes and reap it (killing its group first with ``kill``); returns how it ended."""
        if kill:
            for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
                try:
                    target()
                    break
                except (ProcessLookupError, PermissionError):
                    continue
        for fd in (self.inbox, self.outbox):
            try:
                os.close(fd)
            except OSError:
                pass
        _, status = os.waitpid(self.pid, 0)
        return f"exit code {os.waitstatus_to_exitcode(status)}"


def main() -> int:
    checker.warm_up()
    out = sys.stdout.buffer
    count = max(1, int(os.environ.get("AWM_BFCL_WORKERS") or 1))  # CheckerHost sets it (sandboxed.worker_count)
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin, selectors.EVENT_READ)
    waiting: deque[tuple[bytes, float, bytes]] = deque()
    workers: dict[int, _Worker] = {}  # answer pipe -> worker
    buffer = b""
    open_input = True

    def send(rid: bytes, body: bytes) -> None:
        out.write(rid + b" " + body + b"\n")

    def fail(rid: bytes, message: str) -> None:
        send(rid, json.dumps({"ok": False, "error": message}).encode())

    def spawn() -> None:
        worker = _Worker()
        workers[worker.outbox] = worker
        selector.register(worker.outbox, selectors.EVENT_READ)

    def replace(worker: _Worker, kill: bool, why: str | None) -> None:
        """The worker is gone (or stuck): its running job fails, the ones it had not started go first to the
        others, and a new fork takes its place."""
        selector.unregister(worker.outbox)
        del workers[worker.outbox]
        ended = worker.stop(kill)
        if worker.jobs:
            fail(worker.jobs.popleft()[0], why or f"the checker crashed ({ended})")
            waiting.extendleft(reversed(worker.jobs))
        spawn()

    for _ in range(count):
        spawn()
    while open_input or waiting or any(w.jobs for w in workers.values()):
        # a few requests queued at each worker, so that it never waits for the host between two of them
        for worker in sorted(workers.values(), key=lambda w: len(w.jobs)):
            while waiting and len(worker.jobs) < PIPELINE:
                try:
                    worker.give(waiting.popleft())
                except OSError:
                    replace(worker, True, None)
                    break
        for worker in list(workers.values()):
            if worker.unsent:
                try:
                    worker.flush()
                except OSError:
                    replace(worker, True, None)
        out.flush()
        busy = [w.deadline for w in workers.values() if w.jobs]
        wait = max(0.0, min(0.05 if any(w.unsent for w in workers.values()) else 0.5,
                            min(busy) - time.monotonic())) if busy else None
        for key, _ in selector.select(wait):
            if key.fileobj is sys.stdin:
                chunk = os.read(sys.stdin.fileno(), 1 << 20)
                if not chunk:
                    open_input = False
                    selector.unregister(sys.stdin)
                    continue
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        rid, timeout, payload = line.split(b" ", 2)
                        waiting.append((rid, float(timeout), payload))
                continue
            worker = workers.get(key.fd)
            if worker is None:
                continue
            chunk = os.read(key.fd, 1 << 20)
            if not chunk:  # the worker is gone
                replace(worker, False, None)
                continue
            *answers, worker.buffer = (worker.buffer + chunk).split(b"\n")
            for body in answers:
                if worker.jobs:  # anything said with nothing asked is not an answer
                    send(worker.answered(), body)
        now = time.monotonic()
        for worker in list(workers.values()):
            if worker.jobs and now > worker.deadline:
                replace(worker, True, "timeout")
    out.flush()
    for worker in list(workers.values()):
        worker.stop(True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
