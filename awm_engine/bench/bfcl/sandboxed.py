"""awm's handle on the sandboxed BFCL host: every decode, every execution of a model's call and every check.

``CheckerHost`` starts ``python -m awm_engine.bench.bfcl.host`` through ``sandbox.launcher.Sandbox`` (scrubbed
environment, own user/pid/mount/network namespaces, writes confined to the wheel's project root and a
private temp dir, resource limits) and multiplexes requests over its stdin/stdout; inside, a pool of
persistent workers (``workers``, default one per core) serves them. One ``CheckerHost`` is one scoring run
(``awm bench bfcl run`` or ``score`` start their own and close it at the end): its sandbox runs only that
run's answers and dies with it. A host that dies fails the requests in flight (``CheckerError``) and is
started again by the next request.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import os
import subprocess
import sys
import threading
from typing import Any

from awm_engine.bench.bfcl import wheel
from awm_engine.sandbox.launcher import (
    FORK_HOST_FILES,
    Sandbox,
    SandboxPolicy,
    default_memory_mb,
    kill_tree,
    private_dir,
    remove_dir,
)

DEFAULT_TIMEOUT = 120.0


class CheckerError(Exception):
    """The sandboxed checker could not answer (timeout, crash, a failure of its own). ``answered``: the checker
    failed on this request's answer (it breaks the official checker, its code never returns or crashes the worker)
    — not the sandbox around it (the host ended, the runner could not be reached)."""

    def __init__(self, message: str, traceback: str | None = None, answered: bool = False):
        super().__init__(message)
        self.traceback = traceback
        self.answered = answered

    def verdict(self, entry_id: str) -> dict[str, Any]:
        """The entry's verdict when its answer could not be checked: incorrect (awm's: BFCL's runner has none, it
        stops), so that no answer leaves the denominator by breaking the checker."""
        return {"id": entry_id, "valid": False, "error": [str(self)], "error_type": "awm:checker_error"}


def worker_count(asked: int | None = None) -> int:
    """The host's workers: ``asked``, else ``AWM_BFCL_WORKERS``, else one per core (at most 16)."""
    configured = os.environ.get("AWM_BFCL_WORKERS", "")
    return max(1, asked or (int(configured) if configured.isdigit() else min(16, os.cpu_count() or 1)))


class CheckerHost:
    def __init__(self, workers: int | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.workers = workers
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.sandbox: Sandbox | None = None
        self.lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.pending: dict[str, concurrent.futures.Future] = {}
        self.ids = itertools.count()

    def _start(self) -> None:
        wheel.require()
        if getattr(self, "root", None) is not None:  # a previous host's, which died
            remove_dir(self.root)
        if self.sandbox is not None:
            self.sandbox.cleanup()
        # a project root of the host's own: never the one this process's bfcl_eval uses (the sandbox could rig it)
        root = self.root = private_dir("awm_bfcl_")
        workers = worker_count(self.workers)
        env = {"AWM_BFCL_PROJECT_ROOT": str(root), "AWM_BFCL_WORKERS": str(workers)}
        # each worker holds the data of the categories it has seen and the backends of one entry (~300 MB at most)
        memory = max(4096, default_memory_mb("worker"), 1024 + 512 * workers)
        self.sandbox = Sandbox(SandboxPolicy(writable=[str(root)], memory_mb=memory, max_procs=512, env=env,
                                             open_files_hard=FORK_HOST_FILES), "bfcl")
        self.proc = self.sandbox.popen([sys.executable, "-m", "awm_engine.bench.bfcl.host"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            rid, _, body = line.partition(b" ")
            with self.lock:
                future = self.pending.pop(rid.decode(errors="replace"), None)
            if future is None or future.done():
                continue
            try:
                future.set_result(json.loads(body))
            except ValueError as exc:  # what the sandbox says is data: a garbled answer fails its request only
                future.set_exception(CheckerError(f"the sandboxed BFCL checker's answer is not JSON: {exc}"))
        stderr = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
        with self.lock:  # the host is gone: nobody will answer these
            lost, self.pending = self.pending, {}
            if self.proc is proc:
                self.proc = None
        for future in lost.values():
            if not future.done():
                future.set_exception(CheckerError("the sandboxed BFCL checker ended" +
                                                  (f": {stderr.strip()}" if stderr.strip() else "")))

    def submit(self, kind: str, timeout: float | None = None, **payload: Any) -> concurrent.futures.Future:
        return self.submit_many([(kind, payload)], timeout)[0]

    def submit_many(self, requests: list[tuple[str, dict[str, Any]]],
                    timeout: float | None = None) -> list[concurrent.futures.Future]:
        """Send ``(kind, payload)`` requests in one write; a future per request. (The pipe is written outside
        ``lock``, which the reader needs to hand out answers: a full pipe waits for the host, never for us.)"""
        futures: list[concurrent.futures.Future] = []
        lines = []
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            proc = self.proc
            for kind, payload in requests:
                future: concurrent.futures.Future = concurrent.futures.Future()
                rid = str(next(self.ids))
                self.pending[rid] = future
                futures.append(future)
                lines.append(f"{rid} {float(timeout or self.timeout)} {json.dumps({'kind': kind, **payload})}\n")
        try:
            with self.write_lock:
                for start in range(0, len(lines), 256):
                    proc.stdin.write("".join(lines[start:start + 256]).encode())
                proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            with self.lock:
                for rid in [r for r, f in self.pending.items() if f in futures]:
                    del self.pending[rid]
            for future in futures:
                if not future.done():
                    future.set_exception(CheckerError(f"the sandboxed BFCL checker is gone: {exc}"))
        return futures

    def map(self, requests: list[tuple[str, dict[str, Any]]], timeout: float | None = None) -> list[Any]:
        """Many requests at once (blocking): per request its result, or the ``CheckerError`` it ended with."""
        out: list[Any] = []
        for future in self.submit_many(requests, timeout):
            try:
                out.append(_result(future.result()))
            except CheckerError as exc:
                out.append(exc)
        return out

    def call(self, kind: str, timeout: float | None = None, **payload: Any) -> dict[str, Any]:
        """The result of one request (``CheckerError`` when the checker could not answer)."""
        return _result(self.submit(kind, timeout, **payload).result())

    async def acall(self, kind: str, timeout: float | None = None, **payload: Any) -> dict[str, Any]:
        return _result(await asyncio.wrap_future(self.submit(kind, timeout, **payload)))

    def close(self) -> None:
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is not None:
            try:
                proc.stdin.close()
                proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                kill_tree(proc)
        if self.sandbox is not None:
            self.sandbox.cleanup()
            self.sandbox = None
        if getattr(self, "root", None) is not None:
            remove_dir(self.root)
            self.root = None

    def __enter__(self) -> CheckerHost:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _result(answer: dict[str, Any]) -> dict[str, Any]:
    if not answer.get("ok"):
        raise CheckerError(answer.get("error") or "the checker failed", answer.get("traceback"),
                           answered=not answer.get("infrastructure"))
    return answer["result"]
