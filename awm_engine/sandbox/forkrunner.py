"""One fresh process per piece of untrusted code, forked inside a sandboxed host: what BFCL's multi-turn execution
(``bench/bfcl/untrusted.py``) and the verifiers (``verify/host.py``) both run on.

A sandboxed host (trusted code inside its sandbox) calls ``start(child_main, prepare)`` once, early — before it
holds anything a piece of untrusted code must not see (an answer key, another task's request). That forks the
**runner**, which calls ``prepare()`` once and then waits on a control socket. For each request the host opens a
``Channel``: a fresh socket pair, one end sent to the runner, which forks a **child** for it alone. The child keeps
only that socket (as fd 3; stdio on ``/dev/null``), puts itself in a process group of its own and runs
``child_main(channel, prepared)``, which confines itself (``confine``) before any untrusted code runs and answers
on its socket, one JSON line per request. When the host closes its end, the runner kills the child's process group
and reaps it; a child never serves two requests' owners. So whatever a piece of code does, it can answer only on
its own socket: no other request's answer (no other verdict) is within its reach.

``Channel.ask`` bounds each answer by a deadline and by ``MAX_ANSWER`` bytes (or the channel's lower ``limit``) and accepts only one JSON object with
a boolean ``ok`` (else ``ChannelError``, a ``BaseException`` so that no ``except Exception`` of checker code turns it
into a verdict).
"""
from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import time
from typing import Any, Callable

MAX_ANSWER = 64 << 20  # the longest answer a child may give

CONTROL: list[socket.socket] = []  # the host's end of the runner's control socket


class ChannelError(BaseException):
    """The runner or the child gave no usable answer (gone, too slow, too long, not data)."""


