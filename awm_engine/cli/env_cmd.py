"""``awm env serve | check | call | test | doctor``: run environments as MCP servers, call, health-check and
diagnose them."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from rich.markup import escape

from awm_engine.cli import verb_help
from awm_engine.cli.common import (
    CliError,
    add_data_arg,
    echo,
    get_scenario,
    ignore_sigterm,
    load_catalog,
    out_dir,
    print_json,
    run_async,
    shown,
    stderr,
    stdout,
    stop_requested,
)
from awm_engine.cli.options import add_result_cap_arg, result_cap_from_args, seconds
from awm_engine.data.error_text import exception_line
from awm_engine.data.paths import not_a_directory
from awm_engine.db.templates import MAX_AGE_ENV, TemplateCache
from awm_engine.runtime.caps import cap_result
from awm_engine.runtime.envcode import rewrite_code
from awm_engine.runtime.episode import DEFAULT_CALL_TIMEOUT, DEFAULT_SCHEMA_CHECK, SCHEMA_CHECKS, EnvLoadError
from awm_engine.runtime.pool import EnvPool, wait_for_exit
from awm_engine.runtime.protocol import WorkerError
from awm_engine.sandbox.host import harden_parent, protections


def register(verbs) -> None:
    parser = verbs.add_parser("env", help=verb_help("env"))
    sub = parser.add_subparsers(dest="env_verb", metavar="ACTION")
    sub.required = True
    serve = sub.add_parser("serve", help="serve one episode as an MCP server (streamable HTTP or stdio)")
    add_data_arg(serve)
    serve.add_argument("--scenario", required=True)
    serve.add_argument("--task", type=int, help="task index (recorded in session.json)")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--port", type=int, default=8001, help="HTTP port on 127.0.0.1 (default 8001; 0 = any)")
    where.add_argument("--stdio", action="store_true", help="speak MCP over stdin/stdout instead")
    serve.add_argument("--out", metavar="DIR", help="session directory (default outputs/servers/<time>_<scenario>)")
    serve.add_argument("--timeout", type=seconds, default=DEFAULT_CALL_TIMEOUT, help="per-call timeout in seconds")
    add_result_cap_arg(serve)
    add_episode_args(serve)
    serve.add_argument("--token", nargs="?", const="auto", metavar="TOKEN",
                       help="require 'Authorization: Bearer TOKEN' (no value: generate one and print it; "
                            "the AWM_SERVE_TOKEN variable also sets it)")
    serve.add_argument("--exit-with-parent", action="store_true",
                       help="stop when the process that started this one exits (used by the TUI)")
    serve.set_defaults(func=cmd_serve)
    check = sub.add_parser("check", help="list the tools of a running MCP server")
    check.add_argument("where", nargs="?", metavar="URL|SESSION_DIR",
                       help="the server's URL (e.g. http://127.0.0.1:8001/mcp), or the session directory of an awm "
                            "env serve (its session.json says the URL)")
    check.add_argument("--url", help="the server's URL (the same as giving it first)")
    check.add_argument("--timeout", type=seconds, default=10.0)
    check.add_argument("--token", metavar="TOKEN", help="bearer token of a server started with --token "
                                                         "(default: AWM_SERVE_TOKEN)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)
    call = sub.add_parser("call", help="one tool call on a fresh episode; prints the result text")
    add_data_arg(call)
    call.add_argument("scenario")
    call.add_argument("tool")
    call.add_argument("--args", default="{}", metavar="JSON", help="tool arguments as a JSON object")
    call.add_argument("--timeout", type=seconds, default=DEFAULT_CALL_TIMEOUT)
    call.add_argument("--keep", metavar="DIR", help="keep the episode's initial.db/final.db in DIR")
    call.add_argument("--json", action="store_true", help="print the full result record")
    add_result_cap_arg(call)
    add_episode_args(call)
    call.set_defaults(func=cmd_call)
    test = sub.add_parser("test", help="load environments and call every GET tool once")
    add_data_arg(test)
    which = test.add_mutually_exclusive_group()
    which.add_argument("--scenario", action="append", metavar="S")
    which.add_argument("--all", action="store_true", help="every scenario (the default)")
    test.add_argument("--workers", type=int, default=None, help="worker sandboxes per scenario (default: 1)")
    test.add_argument("--json", action="store_true")
    add_episode_args(test)
    test.set_defaults(func=cmd_test)
    doctor = sub.add_parser("doctor", help="every problem of environments in one list (build, routes, schemas, "
                                           "health, verifiers)")
    add_data_arg(doctor)
    doctor.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="scenarios to diagnose (default: all)")
    doctor.add_argument("--all", action="store_true", help="every scenario (the default)")
    doctor.add_argument("--workers", type=int, default=None, help="worker sandboxes per scenario (default: 1)")
    doctor.add_argument("--json", action="store_true")
    doctor.add_argument("--tau2-data", metavar="DIR", help="a τ²-bench data directory: its domains are the scenarios "
                                                          "tau2_airline, tau2_retail and tau2_telecom")
    doctor.add_argument("--airline-db", metavar="FILE", help="with --tau2-data: the airline db.json")
    add_episode_args(doctor)
    doctor.set_defaults(func=cmd_doctor)


def add_episode_args(parser: argparse.ArgumentParser) -> None:
    """How episodes run: the schema check (``--protocol``) and the template age limit."""
    parser.add_argument("--protocol", choices=list(SCHEMA_CHECKS), default=DEFAULT_SCHEMA_CHECK,
                        help="reference (default): a tool whose input schema is not valid JSON Schema fails every "
                             "call as under the reference; robust: such tools run")
    parser.add_argument("--template-max-age", type=float, metavar="SECONDS",
                        help="rebuild a template database whose contents depend on the build time once it is this "
                             f"old (default ${MAX_AGE_ENV} or 300; 0: for every episode; inf: never)")


def templates_from_args(args: argparse.Namespace) -> TemplateCache:
    if args.template_max_age is not None and not args.template_max_age >= 0:
        raise CliError("--template-max-age must be a number of seconds >= 0 (or inf)")
    return TemplateCache(max_age=args.template_max_age)


async def _serve(args: argparse.Namespace) -> int:
    from awm_engine.runtime.mcp_server import HOST, listen

    result_cap = result_cap_from_args(args)
    catalog = load_catalog(args, quiet=args.stdio)
    scenario = get_scenario(catalog, args.scenario)
    if args.task is not None and not 0 <= args.task < len(scenario.tasks):
        raise CliError(f"{scenario.key} has no task {args.task}")
    out = out_dir(args.out, holds=("session.json",)) if args.out else Path("outputs") / "servers" / (
        time.strftime("%Y%m%d_%H%M%S") + f"_{scenario.key}_{secrets.token_hex(2)}")
    port = args.port
    listener = None
    if not args.stdio:  # bound before anything is created, and kept: no other process can take it in between
        try:
            listener = listen(port)
        except OSError:
            raise CliError(f"port {port} on {HOST} is already in use (pick another with --port, or --port 0)",
                           PORT_BUSY) from None
        port = listener.getsockname()[1]
    try:
        _claim(out)
        return await _serve_on(args, scenario, out, port, listener, result_cap)
    finally:
        if listener is not None:
            listener.close()


CLAIM = ".serve.lock"  # in the session directory: locked by its server from its start until it has stopped
_CLAIMED: list[int] = []  # the lock's descriptor (handed across the lean front's execs: ``lean_handoff.go_lean``)


def _claim(out: Path) -> None:
    """The session directory taken for this server's life: a second server given the same ``--out`` while this one
    starts (before it writes ``session.json``, which ``out_dir`` refuses) is refused too, instead of serving beside
    it — the same ``calls.jsonl``, one's databases over the other's."""
    import fcntl

    while True:
        try:
            out.mkdir(parents=True, exist_ok=True)
            fd = os.open(out / CLAIM, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:  # (a file on the way, no permission, a read-only file system: said, no traceback)
            raise CliError(f"--out {out}: cannot write a session there ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise CliError(f"{out} is the session directory of another awm env serve, which is still starting or "
                           "serving; give another --out") from None
        try:
            if os.stat(out / CLAIM, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)  # (removed by a server that just stopped: the lock is taken on the file that is there now)
    try:
        out_dir(out, holds=("session.json",))  # (a server that served and stopped while this one started)
    except CliError:
        os.close(fd)
        raise
    _CLAIMED.append(fd)


def _unclaim(out: Path) -> None:
    """The lock file gone once the server has stopped (its lock goes with the process)."""
    try:
        (out / CLAIM).unlink()
    except OSError:
        pass


async def _serve_on(args: argparse.Namespace, scenario: Any, out: Path, port: int, listener: Any,
                    result_cap: int | None, resumed: dict | None = None) -> int:
    """Serve one episode until stopped. ``resumed``: the state the lean front handed back (``lean_handoff``): the
    episode is taken back as it is, then served by this process's front or (``why`` = ``stop``) closed."""
    import gc

    from awm_engine.runtime import lean_handoff
    from awm_engine.runtime.heap import trim as trim_heap
    from awm_engine.runtime.mcp_server import HOST, MCP_PATH, CallsLog, ServeFront, app_title, extras_enabled

    session_facts = resumed["engine_state"]["session"] if resumed else None
    if resumed is None:
        out.mkdir(parents=True, exist_ok=True)
        out = out.resolve()
        token = args.token or os.environ.get("AWM_SERVE_TOKEN")
        if token == "auto":
            token = secrets.token_urlsafe(24)
            if not args.stdio:
                stderr.print(f"bearer token: {token}", markup=False)
    else:
        token = resumed["front"]["token"]
    # one episode for the server's life: no spare sandbox kept beside it (~70 MB); the worker answers MCP itself
    pool = EnvPool(workers=1, spares=0, call_timeout=args.timeout, workdir=out / ".awm", log_path=out / "server.log",
                   schema_check=args.protocol, templates=templates_from_args(args), serve_channel=True, warm=True)
    calls = CallsLog(out / "calls.jsonl")
    restarted = asyncio.Event()

    def on_event(msg: dict) -> None:
        if msg.get("event") == "call":
            calls.write(msg.get("record"))
            if msg.get("stuck"):  # a handler would not stop: a new worker takes over (its sessions are lost)
                restarted.set()

    try:
        if resumed is None:
            await pool.start(warm_for=scenario)
            try:
                episode = await pool.open_episode(scenario, run_dir=out, task_idx=args.task)
            except EnvLoadError as exc:
                raise CliError(str(exc), 1) from None
            (out / "server_code.py").write_text(rewrite_code(scenario.code or "", str(episode.final_db), HOST, port))
            started = time.time()
        else:
            calls.left = resumed["calls"]["left"]
            episode, listener = await lean_handoff.readopt(pool, scenario, resumed, on_event)
            started = session_facts["started"]
        url = None if args.stdio else f"http://{HOST}:{port}{MCP_PATH}"
        spec = {"name": app_title(scenario.code) if scenario else "", "timeout": args.timeout,
                "result_cap": result_cap, "extras": extras_enabled(), "port": None if args.stdio else port,
                "token": token}
        front = ServeFront(episode.worker, None if args.stdio else port, token)

        def session_record(restarts: int) -> dict:
            return {"scenario": scenario.key, "task_id": args.task,
                    "task": scenario.tasks[args.task] if args.task is not None else None, "url": url,
                    "transport": "stdio" if args.stdio else "http", "initial_db": str(episode.initial_db),
                    "final_db": str(episode.final_db), "tools": len(episode.tools), "protocol": args.protocol,
                    "template": episode.template, "started": started,
                    # the worker: taken ready from the warm service (runtime.warm), or started by this server
                    "worker": "warm" if episode.worker.lease is not None else "own",
                    # taken with the scenario's module already loaded (a spare bound ahead: runtime.warm)
                    "worker_bound": bool(getattr(episode.worker.lease, "bound", False)),
                    "worker_pid": episode.worker.proc.pid, "worker_restarts": restarts,
                    # which protections held (and whether --unsafe-no-sandbox let it run without the namespace
                    # layer)
                    "sandbox": protections().to_dict()}

        def write_session(restarts: int) -> None:
            """``session.json``, written once the episode is served, again after each worker replacement (the
            databases' live paths and the worker change)."""
            _write_session(out, session_record(restarts))

        async def start_serving(restarts: int = 0) -> None:
            episode.worker.on_event = on_event
            await episode.worker.request("serve", episode=episode.id, **spec)
            await front.ready()
            write_session(restarts)

        tasks: list[asyncio.Task] = []
        try:
            _SERVED.append(out)
            if resumed is None:
                await start_serving()
                # what loading the catalog, the template and the worker allocated is garbage now: give it back
                gc.collect()
                trim_heap()
                stderr.print(f"{scenario.key}: {len(episode.tools)} tools; session {out}", markup=False)
                if not args.stdio:
                    stderr.print(f"MCP (streamable HTTP) at {url}  — ctrl+c to stop", markup=False)
                if lean_handoff.refusal(args.stdio, episode.worker, harden_parent()) is None:
                    # the next server of this scenario finds a spare with its module loaded; then the rest of the
                    # serving is done by a process of Python's built-in modules (~9 MB instead of ~32); unless a
                    # stop came first (go_lean returns: the task's cancel is on its way)
                    await pool.bind_next(scenario)
                    lean_handoff.go_lean(listener=listener, worker=episode.worker, episode=episode, calls=calls,
                                         port=port, token=token, claim=_CLAIMED[-1] if _CLAIMED else None,
                                         exit_with_parent=_STARTED_BY if args.exit_with_parent else None,
                                         session={"out": str(out), "started": started},
                                         stop_requested=stop_requested)
            elif resumed["why"] == "stop":
                raise asyncio.CancelledError
            else:  # the worker needs the engine (it died, would not stop, broke the protocol), or lean was refused
                # the episode is this process's again: a SIGINT or SIGTERM held since the lean front's exec stops it now
                lean_handoff.release_stops()
                await front.ready()
            if stop_requested() and asyncio.current_task().cancelling():  # a stop's cancel came and was lost on
                # the way (dropped by a library): never serve on, deaf to every later Ctrl-C and SIGTERM ("still
                # stopping"); one not come yet comes at ``await main``
                raise asyncio.CancelledError
            if args.stdio:
                main = asyncio.create_task(front.run_stdio())
            else:
                main = asyncio.create_task(front.run_http(listener))
            tasks += [main, asyncio.create_task(_keep_serving(pool, episode, front, start_serving, restarted, main))]
            if resumed is None:  # the next server of this scenario finds a spare with its module loaded
                tasks.append(asyncio.create_task(pool.bind_next(scenario)))
            if args.exit_with_parent:
                tasks.append(asyncio.create_task(_watch_parent(main)))
            await main
        except asyncio.CancelledError:
            pass
        finally:
            for task in tasks:
                task.cancel()
            ignore_sigterm()  # a SIGTERM from now on would only interrupt the clean-up
            await asyncio.shield(episode.close())
    finally:
        ignore_sigterm()
        calls.close()
        await pool.close()  # the episode's databases are in the session directory now
        # the worker's directory (template copies, module databases) goes too: nothing is left but the session
        await asyncio.to_thread(shutil.rmtree, out / ".awm", True)
        _session_stopped(out)
        _unclaim(out)
    stderr.print(f"stopped; databases in {out} (initial.db, final.db)", markup=False)
    return 0


