"""A warm process that forks one child per verification (``python -m awm_engine.verify.host``).

Starting a Python process for every verifier costs ~40 ms of CPU; forking a process that already
imported what verifiers use costs a few. The host is started with a scrubbed environment; each
child starts its own session, sets its memory limit, runs the verifier (``verifier_child.run``) with
stdout/stderr sent to /dev/null, and is killed with its process group when it outlives its timeout.
Protocol: one JSON request per line on stdin, one JSON answer per line on stdout.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import time

from awm_engine.sandbox.pidns import run_as_pid1
from awm_engine.verify import child as verifier_child  # noqa: F401 - imported before forking, so children start warm


def _child(request_path: str, out_path: str) -> None:
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    code = 1
    try:  # the verifier runs as pid 1 of its own pid namespace: nothing it starts outlives it
        code = run_as_pid1(lambda: verifier_child.run(request_path, out_path))
    finally:
        os._exit(code)


def main() -> int:
    out = sys.stdout
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin, selectors.EVENT_READ)
    children: dict[int, tuple[str, float]] = {}
    buffer = b""
    open_input = True

    def answer(rid: str, status: str, code: int | None) -> None:
        out.write(json.dumps({"id": rid, "status": status, "code": code}) + "\n")
        out.flush()

    while open_input or children:
        wait = None
        if children:
            wait = max(0.0, min(0.02, min(d for _, d in children.values()) - time.monotonic()))
        for _key, _ in selector.select(wait) if open_input else []:
            chunk = os.read(sys.stdin.fileno(), 65536)
            if not chunk:
                open_input = False
                selector.unregister(sys.stdin)
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(req["request"], req["result"])
                children[pid] = (req["id"], time.monotonic() + float(req["timeout"]))
        if not open_input and children:
            time.sleep(0.005)
        now = time.monotonic()
        for pid, (rid, deadline) in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                del children[pid]
                answer(rid, "exited", os.waitstatus_to_exitcode(status))
            elif now > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:  # not yet in its own group
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                del children[pid]
                answer(rid, "timeout", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
