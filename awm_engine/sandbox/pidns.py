"""A fresh pid namespace for one piece of work inside an existing sandbox (e.g. each verifier forked by the
warm verifier host): the work runs as pid 1 there, so whatever it starts — ``setsid`` children included —
dies when it ends, while the host lives on."""
from __future__ import annotations

import ctypes
import os

CLONE_NEWPID = 0x20000000


def unshare_pid() -> bool:
    """Put this process's future children in a new pid namespace; False when not permitted here."""
    try:
        return ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWPID) == 0
    except (OSError, AttributeError):
        return False


def run_as_pid1(work) -> int:
    """Run ``work()`` (returns an exit code) in a child that is pid 1 of a new pid namespace, wait for it and
    return its code; without the namespace, run it in a child of its own session and kill that group after."""
    isolated = unshare_pid()
    pid = os.fork()
    if pid == 0:
        if not isolated:
            os.setsid()
        code = 1
        try:
            code = int(work() or 0)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if not isolated:
        try:
            os.killpg(pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
    return os.waitstatus_to_exitcode(status)