async def _serve_resumed(args: argparse.Namespace, state: dict) -> int:
    """``awm env serve`` again after its lean front handed the episode back (``lean_handoff``)."""
    global _STARTED_BY
    out = Path(state["engine_state"]["session"]["out"])
    if state["front"]["exit_with_parent"] is not None:  # who started the server (not whoever adopted it since)
        _STARTED_BY = state["front"]["exit_with_parent"]
    scenario, failed = None, False
    if state["why"] != "stop":  # (closing needs no catalog: the episode's databases are where the state says)
        try:
            scenario = get_scenario(load_catalog(args, quiet=True), args.scenario)
        except Exception as exc:  # noqa: BLE001 - the data changed while it was served: closed, never lost
            stderr.print(f"error: the environment worker must be replaced, but {args.scenario} can no longer be "
                         f"loaded ({type(exc).__name__}: {exc}); the episode is closed", markup=False)
            state["why"], failed = "stop", True
    code = await _serve_on(args, scenario, out, state["front"]["port"], None, result_cap_from_args(args), state)
    return 1 if failed else code


def _session_stopped(out: Path) -> None:
    """``session.json`` once the server has stopped: the databases where they are now (the session directory, not
    the worker's, which is gone) and when it stopped."""
    path = out / "session.json"
    try:
        session = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # never served: nothing to update
    for key, name in (("initial_db", "initial.db"), ("final_db", "final.db")):
        session[key] = str(out / name) if (out / name).is_file() else None
    session["stopped"] = time.time()
    _write_session(out, session)


