"""Runs one verifier in a child process (started by ``verify.run_verifier``); never import this in a parent.

Input: a JSON request file; output: a JSON result file. The verifier's own prints go to stdout and
are ignored. ``sqlite3.connect`` on either database path is forced read-only.
"""
from __future__ import annotations

import inspect
import json
import os
import re
import sqlite3
import sys
import traceback


def _read_only_connect(paths: set[str]):
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):
        target = str(database)
        plain = target[5:].split("?", 1)[0] if target.startswith("file:") else target
        if os.path.realpath(plain) in paths:
            kwargs["uri"] = True
            return real_connect(f"file:{plain}?mode=ro", *args, **kwargs)
        return real_connect(database, *args, **kwargs)

    return connect


def sanitize(value):
    if isinstance(value, dict):
        return {str(k) if isinstance(k, tuple) else k: sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitize(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def call_verifier(func, mode: str, initial: str, final: str, final_answer: str):
    """As the reference: the three names by keyword where the function has them, else positionally when it
    takes two or more. ``final_answer`` is the agent's answer in code mode and ``''`` in sql mode (the
    reference's sql verifier is called without one, which it turns into '')."""
    params = list(inspect.signature(func).parameters)
    answer = (final_answer or "") if mode == "code" else ""
    wanted = {"initial_db_path": initial, "final_db_path": final, "final_answer": answer}
    kwargs = {k: v for k, v in wanted.items() if k in params}
    if kwargs:
        return func(**kwargs)
    if len(params) >= 2:
        return func(*([initial, final] + ([answer] if len(params) >= 3 else [])))
    return func()


def main() -> int:
    return run(sys.argv[1], sys.argv[2])


def run(request_path: str, out_path: str) -> int:
    request = json.loads(open(request_path).read())
    import resource

    def lower(which: int, value: int) -> None:  # the sandbox set these already; only ever lowered here
        soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(which, (cap, cap))
        except (ValueError, OSError):
            pass

    if request.get("memory_mb"):
        lower(resource.RLIMIT_AS, int(request["memory_mb"]) * 1024 * 1024)
    if request.get("cpu_seconds"):  # CPU time, beside the wall-clock timeout the parent enforces
        lower(resource.RLIMIT_CPU, int(request["cpu_seconds"]))
    lower(resource.RLIMIT_CORE, 0)
    mode = request["mode"]
    paths = {os.path.realpath(request["initial_db"]), os.path.realpath(request["final_db"])}
    sqlite3.connect = _read_only_connect(paths)
    result: dict
    try:
        namespace = {"sqlite3": sqlite3, "json": json, "os": os, "__builtins__": __builtins__}
        if mode == "code":
            namespace["re"] = re
        exec(compile(request["code"], "<verifier>", "exec"), namespace)
        func = namespace.get(request["function"])
        if not callable(func):
            result = {"status": "error", "error_kind": "function_not_found",
                      "error": f"function {request['function']!r} not found in the verifier code"}
        else:
            value = call_verifier(func, mode, request["initial_db"], request["final_db"],
                                  request.get("final_answer") or "")
            result = {"status": "ok", "value": sanitize(value)}
    except SyntaxError as exc:
        result = {"status": "error", "error_kind": "syntax_error", "error": f"SyntaxError: {exc}"}
    except MemoryError:
        result = {"status": "error", "error_kind": "memory", "error": "MemoryError: the verifier hit its memory limit"}
    except BaseException as exc:  # noqa: BLE001 - anything the verifier raises is its error
        result = {"status": "error", "error_kind": "exception", "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=4)}
    with open(out_path, "w") as fh:
        json.dump(result, fh, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
