"""Inside the sandbox: ``python -m awm_engine.sandbox.init SPEC -- ARGV…`` (started by ``launcher.Sandbox``).

As pid 1 of the sandbox's pid namespace it forks the target and stays behind only to reap orphans and
forward signals, holding no file descriptor of the target's (so the target's death is seen at once);
when the target exits, pid 1 exits and the kernel kills everything left in the namespace. The target
process first gets its limits, no core dumps and its Landlock rules, then runs ARGV (a ``python -m
module`` target runs in this same interpreter, so a sandbox costs no second Python start-up).
"""
from __future__ import annotations

import json
import os
import resource
import runpy
import signal
import sys
import threading

from awm_engine.sandbox import landlock


def _limit(which: int, value: int | None) -> None:
    if value is None:
        return
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            resource.setrlimit(which, (min(value, hard), hard))


def confine(spec: dict) -> None:
    """Limits, no core dumps, then Landlock (irreversible, inherited by every child)."""
    mb = 1024 * 1024
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_AS, spec["memory_mb"] * mb if spec.get("memory_mb") else None)
    _limit(resource.RLIMIT_FSIZE, spec["file_size_mb"] * mb if spec.get("file_size_mb") else None)
    _limit(resource.RLIMIT_NOFILE, spec.get("open_files"))
    _limit(resource.RLIMIT_CPU, spec.get("cpu_seconds"))
    if spec.get("max_procs") and os.getuid() != 0:  # root is exempt from this limit: the launcher maps to nobody
        _limit(resource.RLIMIT_NPROC, spec["max_procs"])
    if spec.get("landlock"):
        landlock.restrict(spec["writable"], deny_tcp=bool(spec.get("deny_tcp")))


def run_target(argv: list[str]) -> None:
    if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m":
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        sys.exit(0)
    os.execvp(argv[0], argv)


GRACE = 5.0  # after its starter is gone, the target may finish what it holds (close episodes) this long


def _watch_lifeline(fd: int, child: int) -> None:
    """The process that started the sandbox is gone (its end of the pipe closed): ask the target to stop
    (SIGINT), give it a moment to put its files in place, then end everything inside."""
    import time

    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    try:
        os.kill(child, signal.SIGINT)
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline:
            time.sleep(0.05)
            os.kill(child, 0)  # ProcessLookupError once it is gone (reaped by the main loop)
    except ProcessLookupError:
        pass
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os._exit(137)


def reap_until(child: int) -> int:
    """Pid 1's loop: forward termination signals to the target, reap every orphan, return the target's code."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == child:
            return os.waitstatus_to_exitcode(status)


def main() -> None:
    spec = json.loads(sys.argv[1])
    argv = sys.argv[sys.argv.index("--") + 1:]
    if spec.get("cgroup"):  # every process of the sandbox counts against its pids.max
        with open(os.path.join(spec["cgroup"], "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    lifeline = spec.get("lifeline")
    if spec.get("reaper") and os.getpid() == 1:
        child = os.fork()
        if child:
            # hold none of the target's descriptors (its socket, its files): only the lifeline stays
            if lifeline is None:
                os.closerange(3, 1 << 16)
            else:
                os.closerange(3, lifeline)
                os.closerange(lifeline + 1, 1 << 16)
            if lifeline is not None:
                threading.Thread(target=_watch_lifeline, args=(lifeline, child), daemon=True).start()
            code = reap_until(child)
            os._exit(code if code >= 0 else 128 - code)
        os.setpgid(0, 0)  # signals to the sandbox's group reach the target once, through pid 1
    if lifeline is not None:
        os.close(lifeline)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    confine(spec)
    run_target(argv)


if __name__ == "__main__":
    main()