def _write_session(out: Path, session: dict) -> None:
    """``session.json``, replaced whole (a reader never sees half of it)."""
    partial = out / ".session.json.partial"
    partial.write_text(json.dumps(session, indent=2))
    os.replace(partial, out / "session.json")


MAX_SERVE_RESTARTS = 10  # workers replaced while serving one episode before the server gives up


async def _keep_serving(pool: EnvPool, episode: Any, front: Any, start_serving: Any, restarted: asyncio.Event,
                        main: asyncio.Task) -> None:
    """A worker that dies (or has a handler that would not stop) is replaced and serves the episode again, on its
    databases as they were (MCP sessions of the old one are gone: clients initialize again); after
    ``MAX_SERVE_RESTARTS`` the server stops. Nothing is handed to a worker between its end and its successor's
    ``serve`` (a client gets 503 meanwhile)."""
    for restarts in range(MAX_SERVE_RESTARTS + 1):
        died = asyncio.ensure_future(wait_for_exit(episode.worker.proc))
        stuck = asyncio.ensure_future(restarted.wait())
        try:
            await asyncio.wait({died, stuck}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            died.cancel()
            stuck.cancel()
        front.gone()
        restarted.clear()
        if restarts == MAX_SERVE_RESTARTS:
            break
        stderr.print("the environment worker stopped; starting a new one (MCP clients must initialize again)")
        try:
            await pool._restart(episode.worker, episode.worker.generation if episode.worker.alive else None)
            await pool._ensure_attached(episode)
            await start_serving(restarts + 1)
        except (WorkerError, EnvLoadError, OSError, asyncio.TimeoutError, TimeoutError) as exc:
            # counted as one more stop: the next round replaces this worker too (it is stopped here)
            stderr.print(f"the new environment worker could not serve the episode: {escape(str(exc))}")
            episode.worker.kill()
    stderr.print(f"the environment worker stopped {MAX_SERVE_RESTARTS} times: the server stops", markup=False)
    main.cancel()


PORT_BUSY = 3  # `awm env serve` exit code: the port is taken (nothing was started, no URL printed)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    import socket

    with socket.socket() as probe:
        # as the server will bind (uvicorn sets SO_REUSEADDR): a port whose last server just exited (its
        # connections in TIME_WAIT) is free; one with a listener is not
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


_STARTED_BY = os.getppid()  # the process that started this one (``--exit-with-parent``), read at import


async def _watch_parent(task: asyncio.Task) -> None:
    while not task.done():
        if os.getppid() != _STARTED_BY:  # re-parented: whoever started us is gone (maybe before serving began)
            task.cancel()
            return
        await asyncio.sleep(1.0)


def cmd_serve(args: argparse.Namespace) -> int:
    """SIGTERM stops the server as Ctrl-C does (``run_async``; uvicorn, while it serves, first shuts down and then
    passes the signal on), so the clean-up runs: the episode's databases moved into the session directory, the worker
    and its sandbox stopped and removed. Either one, while serving or still loading, exits 0."""
    import signal

    # Ctrl-C stops the server even when it was started with SIGINT ignored (a background job of a shell); once
    # the loop runs, run_async owns it: the first Ctrl-C or SIGTERM stops the server, later ones are ignored while
    # the clean-up saves the databases (a SIGINT from ``timeout`` and one from the user at once cost nothing)
    from awm_engine.runtime import lean_handoff

    resumed = lean_handoff.take_state()
    if resumed is not None and resumed["why"] == "stop":  # SIGINT and SIGTERM ignored: the clean-up only
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        lean_handoff.release_stops()  # (held across the exec: one sent meanwhile is dropped, the server is stopping)
        return asyncio.run(_serve_resumed(args, resumed))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run_async(_serve(args) if resumed is None else _serve_resumed(args, resumed), sigterm_code=0,
                         own_sigint=True)
    except KeyboardInterrupt:  # a Ctrl-C before serving, or one that cancelled the clean-up itself
        stderr.print(f"interrupted while stopping; the session is in {_SERVED[-1]}" if _SERVED else
                     "stopped before serving", markup=False)
        return 0


_SERVED: list[Path] = []  # the session directory, once the episode is served (what a second interrupt reports)


def _check_url(args: argparse.Namespace) -> str:
    """The URL ``awm env check`` asks: given, or read from a session directory's ``session.json``."""
    where = args.where or args.url
    if not where:
        raise CliError("give the server's URL (awm env check http://127.0.0.1:8001/mcp) or the session directory "
                       "of an awm env serve")
    url = where if "://" in where else _session_url(where)
    if args.url and args.url != url:
        raise CliError(f"two servers given ({args.where} and --url {args.url}): give one")
    return url


def _session_url(where: str) -> str:
    session = Path(where) / "session.json"
    if not Path(where).is_dir() or not session.is_file():
        raise CliError(f"{where}: neither a URL (http://HOST:PORT/mcp) nor a session directory (holding "
                       "session.json, written by awm env serve)")
    try:
        data = json.loads(session.read_bytes())
        url = data["url"]
    except (OSError, ValueError, KeyError, TypeError):
        raise CliError(f"{session}: not a session of awm env serve (no url in it)") from None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise CliError(f"{session}: served over {data.get('transport', 'stdio')}, not HTTP: nothing to check there")
    stopped = data.get("stopped")
    if stopped:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stopped)) if isinstance(stopped, (int, float)) \
            else stopped
        raise CliError(f"{where}: that server stopped ({when})", 1)
    return url