def start(child_main: Callable[[socket.socket, Any], None], prepare: Callable[[], Any] | None = None) -> int:
    """Fork the runner (in the host, before it holds anything the children must not see); returns its pid.

    Each ``Channel`` passes a descriptor (``SCM_RIGHTS``), which the kernel refuses (``ETOOMANYREFS``) once the
    sender's uid has more descriptors in flight than the sender's soft ``RLIMIT_NOFILE`` — a count every sandbox
    shares, since they all run as one host uid: code in any other sandbox that sends descriptors into a socket it
    never reads (about 1,300, its own limit being 1024) stopped every host's runner, every verifier and BFCL
    execution on it. So the host raises its own soft limit to its hard one (``SandboxPolicy.open_files_hard``),
    far above what any sandbox's code may put in flight, and the runner, with every child it forks, keeps the
    limit the sandbox's code has."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, soft))  # the runner and its children: untrusted's
        except (ValueError, OSError):
            pass
        _runner(theirs, child_main, prepare)
    theirs.close()
    CONTROL[:] = [ours]
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard) if hard != resource.RLIM_INFINITY else (soft, hard))
    except (ValueError, OSError):
        pass
    return pid



def kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def readable_around(roots: list[str], hidden: list[str]) -> list[str]:
    """``roots`` as a list of paths a Landlock domain may read, without anything at or below ``hidden``: a root
    that holds a hidden path somewhere below is granted entry by entry, around it."""
    secret = [os.path.realpath(h) for h in hidden]
    readable: set[str] = set()

    def grant(path: str) -> None:
        real = os.path.realpath(path)
        if any(real == h or real.startswith(h.rstrip(os.sep) + os.sep) for h in secret):
            return
        if not any((h + os.sep).startswith(real.rstrip(os.sep) + os.sep) for h in secret):
            readable.add(path)
            return
        try:
            names = os.listdir(path)
        except OSError:
            return
        for name in names:
            grant(os.path.join(path, name))

    for root in roots:
        grant(root)
    return sorted(readable)


def _runner(control: socket.socket, child_main: Callable, prepare: Callable | None) -> None:
    """The runner: forks a child for every socket the host sends, kills it when the host closes its end."""
    children: dict[int, tuple[int, int, int]] = {}  # socket fd or pidfd -> (pid, socket fd, pidfd)
    try:
        prepared = prepare() if prepare is not None else None
        os.setsid()
        keep = control.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        poller = select.poll()
        poller.register(keep, select.POLLIN)
        while True:
            for fd, _ in poller.poll():
                if fd == keep:
                    try:
                        message, fds, _, _ = socket.recv_fds(control, 16, 4)
                    except OSError:
                        continue
                    if not message and not fds:
                        return  # the host is gone
                    for extra in fds[1:]:
                        os.close(extra)
                    if fds:
                        try:
                            pid = os.fork()
                        except OSError:  # e.g. the sandbox's process limit: this request fails, the runner serves on
                            os.close(fds[0])
                            continue
                        if pid == 0:
                            _child(fds[0], child_main, prepared)
                        try:
                            os.setpgid(pid, pid)  # also done by the child: whichever runs first
                        except OSError:
                            pass
                        pidfd = os.pidfd_open(pid)
                        children[fds[0]] = children[pidfd] = (pid, fds[0], pidfd)
                        poller.register(fds[0], 0)  # only its hang-up: the host is done with it
                        poller.register(pidfd, select.POLLIN)
                    continue
                pid, sock, pidfd = children[fd]
                if fd == sock:  # the host closed its end
                    poller.unregister(sock)
                    kill(pid)
                    continue
                os.waitpid(pid, 0)  # the child has exited
                for gone in (sock, pidfd):
                    children.pop(gone, None)
                    try:
                        poller.unregister(gone)
                    except KeyError:
                        pass
                    os.close(gone)
    finally:
        for pid, _, _ in set(children.values()):
            kill(pid)
        os._exit(0)


def _child(sock: int, child_main: Callable, prepared: Any) -> None:
    """One request's process: only its socket (as fd 3) and stdio on /dev/null, then ``child_main``."""
    code = 1
    try:
        os.setpgid(0, 0)
        if sock != 3:
            os.dup2(sock, 3)
        os.closerange(0, 3)
        os.closerange(4, 1 << 16)
        for _ in range(3):
            os.open(os.devnull, os.O_RDWR)
        with socket.socket(fileno=3) as channel:
            child_main(channel, prepared)
        code = 0
    finally:
        os._exit(code)


class Channel:
    """The host's handle on one child: ``ask`` sends one JSON request line and returns the answer line's object.
    ``who`` names the code in error texts (``timeout (<who>)``), ``process`` its process."""

    def __init__(self, deadline: float, who: str = "the untrusted code", process: str | None = None,
                 limit: int = MAX_ANSWER) -> None:
        if not CONTROL:
            raise ChannelError("no runner was started")
        self.deadline, self.who, self.limit = deadline, who, limit
        self.process = process or f"the process of {who}"
        self.buffer = b""
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(CONTROL[0], [b"run"], [theirs.fileno()])
        except OSError as exc:
            ours.close()
            raise ChannelError(f"the runner is gone ({exc})") from None
        finally:
            theirs.close()
        self.sock = ours

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ChannelError(f"timeout ({self.who})")
        return left

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """The answer object (``ok`` a boolean); ``ChannelError`` for anything else."""
        try:
            self.sock.settimeout(self._left())
            self.sock.sendall(json.dumps(message).encode() + b"\n")
            while b"\n" not in self.buffer:
                self.sock.settimeout(self._left())
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise ChannelError(f"{self.who} ended its process")
                self.buffer += chunk
                if len(self.buffer) > self.limit:
                    raise ChannelError(f"the answer is longer than {self.limit} bytes")
        except (TimeoutError, socket.timeout):
            raise ChannelError(f"timeout ({self.who})") from None
        except OSError as exc:
            raise ChannelError(f"{self.process} is gone ({exc})") from None
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            raise ChannelError("the answer is not one JSON object")
        return answer
