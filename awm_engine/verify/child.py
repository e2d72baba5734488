"""Runs one verifier in a child process; never import this in a parent.

Two ways in, one ``verdict``: ``python -m awm_engine.verify.child REQUEST RESULT`` (a sandbox of its own, started
by ``verify.run_verifier``: a JSON request file in, a JSON result file out) or ``serve_job`` (a child of the
verifier host's fork runner, ``verify/host.py``: its request and answer on its own socket). The verifier's own
prints are ignored. ``sqlite3.connect`` on either database path is forced read-only.
"""
from __future__ import annotations

import inspect
import json
import os
import re
import sqlite3
import sys
import traceback


def _read_only_connect(paths: set[str], memory_temp: bool = False):
    """``sqlite3.connect`` with either database path opened read-only; ``memory_temp``: SQLite's temporary tables
    and sort files in memory (a verifier host's child may write no file)."""
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):
        target = str(database)
        plain = target[5:].split("?", 1)[0] if target.startswith("file:") else target
        if os.path.realpath(plain) in paths:
            kwargs["uri"] = True
            # in a verifier host the job directory is not writable: a database in WAL mode could not make its
            # shared-memory file, so it is read as the immutable file it is there (what a sandbox of its own reads:
            # only the database file is copied, never a WAL)
            conn = real_connect(f"file:{plain}?mode=ro" + ("&immutable=1" if memory_temp else ""), *args, **kwargs)
        else:
            conn = real_connect(database, *args, **kwargs)
        if memory_temp:
            conn.execute("PRAGMA temp_store = MEMORY")
        return conn

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


def _lower(which: int, value: int) -> None:
    """Lower a resource limit (never raise one: the sandbox set them already)."""
    import resource

    soft, hard = resource.getrlimit(which)
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    try:
        resource.setrlimit(which, (cap, cap))
    except (ValueError, OSError):
        pass


def verdict(request: dict) -> dict:
    """Run the request's verifier (its limits first) and return what it gave: ``{"status": "ok", "value": …}`` or
    ``{"status": "error", "error_kind": …, "error": …}``."""
    import resource

    if request.get("memory_mb"):
        _lower(resource.RLIMIT_AS, int(request["memory_mb"]) * 1024 * 1024)
    if request.get("cpu_seconds"):  # CPU time, beside the wall-clock timeout the parent enforces
        _lower(resource.RLIMIT_CPU, int(request["cpu_seconds"]))
    _lower(resource.RLIMIT_CORE, 0)
    mode = request["mode"]
    paths = {os.path.realpath(request["initial_db"]), os.path.realpath(request["final_db"])}
    sqlite3.connect = _read_only_connect(paths, bool(request.get("memory_temp")))
    try:
        namespace = {"sqlite3": sqlite3, "json": json, "os": os, "__builtins__": __builtins__}
        if mode == "code":
            namespace["re"] = re
        # dont_inherit: as the reference's exec of the text, from a module without ``from __future__ import
        # annotations`` (this one has it): a verifier's annotations are evaluated when its function is defined
        exec(compile(request["code"], "<verifier>", "exec", dont_inherit=True), namespace)
        func = namespace.get(request["function"])
        if not callable(func):
            return {"status": "error", "error_kind": "function_not_found",
                    "error": f"function {request['function']!r} not found in the verifier code"}
        value = call_verifier(func, mode, request["initial_db"], request["final_db"], request.get("final_answer") or "")
        return {"status": "ok", "value": sanitize(value)}
    except SyntaxError as exc:
        return {"status": "error", "error_kind": "syntax_error", "error": f"SyntaxError: {exc}"}
    except MemoryError:
        return {"status": "error", "error_kind": "memory", "error": "MemoryError: the verifier hit its memory limit"}
    except BaseException as exc:  # noqa: BLE001 - anything the verifier raises is its error
        return {"status": "error", "error_kind": "exception", "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=4)}


def run(request_path: str, out_path: str) -> int:
    """A verifier in a sandbox of its own (``verification._spawn``): the request and the result as files."""
    request = json.loads(open(request_path).read())
    result = verdict(request)
    with open(out_path, "w") as fh:
        json.dump(result, fh, default=str)
    return 0


# -- one verifier in a child of the verifier host's fork runner (``verify/host.py``) --------------------------------

MAX_REQUEST = 64 << 20  # a request holds the verifier's code and the agent's final answer


def readable_roots() -> list[str]:
    """What a verifier may read besides its own directory: Python's library and the installed packages (modules
    it imports), the system's shared libraries (extension modules load them) and the time-zone database."""
    import sysconfig

    paths = sysconfig.get_paths()
    roots = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    return roots + ["/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/share/zoneinfo", "/etc/localtime"]


def serve_job(channel, readable: list[str]) -> None:
    """The child's whole life: read its one request, confine itself to its job directory (read only), no new
    process or thread, then run the verifier and answer on its own socket, the only one it holds."""
    import resource

    from awm_engine.sandbox import landlock, seccomp

    with channel.makefile("rwb") as stream:
        line = stream.readline(MAX_REQUEST + 1)
        try:
            request = json.loads(line)
            job = request["dir"]
            request["memory_temp"] = True
            try:
                with open("/proc/self/oom_score_adj", "w") as fh:  # under memory pressure, a verifier goes first
                    fh.write("1000")
            except OSError:
                pass
            # what Landlock does not cover: SysV/POSIX IPC objects outlive the child and are shared by the host's
            # IPC namespace (one verifier's data, or memory no limit of its own counts, would be there for the
            # next), and inotify would name other jobs' directories and report their databases' use
            seccomp.deny(seccomp.SHARED_OBJECTS)
            landlock.restrict([], deny_tcp=True, scope=True, readable=readable + [job])
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        except BaseException as exc:  # noqa: BLE001 - nothing of the verifier ran: the host says why
            answer = {"ok": False, "error": f"the verifier could not be confined: {type(exc).__name__}: {exc}"}
        else:
            answer = {"ok": True, "result": verdict(request)}
        stream.write(json.dumps(answer, default=str).encode() + b"\n")
        stream.flush()


if __name__ == "__main__":
    sys.exit(main())