def cmd_check(args: argparse.Namespace) -> int:
    from awm_engine.runtime.mcp_server import list_remote_tools

    args.url = _check_url(args)
    try:
        tools = asyncio.run(list_remote_tools(args.url, args.timeout, args.token or os.environ.get("AWM_SERVE_TOKEN")))
    except Exception as exc:  # noqa: BLE001 - any connection failure is reported the same way
        hint = ""
        if "401" in str(exc) or "Unauthorized" in str(exc) or "error response" in str(exc):
            hint = " (a server started with --token answers 401 without it: pass --token TOKEN)"
        raise CliError(f"could not list tools at {args.url}: {type(exc).__name__}: {exc}{hint}", 1) from None
    if args.json:
        print_json({"url": args.url, "running": bool(tools), "tools": tools})
        return 0 if tools else 1
    from rich.table import Table as RichTable  # here, not at the top: env serve starts without it

    table = RichTable(title=f"{len(tools)} tools at {args.url}")
    table.add_column("tool")
    table.add_column("parameters")
    table.add_column("summary")
    for t in tools:
        props = t["inputSchema"].get("properties", {})
        req = set(t["inputSchema"].get("required", []))
        table.add_row(shown(t["name"]), shown(", ".join(p + ("*" if p in req else "") for p in props)),
                      shown(str(t.get("description") or "").split("\n")[0]))
    stdout.print(table)
    return 0 if tools else 1


