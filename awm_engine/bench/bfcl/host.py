"""The sandboxed BFCL host (``python -m awm_engine.bench.bfcl.host``, started by ``sandboxed.CheckerHost``).

It imports the wheel's checkers, decoders and backends once and forks a small pool of persistent workers
(``AWM_BFCL_WORKERS``: one per core, at most 16, unless set) that serve the requests, one at a time each, with a
few more queued at each (so a worker never waits for the host between two requests). The host itself never
decodes, executes or checks anything. The pool lives as long as the host: one scoring run (one
``CheckerHost``), in one sandbox, ended with it; nothing survives into another run.

**No model's code ever runs in a worker**, so that no answer can change the worker that scores the next ones
(monkeypatch a checker, write forged answers on its channel). bfcl-eval ``eval()``s the model's text in two
places: its prompt-mode decoder (``resolve_ast_by_type``: arithmetic and lambdas in arguments) and the
multi-turn executor (every call string). In the workers ``eval``/``exec`` of every bfcl-eval module are a
tripwire, except the executor's eval, which makes a call only when the string is a public method of one of the
wheel's backend instances with literal arguments (what honest answers are: the wheel's code on plain data,
exactly as eval would make it) and trips the wire otherwise. A request that trips it is thrown away (the
worker's backends are reset) and served again (``_remote``) with the model's text run by a child of the
**runner** (``untrusted.py``: forked before any entry's data was loaded; the child keeps only its socket,
reads no file of the wheel's data, writes none, signals and connects only inside its own Landlock domain):
the decoder's eval and every execution of the model's calls go there, what comes back is rebuilt as data
(``state_codec``), and the ground truth is executed and the official checker decides here, in the worker.
The host and every worker are not dumpable (``PR_SET_DUMPABLE`` 0), so no process of the sandbox can open
their ``/proc/<pid>/fd``, ``/proc/<pid>/mem`` (ptrace and ``process_vm_*`` are denied by the system-call
filter anyway), nor the runner's or a child's, which inherit it. A worker that
outlives a request's timeout is killed with its process group, one that dies fails its request (retried once,
on a new worker: a worker dies only of something outside it, such as the memory limit) and those queued behind
it go to the other workers; either is replaced by a new fork of the host.

What remains to a hostile answer is what a model's calls can do: change what its own calls return and
leave behind in its own backends — never a verdict, not even its own.

Protocol (one line per message): a request is ``<id> <timeout> <json>`` (the JSON has ``kind`` = score |
execute | check | states | ping, ``entry_id``, ``mode``, ``raw`` / ``previous``, ``display``, and
``isolate``: the model's text in the runner's child even when it is literal), an answer is
``<id> <json>`` (``ok``, ``result`` or ``error``). The host reads only the two header fields and forwards the
JSON as it is to a worker (``<timeout> <json>``), and the worker's answers in order, one line each. A failed
request's answer (``ok`` false) is the answer's own doing (it broke the checker, its code timed out or crashed the
worker) unless it says ``infrastructure`` (the runner could not be reached).
"""
from __future__ import annotations

import ast
import ctypes
import inspect
import json
import os
import selectors
import signal
import sys
import time
import traceback
from collections import deque
from typing import Any

from awm_engine.bench.bfcl import checker, untrusted

PIPELINE = 4  # requests queued at a worker at once
PR_SET_DUMPABLE = 4
_GUARDED: list[tuple[dict[str, Any], str]] = []  # (module namespace, name) where the tripwire stands
_BACKENDS: set[type] = set()  # the wheel's multi-turn backend classes
CHECKER = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"


class _Executes(BaseException):
    """The request reached a place where bfcl-eval eval()s the model's text (a ``BaseException``: the wheel's
    ``except Exception`` must not swallow it; a bare ``except`` cannot hide it either, see ``_TRIPPED``)."""


_TRIPPED = [False]


