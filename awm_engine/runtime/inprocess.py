"""In-process environment runtime: a scenario's code is loaded once, episodes route to their own DB.

This is the hot path (spec/engine-notes.md C.3). ``LoadedEnv`` executes a scenario's rewritten
module once; when the code fits (see ``envcode.analyze_fit``) its module-global session factory is
replaced by a router that hands every handler a session on the *current episode's* engine, chosen
through a context variable. Code that does not fit is executed again for each episode ("isolated").

Tool calls follow fastapi-mcp 0.4.0: unknown tools and invalid arguments are rejected before any
request, arguments become an HTTP request to the app (in-process ASGI), a JSON answer is rendered
with ``indent=2``, and HTTP 4xx/5xx become ``Error calling <op>. Status code: <code>. Response: <body>``.
Calls run on worker threads so a per-call timeout can stop a handler that hangs.
"""
from __future__ import annotations

import asyncio
import contextvars
import ctypes
import hashlib
import os
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from awm_engine.data import codeinfo
from awm_engine.runtime import caps, envcode, inline_call, protocol
from awm_engine.runtime.asgi_call import (
    asgi_request,
    encode_request,
    format_traceback,
    response_text,
)
from awm_engine.runtime.episode import (
    DEFAULT_CALL_TIMEOUT,
    ON_TIMEOUT,
    SETTLE_LIMIT,
    ToolResult,
    check_schema_check,
    snapshot_database,
)
from awm_engine.runtime.openapi_tools import (
    ToolSpec,
    http_call_for,
    input_schema_error,
    tools_from_openapi,
)

current_episode: contextvars.ContextVar["Episode | None"] = contextvars.ContextVar("awm_episode", default=None)
STUCK_GRACE = 1.0  # how long an interrupted handler may take to unwind before its thread counts as stuck
QUEUED_RECHECK = 0.05  # while a call waits behind another, how often its clock looks whether the handler started


class TemplateTampered(Exception):
    """A template or module database changed after load: episodes would start from a poisoned state."""


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ToolCallTimeout(BaseException):
    """Raised inside a handler thread whose call ran past its timeout (BaseException: apps can't swallow it)."""


class RoutedSessionFactory:
    """Stands in for the module's ``SessionLocal``: a session on the current episode's database."""

    def __init__(self, scenario_key: str):
        self.scenario_key = scenario_key

    def __call__(self, **kwargs: Any):
        episode = current_episode.get()
        if episode is None:
            raise RuntimeError(f"{self.scenario_key}: a session was requested outside any episode")
        return episode.session_factory(**kwargs)