async def _call(args: argparse.Namespace) -> int:
    result_cap = result_cap_from_args(args)  # a bad --result-cap is refused before anything starts
    catalog = load_catalog(args, quiet=True)
    scenario = get_scenario(catalog, args.scenario)
    try:
        arguments = json.loads(args.args)
    except ValueError as exc:
        raise CliError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise CliError("--args must be a JSON object")
    async with EnvPool(workers=1, call_timeout=args.timeout, schema_check=args.protocol,
                       templates=templates_from_args(args)) as pool:
        try:
            episode = await pool.open_episode(scenario, run_dir=Path(args.keep).resolve() if args.keep else None)
        except EnvLoadError as exc:
            raise CliError(str(exc), 1) from None
        result = cap_result(await episode.call_tool(args.tool, arguments), result_cap)
        names = [t["name"] for t in episode.list_tools()]
        await episode.close()
    if args.json:
        print_json({"scenario": scenario.key, "tool": args.tool, "arguments": arguments, **result.to_dict()})
    else:
        echo(result.text)  # the environment's text: its control characters made visible
    if result.traceback:  # what the environment raised (the result text is what a model sees): its line first
        echo(exception_line(result.traceback), err=True)
        echo(result.traceback.rstrip(), err=True)
    if result.error_kind == "unknown_tool":  # the text stays the reference's; the valid names go to stderr
        echo(unknown_tool_hint(args.tool, names), err=True)
    return 1 if result.is_error else 0


