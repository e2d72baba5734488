"""The verifier host (``python -m awm_engine.verify.host WORK``, started by ``verify.shared_host.VerifierHost``): one
sandbox for the verifications of one scenario, each verifier in a fresh process of its own.

It imports what a verifier's child needs, makes itself non-dumpable, and forks the fork runner
(``sandbox/forkrunner``, the one BFCL's multi-turn execution runs on) before it has read any request — so no child
inherits another task's verifier, answer or path. Then, for each request on stdin (``<id> <json>``: the job's
directory below WORK, which holds read-only copies of its two databases, the verifier's code, the final answer,
the limits and the timeout) it opens a ``Channel`` — a child of the runner for that request alone — and writes the
child's answer to stdout as ``<id> <json>``. At most ``PARALLEL`` verifiers run at once; the rest wait their turn
(their timeout starts when they start).

A child reads its request, then confines itself before any of the verifier's code runs (``child.serve_job``): a
Landlock domain that reads only Python, the system's libraries, the time-zone database and its own job directory,
writes no file, opens no TCP, and neither signals nor reaches abstract sockets outside itself; no new process or
thread (``RLIMIT_NPROC`` 0). The sandbox's system-call filter denies ``ptrace`` and ``process_vm_*``, and the host
and the runner are not dumpable: a verifier cannot read or write another verifier's files, memory, socket or
process, nor the host's. It answers on its own socket only, so the only verdict it can give is its own. A child
that overruns its timeout is killed with its process group (it has no other process).

This process decides nothing: it passes each child's answer on as it came (the parent checks it as before).
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import time

from awm_engine.sandbox import forkrunner
from awm_engine.verify import child

PARALLEL = int(os.environ.get("AWM_VERIFIER_PARALLEL") or 4)
MAX_LINE = child.MAX_REQUEST + 4096
RESULT_LIMIT = 16 * 1024 * 1024  # verification.RESULT_LIMIT: a longer result is the verifier's bad_return, as in a
#                                 sandbox of its own (whose result file is read up to that size)
MAX_ANSWER_LINE = 48 << 20  # an answer line the parent reads whole (its limit is higher): a longer one is an error
PR_SET_DUMPABLE = 4


def _answer(request: dict, timeout: float) -> dict:
    too_long = {"status": "host", "kind": "too_long", "error": f"the verifier's result is over {RESULT_LIMIT} bytes"}
    try:
        # an answer is read (and parsed, here) only up to what a result may be: four children's answers at once
        # must not fill the host's memory, where the cgroup's OOM killer would end a sibling verifier first
        with forkrunner.Channel(time.monotonic() + timeout, "the verifier", "the verifier's process",
                                limit=RESULT_LIMIT + 4096) as channel:
            answer = channel.ask(request)
    except forkrunner.ChannelError as exc:
        text = str(exc)
        if text.startswith("the answer is longer"):
            return too_long
        return {"status": "host", "kind": "timeout" if text.startswith("timeout") else "crashed", "error": text}
    if not answer["ok"]:
        return {"status": "host", "kind": "crashed", "error": str(answer.get("error"))[:2000]}
    if len(json.dumps(answer.get("result"), default=str)) > RESULT_LIMIT:  # the size of a result file
        return too_long
    return {"status": "answer", "result": answer.get("result")}


def main() -> int:
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    work = os.path.realpath(sys.argv[1])
    os.environ.pop("AWM_VERIFIER_PARALLEL", None)  # read above; nothing a verifier needs to see
    forkrunner.start(child.serve_job, lambda: forkrunner.readable_around(child.readable_roots(), [work]))
    out = sys.stdout.buffer
    lock = threading.Lock()
    slots = threading.Semaphore(PARALLEL)

    def serve(rid: str, request: dict, timeout: float) -> None:
        try:
            result = _answer(request, timeout)
        finally:
            slots.release()
        body = json.dumps(result, default=str).encode()
        if len(body) > MAX_ANSWER_LINE:
            body = json.dumps({"status": "host", "kind": "crashed",
                               "error": f"the verifier's answer is longer than {MAX_ANSWER_LINE} bytes"}).encode()
        line = rid.encode() + b" " + body + b"\n"
        with lock:
            out.write(line)
            out.flush()

    for raw in iter(lambda: sys.stdin.buffer.readline(MAX_LINE), b""):
        rid, _, body = raw.strip().partition(b" ")
        try:
            request = json.loads(body)
            timeout = float(request.pop("timeout"))
            job = os.path.realpath(request["dir"])
            if os.path.dirname(job) != work:
                raise ValueError("the job's directory is not one of this host's")
        except (ValueError, KeyError, TypeError) as exc:
            with lock:
                out.write(rid + b" " + json.dumps({"status": "host", "kind": "crashed",
                                                   "error": f"bad request: {exc}"}).encode() + b"\n")
                out.flush()
            continue
        slots.acquire()
        threading.Thread(target=serve, args=(rid.decode(), request, timeout), daemon=True).start()
    for _ in range(PARALLEL):  # the parent closed its end: let the running verifications answer, then stop
        slots.acquire()
    return 0


if __name__ == "__main__":
    sys.exit(main())