def _tripwire(*args: Any, **kwargs: Any) -> Any:
    _TRIPPED[0] = True
    raise _Executes("this request executes the model's text: the runner's child runs it")


def _literal(node: ast.AST) -> bool:
    """A literal ``ast.literal_eval`` reads as ``eval`` would (no operators but a sign, no unpacking)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(not isinstance(e, ast.Starred) and _literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) for k in node.keys) and all(_literal(v) for v in node.values)
    return False


def _backend_call(*args: Any, **kwargs: Any) -> Any:
    """``eval`` of the multi-turn executor in a worker: a call string that is a public method of a backend
    instance with literal arguments (``instance.cd(folder='x')``, what an honest answer is) is made here, as
    eval would make it — only the wheel's backend code runs, on plain data. Anything else trips the wire."""
    if len(args) != 1 or kwargs or not isinstance(args[0], str):
        _tripwire()
    try:
        node = ast.parse(args[0].strip(), mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and not node.func.attr.startswith("_")
                and all(not isinstance(a, ast.Starred) and _literal(a) for a in node.args)
                and all(k.arg is not None and _literal(k.value) for k in node.keywords)):
            _tripwire()
        positional = [ast.literal_eval(a) for a in node.args]
        keywords = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        _tripwire()
    frame = sys._getframe(1)  # eval's default namespaces: the caller's locals, then its globals
    name = node.func.value.id
    scope = frame.f_locals if name in frame.f_locals else frame.f_globals
    instance = scope.get(name)
    function = getattr(type(instance), node.func.attr, None)
    if type(instance) not in _BACKENDS or not inspect.isfunction(function) \
            or not function.__module__.startswith("bfcl_eval."):
        _tripwire()
    method = getattr(instance, node.func.attr)
    if getattr(method, "__func__", None) is not function or getattr(method, "__self__", None) is not instance:
        _tripwire()  # an instance attribute standing for the method
    del frame, scope
    return method(*positional, **keywords)


def _guard() -> None:
    """``eval`` and ``exec`` in every bfcl-eval module (as module globals, found before the builtins) become the
    tripwire — the multi-turn executor's eval ``_backend_call`` — in the host, before it forks the workers.
    Checked: the two modules that eval() model text are guarded."""
    config = sys.modules["bfcl_eval.constants.executable_backend_config"]
    for class_name, module in config.CLASS_FILE_PATH_MAPPING.items():
        if module in sys.modules and isinstance(getattr(sys.modules[module], class_name, None), type):
            _BACKENDS.add(getattr(sys.modules[module], class_name))
    executor = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "bfcl_eval" or name.startswith("bfcl_eval.")):
            continue
        namespace = vars(module)
        for builtin in ("eval", "exec"):
            if builtin not in namespace:
                namespace[builtin] = _backend_call if (name, builtin) == (executor, "eval") else _tripwire
                _GUARDED.append((namespace, builtin))
    guarded = {id(namespace) for namespace, _ in _GUARDED}
    for module in ("bfcl_eval.model_handler.utils", executor):
        if id(vars(sys.modules[module])) not in guarded:
            raise RuntimeError(f"could not guard the eval() of {module}")
    checker._PRISTINE.update(("eval", "exec"))  # reset() keeps them


def _undumpable() -> None:
    """Nobody else in the sandbox (same uid) may open this process's /proc/<pid>/fd, mem, environ … (inherited
    by fork)."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


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


def _compute(request: dict[str, Any]) -> bytes:
    try:
        answer = {"ok": True, "result": _work(request)}
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a model's call too: reported
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    finally:
        checker.reset()
    try:
        return json.dumps(answer, default=repr).encode()
    except (TypeError, ValueError) as exc:  # e.g. a cycle
        return _failure(f"the answer could not be written: {exc}")


def _failure(message: str, infrastructure: bool = False) -> bytes:
    """A failed request's answer; ``infrastructure``: the sandbox failed (not the answer), so it is no verdict."""
    return json.dumps({"ok": False, "error": message, **({"infrastructure": True} if infrastructure else {})}).encode()