def unknown_tool_hint(name: str, names: list[str]) -> str:
    """The closest tool names to ``name``, then every tool of the scenario (for ``Unknown tool: <name>``)."""
    import difflib

    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    return (f"did you mean: {', '.join(close)}? " if close else "") + f"{len(names)} tools: {', '.join(sorted(names))}"


def cmd_call(args: argparse.Namespace) -> int:
    return run_async(_call(args))


async def over_scenarios(args: argparse.Namespace, scenarios: list, what: str, check) -> list:
    """``await check(pool, scenario)`` for every scenario, one per worker at a time, with progress on stderr."""
    async with EnvPool(workers=args.workers, schema_check=args.protocol,
                       templates=templates_from_args(args)) as pool:
        limit = asyncio.Semaphore(pool.n_workers)
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=stderr, transient=True) as progress:
            job = progress.add_task(what, total=len(scenarios))

            async def one(s):
                async with limit:
                    result = await check(pool, s)
                progress.advance(job)
                return result

            return await asyncio.gather(*(one(s) for s in scenarios))


async def _test(args: argparse.Namespace) -> int:
    from awm_engine.runtime.health import check_scenario
    from awm_engine.verify.doctor import diagnose

    catalog = load_catalog(args, quiet=args.json)
    scenarios = [get_scenario(catalog, s) for s in args.scenario] if args.scenario else list(catalog)

    async def check(pool, s):
        report = await check_scenario(pool, s)
        return report, await diagnose(s, pool, catalog, health=report)

    results = await over_scenarios(args, scenarios, "testing environments", check)
    reports = [r for r, _ in results]
    verdicts = [test_verdict(r.status, d.counts()) for r, d in results]
    if args.json:
        print_json([{**r.to_dict(), "verdict": v, "problem_counts": d.counts(),
                     "problems": [p.to_dict() for p in d.problems]} for (r, d), v in zip(results, verdicts)])
    else:
        from rich.table import Table as RichTable

        table = RichTable(title=f"health of {len(reports)} environment{'' if len(reports) == 1 else 's'}")
        for col in ("scenario", "status", "loads", "tools", "GET calls", "ok", "5xx", "4xx", "other", "seconds",
                    "problems"):
            table.add_column(col, justify="left" if col in ("scenario", "status", "problems") else "right")
        for (r, d), verdict in zip(results, verdicts):
            colour = {"ok": "green", "errors": "yellow", "broken": "red"}[verdict]
            table.add_row(shown(r.scenario), f"[{colour}]{verdict}[/{colour}]", "yes" if r.loads else "no",
                          str(r.tools), str(r.get_tools), str(r.calls_ok), str(r.calls_5xx), str(r.calls_4xx),
                          str(r.calls_other_error), f"{r.seconds:.2f}", shown(d.summary()))
        stdout.print(table)
        for r in reports:
            if r.error:  # an EnvLoadError's message already starts with the scenario
                error = r.error.removeprefix(f"{r.scenario}: ")
                stdout.print(f"[red]{shown(r.scenario)}: {shown(error)}[/red]")
            for tool, error in r.invalid_schemas.items():
                from awm_engine.runtime.openapi_tools import schema_problem_note  # jsonschema: only when shown

                stdout.print(f"[yellow]{shown(r.scenario)}: {shown(tool)}: {shown(schema_problem_note(error))}[/yellow]")
        if any(d.problems for _, d in results):
            stdout.print("awm env doctor SCENARIO lists the problems")
    # 1: an environment does not load (one with errors loads: its status says errors, never ok)
    return 0 if all(r.loads for r in reports) else 1


