"""Where a model's code runs, when its answer is code (``host.py``): a process of its own that can compute
nothing but data, and cannot see the answer key. The processes are ``sandbox/forkrunner``'s — the fork runner the
verifiers run on too; what is BFCL's own is what a child may read and what it serves.

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
import socket
import sys
import sysconfig
from typing import Any

from awm_engine.bench.bfcl import state_codec
from awm_engine.sandbox import forkrunner, landlock
from awm_engine.sandbox.forkrunner import CONTROL, MAX_ANSWER  # noqa: F401 - the host keeps CONTROL's descriptor

UTILS = "bfcl_eval.model_handler.utils"  # the decoder's module (its eval)
EXECUTOR = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"

RunnerError = forkrunner.ChannelError  # the runner or the child gave no usable answer: the request's error
_kill = forkrunner.kill


def start() -> int:
    """Fork the runner (in the host, before anything but the wheel's modules is loaded); returns its pid."""
    return forkrunner.start(_child_main, _readable)


def _readable() -> list[str]:
    """What a child may read (modules the wheel's code imports lazily, such as ``_strptime``): Python's library
    and the installed packages, except bfcl-eval's ``data`` folder (its questions and possible answers)."""
    hidden = os.path.join(os.path.dirname(sys.modules["bfcl_eval"].__file__), "data")
    paths = sysconfig.get_paths()
    return forkrunner.readable_around([paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")
                                       if k in paths], [hidden])


def _child_main(channel: socket.socket, readable: list[str]) -> None:
    """One request's process: no file writable, only ``readable`` readable, the real eval."""
    try:
        landlock.restrict([], deny_tcp=True, scope=True, readable=readable)
    except OSError:
        pass  # no Landlock on this kernel (the sandbox reports it)
    # no new process or thread (the wheel's code starts none): nothing of the model's code can outlive the
    # request (a grandchild in a session of its own would escape the kill) or fill the sandbox's process limit
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    with channel.makefile("rwb") as stream:
        for line in stream:
            stream.write(json.dumps(_serve(line)).encode() + b"\n")
            stream.flush()


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


class Runner(forkrunner.Channel):
    """A worker's handle on one child (one request): ``eval`` and ``execute`` as bfcl-eval calls them."""

    def __init__(self, deadline: float) -> None:
        super().__init__(deadline, "the model's code", "the model's process")

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        answer = self.ask(message)
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