class LoadedEnv:
    """One scenario's code, executed once in this process, over its own copy of a template database (a
    template rebuilt later does not change the episodes of this one; ``template_built_at`` says when it was
    built)."""

    def __init__(self, key: str, code: str, template_db: Path | str, workdir: Path | str,
                 mode: str = "auto", template_built_at: float | None = None, template_digest: str | None = None):
        self.key = key
        self.code = code
        self.workdir = Path(workdir) / key
        self.workdir.mkdir(parents=True, exist_ok=True)
        tag = uuid.uuid4().hex[:8]
        self.template_db = self.workdir / f"template-{tag}.db"
        shutil.copyfile(template_db, self.template_db)
        sealed = self.sealed_digest = file_digest(self.template_db)
        if template_digest is not None and sealed != template_digest:  # checked before any of the code runs
            raise TemplateTampered(f"{key}: the template copy does not match the sealed template's digest")
        self.template_built_at = template_built_at
        self.module_db = self.workdir / f"module-{tag}.db"
        self.owned_files = [self.template_db, self.module_db]
        tree = None
        try:  # parsed once: the analysis reads this tree and the module is compiled from it
            tree = codeinfo.parse(envcode.rewrite_code(code, str(self.module_db)))
        except SyntaxError:
            pass
        self.fit = envcode.analyze_fit(tree) if tree is not None else envcode.CodeFit(False, reasons=["syntax"])
        self.shared = mode == "shared" or (mode == "auto" and self.fit.fits)
        shutil.copyfile(self.template_db, self.module_db)
        self.module, self.source = envcode.exec_module(code, key, str(self.module_db), tree)
        self.app = self.module.app
        # what every episode copies must stay as it is now: checked against these digests before each copy
        # the template's digest is the sealed one (taken before the code ran): an import-time thread that wrote to it
        # is caught at the first episode copy
        self.digests = {self.template_db: template_digest or sealed, self.module_db: file_digest(self.module_db)}
        self.tools: list[ToolSpec] = tools_from_openapi(self.app.openapi())
        self.tools_by_name = {t.name: t for t in self.tools}
        self._validators: dict[str, Any] = {}
        self._schema_errors: dict[str, str | None] = {}
        self.session_kwargs: dict[str, Any] = {}
        if self.shared:
            factory = self.module.__dict__[self.fit.session_name]
            self.session_kwargs = envcode.session_factory_kwargs(factory)
            self.module.__dict__[self.fit.engine_name].dispose()
            self.module.__dict__[self.fit.session_name] = RoutedSessionFactory(key)

    def pristine(self, path: Path) -> Path:
        """``path`` (the template or the module's database), after checking it was not changed since load."""
        expected = self.digests.get(path)
        if expected is not None and file_digest(path) != expected:
            raise TemplateTampered(f"{self.key}: {path.name} changed since the environment was loaded (something "
                                   "wrote to it); refusing to start an episode from it")
        return path

    def validator(self, tool: ToolSpec):
        v = self._validators.get(tool.name)
        if v is None:
            cls = jsonschema.validators.validator_for(tool.input_schema)
            v = self._validators[tool.name] = cls(tool.input_schema)
        return v

    def schema_error(self, tool: ToolSpec) -> str | None:
        """Why the tool's input schema is not valid JSON Schema (checked once per tool), or None."""
        if tool.name not in self._schema_errors:
            self._schema_errors[tool.name] = input_schema_error(tool.input_schema)
        return self._schema_errors[tool.name]

    def mcp_tools(self) -> list[dict[str, Any]]:
        return [t.to_mcp() for t in self.tools]

    def close(self) -> None:
        engine = self.module.__dict__.get(self.fit.engine_name or "engine")
        if hasattr(engine, "dispose"):
            engine.dispose()
        envcode.forget_module(self.module)
        for path in self.owned_files:
            path.unlink(missing_ok=True)


_thread_state = threading.local()
_executor: ThreadPoolExecutor | None = None
CALL_THREADS = 8  # handlers are CPU-bound under the GIL: more threads only add latency (a timed-out, stuck
#                   handler occupies one until its host is recycled)


def _executor_for_calls() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=CALL_THREADS, thread_name_prefix="awm-call")
    return _executor


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_thread_state, "loop", None)
    if loop is None or loop.is_closed():
        loop = _thread_state.loop = asyncio.new_event_loop()
    return loop


def interrupt_thread(thread_id: int) -> bool:
    """Raise ToolCallTimeout inside another thread (lands at its next Python instruction)."""
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                                      ctypes.py_object(ToolCallTimeout)) == 1