def test_verdict(health: str, counts: dict[str, int]) -> str:
    """``awm env test``'s status of one environment: ``broken`` (does not load), ``errors`` (loads, but a GET call
    errored or the doctor lists an error), ``ok`` (neither). Never ``ok`` while the doctor lists errors."""
    if health == "broken":
        return "broken"
    return "errors" if health != "ok" or counts.get("error") else "ok"


def cmd_test(args: argparse.Namespace) -> int:
    return run_async(_test(args))


async def _doctor(args: argparse.Namespace) -> int:
    from awm_engine.verify.doctor import (
        FORMAT_VERSION,
        SEVERITIES,
        SEVERITY_STYLE,
        diagnose,
        grouped,
        shown_detail,
        summarize,
    )

    if args.all and args.scenarios:
        raise CliError("give scenarios or --all, not both")
    names, tau2 = _tau2_scenarios(args)  # τ²-bench domains (tau2_<domain>) are diagnosed by bench.tau2.doctor
    catalog = load_catalog(args, quiet=True) if names or not tau2 else None
    scenarios = [get_scenario(catalog, s) for s in names] if names or tau2 else list(catalog)
    scenarios += tau2

    async def check(pool, s):
        if any(s is t for t in tau2):
            from awm_engine.bench.tau2.doctor import diagnose as diagnose_domain

            return await diagnose_domain(s, pool)
        return await diagnose(s, pool, catalog)

    diagnoses = await over_scenarios(args, scenarios, "diagnosing environments", check)
    catalog_issues = [str(i) for i in catalog.issues if i.scenario is None] if catalog else []
    counts = {s: sum(d.counts()[s] for d in diagnoses) for s in SEVERITIES}
    if args.json:
        print_json({"format_version": FORMAT_VERSION, "data_dirs": [str(d) for d in catalog.dirs] if catalog else [],
                    **({"tau2_data": args.tau2_data} if tau2 else {}),
                    "counts": counts, "catalog_issues": catalog_issues,
                    "scenarios": [{k: v for k, v in d.to_dict().items() if k != "format_version"}
                                  for d in diagnoses]})
        return 0
    for issue in catalog_issues:
        stdout.print(f"[red]{escape(issue)}[/red]")
    for d in diagnoses:
        stdout.print(f"[bold]{escape(d.scenario)}[/bold]  {escape(d.name)} — {d.summary()}"
                     + (f" · health {d.health}" if d.health else ""))
        for where, p in grouped(d.problems):
            style = SEVERITY_STYLE.get(p.severity, "white")
            stdout.print(f"  [{style}]{p.severity:7}[/{style}] {p.kind:15} {escape(where):22} {escape(p.message)}")
            if p.detail:
                stdout.print(escape("\n".join(" " * 12 + line for line in shown_detail(p.detail))), style="dim",
                             highlight=False)
        for note in d.notes:  # checks that do not apply to this kind of environment (τ² domains), and why
            stdout.print(f"  [dim]note    {escape(note)}[/dim]", highlight=False)
    stdout.print(f"{len(diagnoses)} environment{'' if len(diagnoses) == 1 else 's'}: {summarize(counts)} "
                 "(--json has every field)", markup=False)
    return 0


