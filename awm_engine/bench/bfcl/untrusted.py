"""Where a model's code runs, when its answer is code (``host.py``): a process of its own that can compute
nothing but data, and cannot see the answer key.

``start()`` forks the **runner** from the sandboxed host right after the wheel's modules are imported — before
any entry's data, prompt or possible answer is loaded, and before any request is served — so neither the runner
nor anything it forks holds an answer in memory. A worker that needs a model's code run asks the runner, over
one control socket shared by the workers, for a process of its own: it sends one end of a fresh socket pair; the
runner forks a **child** for it alone, which keeps only that socket (stdio on ``/dev/null``), puts itself in a
process group of its own, may start no process or thread (``RLIMIT_NPROC`` 0), and a Landlock domain that
writes no file and reads only Python's own library and the
installed packages — not the wheel's ``data`` folder, where the answer key is (``_readable``) —, opens no TCP, and signals and reaches abstract sockets only in its own domain; then it
serves the worker's requests with bfcl-eval's real ``eval``:

- ``eval``: an expression of the model's text the prompt-mode decoder evaluates (``resolve_ast_by_type``);
- ``execute``: ``execute_multi_turn_func_call`` on the model's calls (its backend instances live in the child
  for the whole request, turn after turn, as in bfcl-eval's runner).

Every answer is one JSON line of data (``state_codec``); the worker rebuilds it and the **verdict is computed
in the worker** by the official checker — on the ground truth the worker executes itself. Whatever the
model's code does (monkeypatching the checker, forging answers, reading files or memory), it can change only
what its own calls return and leave behind, as a model making calls can. When the worker is done it closes its
end: the runner kills the child's process group (and the child) and reaps it.
"""
from __future__ import annotations

import builtins
import json
import os
import resource
import select
import signal
import socket
import sys
import sysconfig
import time
from typing import Any

from awm_engine.bench.bfcl import state_codec
from awm_engine.sandbox import landlock

MAX_ANSWER = 64 << 20  # the longest answer a child may give
UTILS = "bfcl_eval.model_handler.utils"  # the decoder's module (its eval)
EXECUTOR = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"

CONTROL: list[socket.socket] = []  # the host's (and so each worker's) end of the runner's control socket


class RunnerError(BaseException):
    """The runner or the child gave no usable answer (gone, too slow, too long, not data): the request's error
    (a ``BaseException``: the wheel's ``except Exception`` must not turn it into a verdict)."""