class Episode:
    """An isolated run of one scenario: its own ``initial.db`` and working ``final.db``."""

    def __init__(self, env: LoadedEnv, run_dir: Path | str | None = None, episode_id: str | None = None,
                 attach: bool = False, schema_check: str | None = None):
        self.id = episode_id or uuid.uuid4().hex[:12]
        self.env = env
        self.schema_check = check_schema_check(schema_check)
        self.run_dir = Path(run_dir) if run_dir else env.workdir / "episodes" / self.id
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.initial_db = self.run_dir / "initial.db"
        self.final_db = self.run_dir / "final.db"
        self.private: LoadedEnv | None = None
        self.engine = None
        self.session_factory = None
        self.calls = 0
        self.closed = False
        self.stuck = False  # a handler thread ignored its timeout (blocked in C); the host should be recycled
        self._lock = threading.Lock()
        self._left: list[tuple[asyncio.Future, dict[str, Any]]] = []  # handlers left running past a timeout
        self._open(copy=not (attach and self.final_db.exists() and self.initial_db.exists()))

    # -- lifecycle --------------------------------------------------------------------------
    def _open(self, copy: bool = True) -> None:
        """Fresh copies of the databases (or, with ``copy=False``, re-attach to the ones on disk)."""
        if copy:
            shutil.copyfile(self.env.pristine(self.env.template_db), self.initial_db)
        if self.env.shared:
            if copy:
                shutil.copyfile(self.env.pristine(self.env.module_db), self.final_db)
            self.engine = create_engine(f"sqlite:///{self.final_db}", connect_args={"check_same_thread": False})
            self.session_factory = sessionmaker(bind=self.engine, **self.env.session_kwargs)
        else:
            self.private = _PrivateEnv(self.env, self.final_db, copy)

    @property
    def loaded(self) -> LoadedEnv:
        return self.private or self.env

    def reset_now(self) -> None:
        """Back to the initial state: fresh copies of the databases (no rebuild, no re-exec when shared)."""
        self.settle()
        self._release()
        self._open()
        self.calls = 0

    async def reset(self) -> None:
        await asyncio.to_thread(self.reset_now)

    def snapshot(self, dest: Path | str) -> Path:
        return snapshot_database(self.final_db, dest)

    def _release(self) -> None:
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None
        if self.private is not None:
            self.private.close()
            self.private = None

    def close_now(self) -> None:
        """Stop serving; ``initial.db`` and ``final.db`` stay in the run directory. A handler left running past
        its timeout (``on_timeout="finish"``) is waited for first, so its writes are in ``final.db``."""
        if not self.closed:
            self.settle()
            self._release()
            self.closed = True

    async def close(self) -> None:
        if self._left:
            await asyncio.to_thread(self.close_now)
        else:
            self.close_now()

    def settle(self, limit: float | None = None) -> None:
        """Wait (up to ``limit`` seconds) for handlers left running after their calls timed out; past it they
        are interrupted as under ``on_timeout="interrupt"``, and one that will not stop marks the episode stuck."""
        if not self._left:
            return
        if self._lock.acquire(timeout=SETTLE_LIMIT if limit is None else limit):
            self._lock.release()
        else:
            for _, slot in self._left:
                if slot.get("thread"):
                    interrupt_thread(slot["thread"])
            if self._lock.acquire(timeout=STUCK_GRACE):
                self._lock.release()
            else:
                self.stuck = True
        self._left.clear()

    @property
    def left_running(self) -> int:
        """How many handlers are still running after their calls were answered with a timeout."""
        self._left = [(f, slot) for f, slot in self._left if not f.done()]
        return len(self._left)

    # -- tools ------------------------------------------------------------------------------
    def list_tools(self) -> list[dict[str, Any]]:
        return self.loaded.mcp_tools()

    def prepare(self, name: str, arguments: dict[str, Any] | None) -> tuple[ToolSpec | None, ToolResult | None]:
        """Checks made before any request: known tool, arguments valid against its input schema.

        A tool whose input schema is not valid JSON Schema fails every call with the schema's error under
        the ``reference`` schema check (as the reference's MCP server does); ``robust`` runs it, validating
        the arguments as far as the schema allows."""
        env = self.loaded
        tool = env.tools_by_name.get(name)
        if tool is None:
            return None, ToolResult(f"Unknown tool: {name}", True, error_kind="unknown_tool")
        reference = self.schema_check == "reference"
        if reference:
            schema_error = env.schema_error(tool)
            if schema_error is not None:
                return None, ToolResult(schema_error, True, error_kind="invalid_schema")
        try:
            error = best_match(env.validator(tool).iter_errors(arguments or {}))
        except Exception as exc:  # noqa: BLE001 - a schema jsonschema cannot apply (e.g. an unknown type name)
            if reference:
                return None, ToolResult(str(exc), True, error_kind="invalid_schema")
            error = None
        if error is not None:
            return None, ToolResult(f"Input validation error: {error.message}", True, error_kind="invalid_arguments")
        return tool, None

    def call_tool_sync(self, name: str, arguments: dict[str, Any] | None = None,
                       _slot: dict[str, Any] | None = None, result_cap: int | None = None) -> ToolResult:
        """Run one call on the calling thread (on a helper thread when this one runs an event loop). The text is
        cut at ``result_cap`` (default: ``caps.result_cap()``), here where it is made: a huge answer never leaves."""
        if asyncio._get_running_loop() is not None:
            return _executor_for_calls().submit(self.call_tool_sync, name, arguments, _slot, result_cap).result()
        started = time.perf_counter()
        request, rejected = self._request(name, arguments, started)
        if rejected is not None:
            return rejected
        with self._lock:
            if _slot is not None:
                _slot["thread"] = threading.get_ident()
                if _slot.get("on_start") is not None:  # the caller's clock starts now, not while queued
                    _slot["on_start"]()
            token = current_episode.set(self)
            try:
                response = _thread_loop().run_until_complete(asgi_request(self.loaded.app, request))
            except ToolCallTimeout as exc:  # where the handler was when it was stopped
                return self._stopped(name, exc, started)
            finally:
                current_episode.reset(token)
                if _slot is not None:
                    _slot["thread"] = None
            self.calls += 1
        return self._result(name, response, started, result_cap)

    def _request(self, name: str, arguments: dict[str, Any] | None, started: float) -> tuple[Any, ToolResult | None]:
        """The HTTP request a call makes, or the result that answers it without one (closed episode, unknown tool,
        invalid arguments, arguments no request can carry)."""
        if self.closed:
            return None, ToolResult(f"Episode {self.id} is closed", True, error_kind="internal")
        tool, rejected = self.prepare(name, arguments)
        if rejected is not None:
            return None, rejected
        try:
            call = http_call_for(tool, arguments or {})
            return encode_request(call.method, call.path, call.query, call.headers, call.body), None
        except Exception as exc:  # noqa: BLE001 - arguments no HTTP request can carry (a lone surrogate, NaN)
            # the reference's MCP server answers what its request raised as an error result: str(exc)
            return None, ToolResult(str(exc), True, error_kind="invalid_arguments",
                                    elapsed_ms=(time.perf_counter() - started) * 1000)

    def _stopped(self, name: str, exc: BaseException, started: float) -> ToolResult:
        return ToolResult(f"Error calling {name}: the handler was stopped after its timeout", True,
                          error_kind="timeout", elapsed_ms=(time.perf_counter() - started) * 1000,
                          traceback=format_traceback(exc, self._module_file()))

    def _result(self, name: str, response: Any, started: float, result_cap: int | None) -> ToolResult:
        elapsed = (time.perf_counter() - started) * 1000
        trace = format_traceback(response.error, self._module_file()) if response.error is not None else None
        if 400 <= response.status < 600:
            kind = "http_4xx" if response.status < 500 else "http_5xx"
            result = ToolResult(f"Error calling {name}. Status code: {response.status}. Response: {response.text}",
                                True, response.status, kind, elapsed, trace)
        else:
            result = ToolResult(response_text(response), False, response.status, None, elapsed, trace)
        del response  # the whole answer: only its cut text goes on
        return caps.cap_result(result, caps.worker_result_cap(result_cap), protocol.TEXT_BUDGET)

    async def call_tool_inline(self, name: str, arguments: dict[str, Any] | None = None,
                               timeout: float | None = DEFAULT_CALL_TIMEOUT,
                               result_cap: int | None = None) -> ToolResult:
        """``call_tool(..., on_timeout="interrupt")`` with the handler run on this event loop's thread
        (``inline_call``: no hand-off to a call thread and back, the served path's largest cost). Where that
        cannot be (not the main thread, SIGALRM taken, another call holds the episode, a handler left running),
        the call takes ``call_tool``'s path. Same results, same texts."""
        if not inline_call.ready() or self.left_running or inline_call.running() or \
                not self._lock.acquire(blocking=False):
            return await self.call_tool(name, arguments, timeout, result_cap, "interrupt")
        try:
            started = time.perf_counter()
            request, rejected = self._request(name, arguments, started)
            if rejected is not None:
                return rejected
            before = _db_stamp(self.final_db) if timeout is not None else None
            token = current_episode.set(self)
            try:
                response = await inline_call.run(asgi_request(self.loaded.app, request), timeout,
                                                 self._module_file(), STUCK_GRACE)
            except ToolCallTimeout as exc:
                if getattr(exc, "left_running", False):  # its work goes on where no exception reaches
                    self.stuck = True
                stopped = self._stopped(name, exc, started)
                note = "; it had already changed the database" if _db_stamp(self.final_db) != before else ""
                return ToolResult(f"Error calling {name}: timed out after {timeout:.1f}s{note}", True,
                                  error_kind="timeout", elapsed_ms=(timeout or 0) * 1000,
                                  traceback=stopped.traceback)
            finally:
                current_episode.reset(token)
            self.calls += 1
        finally:
            self._lock.release()
        return self._result(name, response, started, result_cap)

    def _module_file(self) -> str | None:
        return getattr(self.loaded.module, "__file__", None)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = DEFAULT_CALL_TIMEOUT, result_cap: int | None = None,
                        on_timeout: str = "interrupt") -> ToolResult:
        """Run one call on a worker thread. ``timeout`` counts the handler's own time only (not time queued
        behind other calls); past it the handler is interrupted (``on_timeout="interrupt"``) or left to finish
        and commit (``"finish"``, the reference's behaviour; close and reset wait for it). A call that completed
        is never reported as a failure, and one stopped after it changed the database says so. A call made while
        a handler is left running waits for it, and that wait counts against its own timeout.
        ``result_cap``: see ``call_tool_sync``.

        One hand-off each way (this is the served path's hot spot): the call thread resolves ``future`` from its
        own side, and the clock is a timer on this loop that re-arms itself until the handler has started."""
        if on_timeout not in ON_TIMEOUT:
            raise ValueError(f"on_timeout must be one of {', '.join(ON_TIMEOUT)}, not {on_timeout!r}")
        if self.left_running and timeout is not None:
            _, pending = await asyncio.wait([f for f, _ in self._left], timeout=timeout)
            if pending:
                return ToolResult(f"Error calling {name}: timed out after {timeout:.1f}s", True,
                                  error_kind="timeout", elapsed_ms=timeout * 1000)
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        expired: asyncio.Future = loop.create_future()
        slot: dict[str, Any] = {"thread": None, "started": None, "before": None}

        def on_start() -> None:  # on the call thread, holding the episode's lock: the handler's clock starts
            slot["before"] = _db_stamp(self.final_db)
            slot["started"] = time.monotonic()

        if timeout is not None:
            slot["on_start"] = on_start

        def job() -> None:
            try:
                outcome = (self.call_tool_sync(name, arguments, slot, result_cap), None)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side as it is
                outcome = (None, exc)
            try:
                loop.call_soon_threadsafe(_settle, future, *outcome)
            except RuntimeError:  # the loop is gone: nobody waits for this call any more
                pass

        _executor_for_calls().submit(job)
        if timeout is None:
            return await future

        def check() -> None:
            if future.done() or expired.done():
                return
            started = slot["started"]
            if started is None:  # still queued behind another call: no clock yet
                timer[0] = loop.call_later(min(timeout, QUEUED_RECHECK), check)
                return
            left = started + timeout - time.monotonic()
            if left > 0:
                timer[0] = loop.call_later(left, check)
            else:
                expired.set_result(None)

        timer = [loop.call_later(timeout, check)]
        try:
            await asyncio.wait((future, expired), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer[0].cancel()
        if future.done():
            return future.result()
        before = slot["before"]
        if on_timeout == "finish":  # it goes on; its writes land before the episode closes or resets
            self._left.append((future, slot))
            return ToolResult(f"Error calling {name}: timed out after {timeout:.1f}s", True,
                              error_kind="timeout", elapsed_ms=timeout * 1000)
        if slot.get("thread"):
            interrupt_thread(slot["thread"])
        stopped = None
        try:
            stopped = await asyncio.wait_for(asyncio.shield(future), STUCK_GRACE)
        except (asyncio.TimeoutError, TimeoutError):
            self.stuck = True
        if stopped is not None and stopped.error_kind != "timeout":
            return stopped  # it finished after all: the call went through
        changed = _db_stamp(self.final_db) != before
        note = "; it had already changed the database" if changed else ""
        return ToolResult(f"Error calling {name}: timed out after {timeout:.1f}s{note}", True,
                          error_kind="timeout", elapsed_ms=timeout * 1000,
                          traceback=getattr(stopped, "traceback", None))



def _settle(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if not future.done():
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)


def _db_stamp(path: Path) -> tuple:
    """Changes when SQLite commits to the database (the file or its WAL)."""
    stamp = []
    name = os.fspath(path)
    for p in (name, name + "-wal"):
        try:
            st = os.stat(p)
            stamp.append((st.st_mtime_ns, st.st_size))
        except OSError:
            stamp.append(None)
    return tuple(stamp)


class _PrivateEnv(LoadedEnv):
    """A module executed for one episode only, on that episode's database (code that does not fit)."""

    def __init__(self, shared: LoadedEnv, db_path: Path, copy: bool = True):
        self.key = shared.key
        self.code = shared.code
        self.template_db = shared.template_db
        self.template_built_at = shared.template_built_at
        self.workdir = shared.workdir
        self.fit = shared.fit
        self.shared = False
        self.module_db = db_path
        self.owned_files = []  # the episode's own final.db stays
        if copy:
            shutil.copyfile(shared.pristine(self.template_db), db_path)
        self.module, self.source = envcode.exec_module(self.code, self.key, str(db_path))
        self.app = self.module.app
        self.tools = shared.tools
        self.tools_by_name = shared.tools_by_name
        self._validators = shared._validators
        self._schema_errors = shared._schema_errors
        self.session_kwargs = {}