def _answer(line: bytes) -> bytes:
    """One request (``<timeout> <json>``), answered in place unless it reaches the tripwire: then in a child."""
    header, _, payload = line.partition(b" ")
    try:
        timeout, request = float(header), json.loads(payload)
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
    except ValueError as exc:
        return _failure(f"malformed request: {exc}")
    if request.get("isolate") is True:  # asked for (tests, checks): the model's text in the runner's child anyway
        return _remote(request, timeout)
    _TRIPPED[0] = False
    answer = _compute(request)
    return _remote(request, timeout) if _TRIPPED[0] else answer


def _remote(request: dict[str, Any], timeout: float) -> bytes:
    """``request`` served again in this worker with the model's text run by a child of the runner
    (``untrusted``): the decoder's eval and every execution of the model's calls go there, the ground truth is
    executed here and the official checker decides here, on the data the child gives back."""
    deadline = time.monotonic() + max(0.1, timeout - min(2.0, timeout * 0.2))  # before the host's own deadline
    decoder = vars(sys.modules[untrusted.UTILS])
    judge = sys.modules[CHECKER]
    official = sys.modules[untrusted.EXECUTOR].execute_multi_turn_func_call
    signature = inspect.signature(official)
    try:
        runner = untrusted.Runner(deadline)
    except untrusted.RunnerError as exc:
        return _failure(f"the model's code could not be run: {exc}", infrastructure=True)

    def routed(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if str(bound.arguments["model_name"]).endswith("_ground_truth"):
            return official(*args, **kwargs)  # the ground truth: executed here (literal calls, _backend_call)
        return runner.execute(dict(bound.arguments))

    saved = decoder["eval"], judge.execute_multi_turn_func_call
    decoder["eval"], judge.execute_multi_turn_func_call = runner.eval, routed
    checker.EXECUTE[:] = [routed]
    _TRIPPED[0] = False
    try:
        answer = _compute(request)
    finally:
        decoder["eval"], judge.execute_multi_turn_func_call = saved
        checker.EXECUTE.clear()
        runner.close()
    if _TRIPPED[0]:
        return _failure("bfcl-eval eval()s this answer's text where awm does not expect it: not scored")
    return answer


def _serve(requests: int, answers: int) -> None:
    """A worker: its own session (killed as a group), only its two pipes open, stdio on /dev/null."""
    code = 1
    try:
        _undumpable()
        os.setsid()
        keep = sorted((requests, answers, *(c.fileno() for c in untrusted.CONTROL)))
        for low, high in zip([2, *keep], [*keep, 1 << 16]):
            os.closerange(low + 1, high)
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
        self.unsent += f"{job[1]} ".encode() + job[2] + b"\n"
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
    _undumpable()
    checker.warm_up()
    runner = untrusted.start()  # before any entry's data is loaded, and before the tripwire stands
    _guard()
    out = sys.stdout.buffer
    count = max(1, int(os.environ.get("AWM_BFCL_WORKERS") or 1))  # CheckerHost sets it (sandboxed.worker_count)
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin, selectors.EVENT_READ)
    waiting: deque[tuple[bytes, float, bytes]] = deque()
    workers: dict[int, _Worker] = {}  # answer pipe -> worker
    retried: set[bytes] = set()
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
        """The worker is gone (or stuck): its running job fails (a crash is retried once), the ones it had not
        started go first to the others, and a new fork takes its place."""
        selector.unregister(worker.outbox)
        del workers[worker.outbox]
        ended = worker.stop(kill)
        if worker.jobs:
            running = worker.jobs.popleft()
            if why is None and running[0] not in retried:
                retried.add(running[0])
                worker.jobs.appendleft(running)
            else:
                fail(running[0], why or f"the checker crashed ({ended})")
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
    for control in untrusted.CONTROL:
        control.close()  # the runner ends (and kills its children) when the last end closes
    os.waitpid(runner, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
