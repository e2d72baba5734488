"""Inside the sandbox, just before the untrusted code: ``python -m awm_engine.sandbox.init SPEC -- ARGV…``.

bubblewrap has already built the mount, pid, network, IPC and UTS namespaces and the filesystem view. This, still
trusted code, then: sets the per-process limits and no core dumps; when awm runs as root, drops to the sandbox's
unprivileged uid (no groups) and enters a user namespace of its own where that uid appears as ``inside_uid``; drops
every capability (bounding set included); sets no-new-privileges; applies Landlock (writes only below the sandbox's
own directories; abstract unix sockets and signals scoped to the sandbox where the kernel has Landlock ABI 6);
loads the system-call filter (``seccomp.py``); and runs ARGV (a ``python -m module`` target runs in this same
interpreter, so a sandbox costs no second Python start-up).
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import runpy
import signal
import sys

from awm_engine.sandbox import landlock, seccomp

CLONE_NEWUSER = 0x10000000
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
CAP_LAST = 63


class SandboxSetupError(RuntimeError):
    pass


def _limit(which: int, value: int | None) -> None:
    if value is None:
        return
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            resource.setrlimit(which, (min(value, hard), hard))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def drop_privileges(uid: int, gid: int, inside: int) -> bool:
    """Root (holding only CAP_SETUID/CAP_SETGID) becomes ``uid``:``gid`` with no groups and no capabilities, in a
    user namespace of its own that maps ``inside`` to it. False when the host refused that namespace (the code then
    runs in the host's user namespace: ``confine`` sets no process limit, and the probe records it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(CAP_LAST + 1):  # first the bounding set (CAP_SETPCAP), while still root
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # every capability is gone now (all uids non-zero, no keep-caps)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # the uid change made /proc/self root's; it is this process's again
    # a user namespace of its own, never assumed: without it the kernel counts the sandbox uid's processes over every
    # sandbox together (an RLIMIT_NPROC would be one limit for all of them: one sandbox's threads would stop every
    # other's); the host may refuse it (user.max_user_namespaces=0, an LSM's policy)
    own = libc.unshare(CLONE_NEWUSER) == 0
    if own:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{inside} {uid} 1\n")
        _write("/proc/self/gid_map", f"{inside} {gid} 1\n")
        for cap in range(CAP_LAST + 1):  # the new namespace granted a full set: give it all back
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _drop_capabilities(libc)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SandboxSetupError("could not drop root")
    return own


def _drop_capabilities(libc) -> None:
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)(0, 0, 0, 0, 0, 0)
    if libc.capset(header, data) != 0:
        raise SandboxSetupError(f"capset failed: errno {ctypes.get_errno()}")


def _open_files(soft: int | None, hard: int | None) -> None:
    """RLIMIT_NOFILE: ``soft`` for both limits, or with ``hard`` (a fork runner's host, ``forkrunner.start``) that
    much room above it — as much of it as this process may have (unprivileged: its current hard limit)."""
    if not soft or not hard or hard <= soft:
        _limit(resource.RLIMIT_NOFILE, soft)
        return
    current = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    for ceiling in (hard, current if current != resource.RLIM_INFINITY else hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, max(soft, min(hard, ceiling))))
            return
        except (ValueError, OSError):
            continue
    _limit(resource.RLIMIT_NOFILE, soft)


def confine(spec: dict) -> None:
    """Limits, no core dumps, the sandbox uid, no capabilities, Landlock, the system-call filter (irreversible,
    inherited by every child)."""
    mb = 1024 * 1024
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_AS, spec["memory_mb"] * mb if spec.get("memory_mb") else None)
    _limit(resource.RLIMIT_FSIZE, spec["file_size_mb"] * mb if spec.get("file_size_mb") else None)
    _open_files(spec.get("open_files"), spec.get("open_files_hard"))
    _limit(resource.RLIMIT_CPU, spec.get("cpu_seconds"))
    own_user_ns = True  # (without ``drop_to``, bubblewrap made the sandbox's user namespace)
    if spec.get("drop_to"):
        uid, gid = spec["drop_to"]
        own_user_ns = drop_privileges(int(uid), int(gid), int(spec.get("inside_uid") or 1000))
    if spec.get("max_procs") and os.getuid() != 0 and own_user_ns:  # counted per user namespace: per sandbox
        _limit(resource.RLIMIT_NPROC, spec["max_procs"])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxSetupError("prctl(PR_SET_NO_NEW_PRIVS) failed")
    if spec.get("landlock"):
        landlock.restrict(spec["writable"], deny_tcp=bool(spec.get("deny_tcp")), scope=bool(spec.get("scope")),
                          connect_ports=spec.get("connect_ports"), bind_ports=spec.get("bind_ports"))
    if spec.get("seccomp"):
        seccomp.load(epoll=bool(spec.get("epoll", True)))
        if not spec.get("epoll", True):  # no new epoll instance (seccomp.EPOLL): event loops poll. A Python started
            import selectors  # from here finds epoll refused and picks poll itself; this one chose before the filter

            selectors.DefaultSelector = selectors.PollSelector


def run_target(argv: list[str]) -> None:
    if len(argv) >= 3 and os.path.abspath(argv[0]) == os.path.abspath(sys.executable) and argv[1] == "-m":
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        sys.exit(0)
    os.execvp(argv[0], argv)


def main() -> None:
    spec = json.loads(sys.argv[1])
    argv = sys.argv[sys.argv.index("--") + 1:]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    confine(spec)
    run_target(argv)


if __name__ == "__main__":
    main()