def _tau2_scenarios(args: argparse.Namespace) -> tuple[list[str], list]:
    """(AWM scenario names, τ² domains as ``DomainScenario``) of ``awm env doctor``'s arguments; with ``--tau2-data``
    and no scenario named, the three domains."""
    from awm_engine.bench.tau2.data import DOMAINS, domain_of_key

    names = list(dict.fromkeys(args.scenarios or []))
    domains = [domain_of_key(n) for n in names if domain_of_key(n)]
    args.tau2_data = args.tau2_data or os.environ.get("AWM_TAU2_DATA")
    if not args.tau2_data:
        if domains:
            raise CliError(f"{names[0] if len(domains) == len(names) else 'a τ²-bench domain'} is a τ²-bench "
                           "domain: give its data with --tau2-data DIR (or set AWM_TAU2_DATA)")
        if args.airline_db:
            raise CliError("--airline-db goes with --tau2-data DIR")
        return names, []
    from awm_engine.bench.tau2.data import Tau2Data
    from awm_engine.bench.tau2.episode import DomainScenario

    if not_a_directory(args.tau2_data):
        raise CliError(f"--tau2-data {args.tau2_data}: {not_a_directory(args.tau2_data)}")
    data = Tau2Data(Path(args.tau2_data).resolve(), Path(args.airline_db).resolve() if args.airline_db else None)
    chosen = domains if names else list(DOMAINS)
    return [n for n in names if not domain_of_key(n)], [DomainScenario(data, d) for d in chosen]


def cmd_doctor(args: argparse.Namespace) -> int:
    return run_async(_doctor(args))