def start() -> int:
    """Fork the runner (in the host, before anything but the wheel's modules is loaded); returns its pid."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        _runner(theirs)
    theirs.close()
    CONTROL[:] = [ours]
    return pid


def _kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def _readable() -> list[str]:
    """What a child may read (modules the wheel's code imports lazily, such as ``_strptime``): Python's library
    and the installed packages, except bfcl-eval's ``data`` folder (its questions and possible answers). A
    folder that holds ``data`` somewhere below is granted entry by entry, around it."""
    hidden = os.path.realpath(os.path.join(os.path.dirname(sys.modules["bfcl_eval"].__file__), "data"))
    readable: set[str] = set()

    def grant(path: str) -> None:
        real = os.path.realpath(path)
        if real == hidden:
            return
        if not (hidden + os.sep).startswith(real.rstrip(os.sep) + os.sep):
            readable.add(path)
            return
        try:
            names = os.listdir(path)
        except OSError:
            return
        for name in names:
            grant(os.path.join(path, name))

    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if key in paths:
            grant(paths[key])
    return sorted(readable)


def _runner(control: socket.socket) -> None:
    """The runner: forks a child for every socket a worker sends, kills it when the worker closes its end."""
    children: dict[int, tuple[int, int, int]] = {}  # socket fd or pidfd -> (pid, socket fd, pidfd)
    try:
        readable = _readable()
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
                        return  # every worker and the host are gone
                    for extra in fds[1:]:
                        os.close(extra)
                    if fds:
                        try:
                            pid = os.fork()
                        except OSError:  # e.g. the sandbox's process limit: this request fails, the runner serves on
                            os.close(fds[0])
                            continue
                        if pid == 0:
                            _child(fds[0], readable)
                        try:
                            os.setpgid(pid, pid)  # also done by the child: whichever runs first
                        except OSError:
                            pass
                        pidfd = os.pidfd_open(pid)
                        children[fds[0]] = children[pidfd] = (pid, fds[0], pidfd)
                        poller.register(fds[0], 0)  # only its hang-up: the worker is done with it
                        poller.register(pidfd, select.POLLIN)
                    continue
                pid, sock, pidfd = children[fd]
                if fd == sock:  # the worker closed its end
                    poller.unregister(sock)
                    _kill(pid)
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
            _kill(pid)
        os._exit(0)


def _child(sock: int, readable: list[str]) -> None:
    """One request's process: only its socket (as fd 3), no file writable, only ``readable`` readable, the real
    eval."""
    code = 1
    try:
        os.setpgid(0, 0)
        if sock != 3:
            os.dup2(sock, 3)
        os.closerange(0, 3)
        os.closerange(4, 1 << 16)
        for _ in range(3):
            os.open(os.devnull, os.O_RDWR)
        try:
            landlock.restrict([], deny_tcp=True, scope=True, readable=readable)
        except OSError:
            pass  # no Landlock on this kernel (the sandbox reports it)
        # no new process or thread (the wheel's code starts none): nothing of the model's code can outlive the
        # request (a grandchild in a session of its own would escape the kill) or fill the sandbox's process limit
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        with socket.socket(fileno=3) as channel, channel.makefile("rwb") as stream:
            for line in stream:
                stream.write(json.dumps(_serve(line)).encode() + b"\n")
                stream.flush()
        code = 0
    finally:
        os._exit(code)


def _serve(line: bytes) -> dict[str, Any]:
    try:
        request = json.loads(line)
        if request["op"] == "eval":
            value = eval(request["expr"], vars(sys.modules[UTILS]))  # noqa: S307 - what bfcl-eval's decoder does
            return {"ok": True, "value": state_codec.encode(value)}
        if request["op"] == "execute":
            arguments = state_codec.decode(request["args"])
            results, instances = sys.modules[EXECUTOR].execute_multi_turn_func_call(**arguments)
            return {"ok": True, "results": state_codec.encode(results), "instances": state_codec.encode(instances)}
        raise ValueError(f"unknown op {request['op']!r}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit from the model's code too: passed on as data
        return {"ok": False, "type": type(exc).__name__, "message": str(exc)}


def _raised(name: Any, message: Any) -> Exception:
    """The child's exception, rebuilt as data: the builtin exception type of that name (else ``Exception``),
    with the same text."""
    base = getattr(builtins, name, None) if isinstance(name, str) else None
    if not (isinstance(base, type) and issubclass(base, Exception)):
        base = Exception
    text = str(message)
    kind = type(name if isinstance(name, str) and name.isidentifier() else "Exception", (base,),
                {"__str__": lambda self: text, "__module__": "builtins"})
    exc = kind.__new__(kind)
    exc.args = (text,)
    return exc


class Runner:
    """A worker's handle on one child (one request): ``eval`` and ``execute`` as bfcl-eval calls them."""

    def __init__(self, deadline: float) -> None:
        if not CONTROL:
            raise RunnerError("no runner was started")
        self.deadline = deadline
        self.buffer = b""
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(CONTROL[0], [b"run"], [theirs.fileno()])
        except OSError as exc:
            ours.close()
            raise RunnerError(f"the runner is gone ({exc})") from None
        finally:
            theirs.close()
        self.sock = ours

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RunnerError("timeout (the model's code)")
        return left

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            self.sock.settimeout(self._left())
            self.sock.sendall(json.dumps(message).encode() + b"\n")
            while b"\n" not in self.buffer:
                self.sock.settimeout(self._left())
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise RunnerError("the model's code ended its process")
                self.buffer += chunk
                if len(self.buffer) > MAX_ANSWER:
                    raise RunnerError(f"the answer is longer than {MAX_ANSWER} bytes")
        except (TimeoutError, socket.timeout):
            raise RunnerError("timeout (the model's code)") from None
        except OSError as exc:
            raise RunnerError(f"the model's process is gone ({exc})") from None
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            raise RunnerError("the answer is not one JSON object")
        if not answer["ok"]:
            raise _raised(answer.get("type"), answer.get("message"))
        return answer

    def eval(self, *args: Any, **kwargs: Any) -> Any:
        """The decoder's ``eval(text)``."""
        if len(args) != 1 or kwargs or not isinstance(args[0], str):
            raise RunnerError("eval is called here with one string only")
        try:
            return state_codec.decode(self._ask({"op": "eval", "expr": args[0]}).get("value"))
        except state_codec.CodecError as exc:
            raise RunnerError(f"the value is not data: {exc}") from None

    def execute(self, arguments: dict[str, Any]) -> tuple[list, dict]:
        """``execute_multi_turn_func_call(**arguments)`` on the model's calls: (results, backend instances)."""
        answer = self._ask({"op": "execute", "args": state_codec.encode(arguments)})
        try:
            results, instances = state_codec.decode(answer.get("results")), state_codec.decode(answer.get("instances"))
        except state_codec.CodecError as exc:
            raise RunnerError(f"the result is not data: {exc}") from None
        if not isinstance(results, list) or not isinstance(instances, dict):
            raise RunnerError("the result is not (results, instances)")
        return results, instances
