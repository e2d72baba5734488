"""A warm worker, ready before ``awm env serve`` asks: the cold start of a server without the sandbox's start.

Starting a worker sandbox costs about a second (bubblewrap, Python, FastAPI, SQLAlchemy and pydantic imported, the
warm-up environment loaded); measuring the host's protections costs half a second more. The first ``awm env serve``
of a machine (of a user) starts this service, detached: it holds one such worker, unbound to any scenario, with the
protections it measured. The next ``awm env serve`` takes it (``take``): it gets the worker's two sockets (its
protocol and its descriptor channel), a pidfd, the read end of its output and the path of its directory, binds it
to its scenario — one scenario per sandbox, as always — and the service starts the next spare. The service stays
the worker's parent: when the server's lease (its connection to the service) closes, for whatever reason, the
service kills the worker's sandbox and removes its directory and cgroups — the databases of the episode the server
named on the lease (``Lease.keep_databases``) moved into its run directory first, when the server died before it
moved them itself. With no lease and no request for ``AWM_WARM_IDLE`` seconds (600) it stops with its spare.
Asked to stop (``stop``, SIGTERM), or made stale by a server with other code or settings, it takes no more servers
and removes its spare at once, but every worker a server took stays until that server is done with it: a service
never ends another server's episode. Each service keeps its spares in a directory of its own (marked with its
process); what a killed one left is removed by the next.

Only the same user can talk to it (a 0700 directory, ``SO_PEERCRED`` checked), and only a server started with the
same code and sandbox settings takes its spare (``signature``); anything else starts its own worker as before.
``AWM_WARM=0`` turns it off; ``AWM_WARM_DIR`` says where its socket lives (default ``<tmp>/awm-warm-<uid>``).
"""
from __future__ import annotations

import array
import asyncio
import base64
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from awm_engine.sandbox import safe_fs
from awm_engine.sandbox.output import LOG_CAP, copy_capped

from awm_engine.runtime.warm_socket import ENV_DIR, ENV_OFF, SOCKET, enabled, service_dir  # noqa: F401
from awm_engine.runtime.warm_socket import private_dir as _private_dir
from awm_engine.runtime.warm_socket import IGNORED as _IGNORED  # AWM_* variables that never change a sandbox
from awm_engine.runtime.warm_socket import settings

ENV_IDLE = "AWM_WARM_IDLE"
IDLE = 600.0
# seconds a take waits for its scenario's module, being loaded into the spare by a prepare (``AWM_WARM_PREPARED_WAIT``)
PREPARED_WAIT = float(os.environ.get("AWM_WARM_PREPARED_WAIT") or 5.0)
# seconds a server waits for the service's answer before starting its own worker (a take may wait for a prepare)
TAKE_TIMEOUT = PREPARED_WAIT + 2.0
# seconds a server that started the service itself waits for it to listen before asking it to bind a spare ahead
SERVICE_START_WAIT = 30.0
MESSAGE = 1 << 16
EARLY_CAP = 16 << 10  # bytes of what a spare printed while it was bound ahead, handed to its taker (in the answer)
BIND_LIMIT = 64 << 20  # bytes of one request line (a ``bind`` carries the environment's code)


def signature() -> str:
    """The code and settings a spare depends on: this Python, awm's code (its files' sizes and times), the AWM_*
    variables, the variables a sandboxed process would see (time zone, locale, hash seed …) and whether untrusted
    code may run without the namespace layer (which the configuration file can say)."""
    from awm_engine.sandbox.host import unsafe_allowed
    from awm_engine.sandbox.launcher import sandbox_env
    from awm_engine.sandbox.view import PACKAGE_DIR

    digest = hashlib.sha256()
    digest.update(f"{os.path.realpath(sys.executable)}\0{PACKAGE_DIR}\0{os.geteuid()}\0".encode())
    for path in sorted(Path(PACKAGE_DIR).rglob("*.py")):  # any of awm's code a worker may run
        st = path.stat()
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for name in sorted(os.environ):
        if name.startswith("AWM_") and not name.startswith(_IGNORED):
            digest.update(f"{name}={os.environ[name]}\0".encode())
    for name, value in sorted(sandbox_env().items()):
        digest.update(f"sandbox {name}={value}\0".encode())
    digest.update(f"unsafe={unsafe_allowed()}\0".encode())
    return digest.hexdigest()


# -- the server's side ----------------------------------------------------------------------------------------------


@dataclass
class Lease:
    """A worker taken from the service. Closing it hands the worker back to be killed and removed."""

    sock: socket.socket
    control: socket.socket
    channel: socket.socket
    output: int  # the read end of the worker's stdout/stderr
    pidfd: int
    pid: int
    home: Path
    protections: dict[str, Any]
    bound: bool = False  # the spare was bound ahead to the scenario asked for (its module loaded: ``bind_next``)
    early: bytes = b""  # what it printed while it was loaded (read by the service meanwhile: ``EARLY_CAP``)
    _log: threading.Thread | None = None
    _stop_log: tuple[int, int] = (-1, -1)

    def copy_log(self, path: Path) -> None:
        """The worker's output from now on goes into ``path`` (within the sandbox log cap)."""
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        if self.early:
            with contextlib.suppress(OSError):
                os.write(out, self.early)
        self._stop_log = os.pipe()
        self._log = threading.Thread(target=copy_capped, args=(self.output, out, LOG_CAP, self._stop_log[0]),
                                     name="awm-warm-log", daemon=True)
        self._log.start()

    def stop_log(self) -> None:
        """The copy into the log stops between two reads (``output`` stays open: ``lean_front`` copies on)."""
        if self._log is not None:
            os.write(self._stop_log[1], b"x")
            self._log.join()
            self._log = None
            for fd in self._stop_log:
                os.close(fd)

    def keep_databases(self, live: Path, run_dir: Path) -> None:
        """Where the service moves the databases of the episode in ``live`` (below the worker's directory) when the
        lease ends with them still there — this process killed (``kill -9``, the OOM killer) before it moved them
        itself — instead of removing them with the directory."""
        with contextlib.suppress(OSError, ValueError):
            self.sock.sendall(json.dumps({"keep": {"live": str(live), "run_dir": str(run_dir)}}).encode() + b"\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        if self._log is None:
            with contextlib.suppress(OSError):
                os.close(self.output)


def recipe_id(scenario: str, code: str, template_digest: str | None, built_at: float | None) -> str:
    """What a spare bound ahead was loaded from: the scenario, its code and its template (digest, build time)."""
    digest = hashlib.sha256()
    digest.update(json.dumps([scenario, hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest(),
                              template_digest, built_at]).encode())
    return digest.hexdigest()


def take(timeout: float = TAKE_TIMEOUT, recipe: str | None = None, live: list | None = None) -> Lease | None:
    """The service's spare worker, or None (no service, another signature, no spare ready, turned off). With
    ``recipe``: the spare bound ahead to that scenario when there is one (``Lease.bound``), else the unbound one.
    ``live`` gets the socket: shut down from another thread, it ends a take that waits (``cancel_take``)."""
    if not enabled():
        return None
    try:
        path = _private_dir(service_dir()) / SOCKET
    except (OSError, ValueError):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if live is not None:
        live.append(sock)
    fds: list[int] = []
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(json.dumps({"op": "take", "signature": signature(), "recipe": recipe}).encode() + b"\n")
        data, fds, _, _ = socket.recv_fds(sock, MESSAGE, 4, socket.MSG_CMSG_CLOEXEC)
        answer = json.loads(data.decode()) if data else {}
        if answer.get("why") == "signature":  # a stale service: it stops; let it go before a new one starts
            deadline = time.monotonic() + 10
            while path.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        if not answer.get("ok") or len(fds) != 4:
            raise ValueError(answer.get("why") or "no spare")
        sock.settimeout(None)
        control, channel, output, pidfd = fds
        return Lease(sock, socket.socket(fileno=control), socket.socket(fileno=channel), output, pidfd,
                     int(answer["pid"]), Path(answer["home"]), answer.get("protections") or {},
                     bool(answer.get("bound")), base64.b64decode(answer.get("early") or ""))
    except (OSError, ValueError, KeyError, TypeError):
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        sock.close()
        return None


def cancel_take(live: list) -> None:
    """End the ``take`` given ``live`` now (a server interrupted while its take waits for a prepared load): it
    returns None at once, and a worker it was handed meanwhile goes back to the service (its lease closes)."""
    for sock in live:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def bind_next(recipe: str, load: dict[str, Any], template: str, max_age: float,
              timeout: float = 2.0) -> bool | None:
    """Ask the service to bind a spare to this scenario ahead of the next server of it: a new sandbox that loads
    ``load`` (the ``load`` request's fields but the paths: ``template`` is copied into the spare's own directory)
    and waits, at most ``max_age`` seconds, for a ``take`` with the same ``recipe``. One such spare at a time (the
    last asked for). True when the service took the request; None when no service listens (none runs, or one
    just started does not listen yet: it measures the host's protections first); never raises."""
    if not enabled():
        return False
    try:
        path = _private_dir(service_dir()) / SOCKET
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(json.dumps({"op": "bind", "signature": signature(), "recipe": recipe, "load": load,
                                     "template": template, "max_age": max_age}).encode() + b"\n")
            return sock.recv(MESSAGE).startswith(b'{"ok": true')
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    except (OSError, ValueError, TypeError):
        return False


def resolve_prepare(request: dict[str, Any]) -> dict[str, Any] | None:
    """What a ``prepare`` (``warm_socket.send_prepare``) asks this service to load, resolved as the server resolves
    it (its catalog, its template cache under its variables): the ``recipe`` the server's take will name, the
    ``load`` fields, the ``template`` path and how long the spare may stay bound (``max_age``). None when there is
    nothing to load ahead: an unknown scenario, a hosted one, no code, a template not built yet or expired (the
    server builds it), templates built for every episode."""
    from awm_engine.data.catalog import Catalog
    from awm_engine.db.templates import TemplateCache, max_age_from_env
    from awm_engine.runtime.hosted import is_hosted
    from awm_engine.runtime.pool import TemplateState

    env = request.get("env") if isinstance(request.get("env"), dict) else {}
    env = {k: v for k, v in env.items() if isinstance(k, str) and isinstance(v, str)}
    data, name, max_age = request.get("data"), request.get("scenario"), request.get("template_max_age")
    if not isinstance(name, str) or not (data is None or isinstance(data, list) and
                                         all(isinstance(d, str) and os.path.isabs(d) for d in data)):
        return None
    if max_age is not None and not (type(max_age) in (int, float) and max_age >= 0):
        return None
    try:
        scenario = Catalog.load(data).get(name)
    except (KeyError, OSError, ValueError):
        return None
    if is_hosted(scenario) or scenario.code is None:
        return None
    from awm_engine.data.paths import cache_dir

    cache = TemplateCache(cache_dir(env) / "templates", max_age_from_env(environ=env) if max_age is None else max_age)
    cached = cache._cached(*cache.paths(scenario))
    if cached is None or cached[1].time_dependent is None or cache.expired(cached[1]):
        return None
    template = TemplateState(*cached)
    try:
        idle = float(env.get(ENV_IDLE) or IDLE)
    except ValueError:
        idle = IDLE
    bound_for = min(cache.max_age, idle)
    if not bound_for > 0 or template.digest is None:
        return None
    return {"recipe": recipe_id(scenario.key, scenario.code, template.digest, template.report.built_at),
            "load": {"scenario": scenario.key, "code": scenario.code, "template_built_at": template.report.built_at,
                     "template_digest": template.digest},
            "template": str(template.path), "max_age": bound_for}


def ensure_service() -> None:
    """Start the service if none answers (detached; it outlives this process). Never raises: a server works without
    it, only slower to start."""
    if not enabled():
        return
    try:
        path = _private_dir(service_dir()) / SOCKET
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            if probe.connect_ex(str(path)) == 0:
                return
        from awm_engine.sandbox.environment import scrubbed_env
        from awm_engine.sandbox.launcher import PACKAGE_PARENT

        env = scrubbed_env({"PYTHONPATH": PACKAGE_PARENT})  # no keys: the service never needs one
        env.update({k: v for k, v in os.environ.items() if k.startswith("AWM_") and not k.startswith("AWM_SERVE_")})
        subprocess.Popen([sys.executable, "-m", "awm_engine.runtime.warm", "--serve"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                         env=env, cwd="/")
    except (OSError, ValueError):
        pass


def stop_service(timeout: float = 30.0) -> bool:
    """Ask the service to stop (its spare is removed); True once it has (tests, and ``awm doctor`` clean-ups)."""
    try:
        path = service_dir() / SOCKET
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(b'{"op": "stop"}\n')
            return sock.recv(MESSAGE).startswith(b'{"ok": true')
    except OSError:
        return False


# -- the service ------------------------------------------------------------------------------------------------


class Service:
    def __init__(self, where: Path, idle: float, on_closed: Any = None):
        self.where = where
        self.idle = idle
        self.on_closed = on_closed  # called once no new server can reach this service (another may start then)
        self.signature = signature()
        self.spares = where / SPARES  # each service's spares live in a directory of its own in here (``_own_dir``)
        self.home_root: Path | None = None
        self.spare: Any = None  # a started WorkerProcess (raw: nobody reads its protocol here)
        self.starting: asyncio.Task | None = None
        # a spare bound ahead to the scenario of a server's ``bind_next``: (recipe, worker, bound at, max age)
        self.bound: tuple[str, Any, float, float] | None = None
        self.binding: asyncio.Task | None = None
        self.binding_recipe: str | None = None  # what ``binding`` loads
        self.leases: set[asyncio.Task] = set()
        self.last_activity = time.monotonic()
        self.stopping = asyncio.Event()
        self.count = 0
        self._socket_ino: int | None = None

    async def run(self) -> None:
        from awm_engine.sandbox import host, limits, owned

        host.protections()  # measured once, handed to every taker
        limits.sweep_stale_quota_mounts()
        owned.sweep_dead_dirs()
        self.home_root = _own_dir(self.spares)  # after the sweep of what dead services left there
        path = self.where / SOCKET
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        server = await asyncio.start_unix_server(self._client, path=str(path), limit=BIND_LIMIT)
        os.chmod(path, 0o600)
        self._socket_ino = os.stat(path).st_ino
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.stopping.set)
        self._replenish()
        try:
            while not self.stopping.is_set():
                with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), 5.0)
                if not self.leases and time.monotonic() - self.last_activity > self.idle:
                    break
                self._replenish()  # a spare a prepare took for a server that never came for it
        finally:
            self.stopping.set()
            server.close()
            self._unlink_socket()
            if self.starting is not None:
                self.starting.cancel()
                with contextlib.suppress(BaseException):
                    await self.starting
            if self.binding is not None:
                self.binding.cancel()
                with contextlib.suppress(BaseException):
                    await self.binding
            self._unbind()
            if self.spare is not None:
                self._end(self.spare)
                self.spare = None
            if self.on_closed is not None:
                self.on_closed()  # the next service may start now: its spares never share a directory with ours
            # a worker a server took stays until that server is done with it (its episode goes on)
            _log(f"stopping: {len(self.leases)} worker(s) still in use")
            while self.leases:
                await asyncio.wait(set(self.leases))
            safe_fs.remove_tree(self.home_root)
            _log("service stopped")

    def _unlink_socket(self) -> None:
        """Remove this service's socket — never one a newer service has put in its place meanwhile."""
        path = self.where / SOCKET
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == self._socket_ino:
                path.unlink()

    def _replenish(self) -> None:
        if self.spare is None and (self.starting is None or self.starting.done()) and not self.stopping.is_set():
            self.starting = asyncio.create_task(self._start_spare())

    async def _start_spare(self) -> None:
        worker = await self._launch()
        if worker is not None:
            self.spare = worker
            _log(f"spare {worker.index} ready (pid {worker.proc.pid})")

    def _unbind(self) -> None:
        if self.bound is not None:
            self._end(self.bound[1])
            self.bound = None

    def _bind(self, request: dict[str, Any], worker: Any = None) -> None:
        """A spare bound to the scenario of ``request``: a new one (``bind_next``), or ``worker``, the ready spare
        (``prepare``); the one bound before is removed."""
        if self.binding is not None and not self.binding.done():
            self.binding.cancel()
        self._unbind()
        self.binding_recipe = request["recipe"]
        self.binding = asyncio.create_task(self._bind_spare(request, worker))

    async def _prepare(self, request: dict[str, Any]) -> None:
        """A server about to start asks for its scenario's module in the ready spare (``warm_socket.send_prepare``)
        while it imports what it needs: its take, a few hundred milliseconds later, finds it loaded or waits for it
        (``PREPARED_WAIT``). Nothing happens when the scenario does not resolve, the spare is bound to it already,
        or there is no ready spare; the next spare starts once the server has taken this one."""
        if request.get("settings") != settings():  # a server that would refuse this spare (``signature``: untrusted
            _log(f"prepare {str(request.get('scenario'))[:100]!r} ignored: other settings")  # code allowed, …): its
            return  # code never runs under this service's settings
        try:
            resolved = await asyncio.to_thread(resolve_prepare, request)
        except Exception as exc:  # noqa: BLE001 - a prepare is only ever a head start
            _log(f"prepare {str(request.get('scenario'))[:100]!r}: {exc!r}")
            return
        if resolved is None or self.stopping.is_set():
            return
        if self.bound is not None and self.bound[0] == resolved["recipe"] and self.bound[1].proc.poll() is None:
            return
        if self.binding is not None and not self.binding.done() and self.binding_recipe == resolved["recipe"]:
            return
        if self.spare is None or self.spare.proc.poll() is not None:
            return
        worker, self.spare = self.spare, None
        _log(f"prepare: spare {worker.index} for {resolved['load']['scenario']!r}")
        self._bind(resolved, worker)

    async def _bind_spare(self, request: dict[str, Any], worker: Any = None) -> None:
        from awm_engine.runtime import protocol
        from awm_engine.runtime.pool import _discard, _give_template

        if worker is None:
            worker = await self._launch()
        if worker is None:
            return
        incoming = "incoming-bound.db"
        try:
            load = {k: v for k, v in request["load"].items() if k not in ("template", "workdir", "id", "op")}
            template = Path(request["template"])
            if not stat.S_ISREG(os.lstat(template).st_mode):  # a symlink, FIFO or device: never followed or read
                raise ValueError(f"{template} is not a regular file")
            await asyncio.to_thread(_give_template, template, worker.home, incoming)
            # what the code prints meanwhile is read here (a full pipe would stop its load) and kept for the taker
            loop, early, dropped = asyncio.get_running_loop(), bytearray(), [0]

            def drain() -> None:
                try:
                    chunk = os.read(worker.output, 1 << 16)
                except BlockingIOError:
                    return
                except OSError:
                    chunk = b""
                if not chunk:
                    loop.remove_reader(worker.output)
                    return
                room = max(0, EARLY_CAP - len(early))
                early.extend(chunk[:room])
                dropped[0] += len(chunk) - len(chunk[:room])

            loop.add_reader(worker.output, drain)
            try:
                answer = await self._ask(worker, protocol.request(
                    1, "load", **load, template=str(worker.home / incoming), workdir=str(worker.home)),
                    float(os.environ.get("AWM_LOAD_TIMEOUT") or 120))
            finally:
                loop.remove_reader(worker.output)
            if dropped[0]:
                early.extend(f"\n[awm: {dropped[0]} more bytes the environment printed while the warm service "
                             "loaded it ahead were dropped]\n".encode())
            worker.early = bytes(early)
            if not answer.get("ok"):
                raise ValueError(f"the load failed: {str(answer.get('error'))[:200]}")
            # kept before anything more is awaited: a newer bind or the service stopping ends it from here on
            self.bound = (request["recipe"], worker, time.monotonic(), float(request["max_age"]))
        except BaseException as exc:  # a failure, a newer bind or the service stopping: nothing of it stays
            _log(f"binding spare {worker.index} to {request.get('load', {}).get('scenario')!r}: {exc!r}")
            self._end(worker)
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(_discard, worker.home, incoming)
        _log(f"spare {worker.index} bound to {load.get('scenario')!r} (pid {worker.proc.pid})")

    async def _ask(self, worker: Any, message: bytes, timeout: float) -> dict[str, Any]:
        """One request on a spare's protocol socket and its answer (a line within the protocol's limit)."""
        from awm_engine.runtime import protocol

        loop = asyncio.get_running_loop()
        worker.control.setblocking(False)
        try:
            await loop.sock_sendall(worker.control, message)
            answer = b""
            deadline = loop.time() + timeout
            while not answer.endswith(b"\n"):
                if len(answer) > protocol.LINE_LIMIT:
                    raise ValueError("an answer past the protocol's line limit")
                chunk = await asyncio.wait_for(loop.sock_recv(worker.control, 1 << 16),
                                               max(0.0, deadline - loop.time()))
                if not chunk:
                    raise OSError("the spare exited")
                answer += chunk
        finally:
            worker.control.setblocking(True)
        return protocol.decode(answer)

    async def _launch(self) -> Any:
        """A new spare sandbox, started and warmed up (answering a ping), or None (it failed; logged)."""
        from awm_engine.runtime import protocol
        from awm_engine.runtime.pool import WorkerProcess, launch_worker

        self.count += 1
        worker = WorkerProcess(self.count, self.where / "unused.log", self.home_root / f"w{self.count}",
                               channel=True)
        worker.control = worker.output = None
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:
            worker._prepare_home()
            launched = launch_worker(worker.index, worker.home, [], True, write_end)
            worker.proc, worker.sandbox = launched.proc, launched.sandbox
            worker.control, worker.channel, worker.output = launched.control, launched.channel, read_end
            read_end = -1
            await self._ask(worker, protocol.request(0, "ping"), 300)  # ready: imported and warmed up
        except BaseException as exc:  # a failure, or the service stopping meanwhile: nothing of it stays
            _log(f"spare {worker.index} did not start: {exc!r}")
            self._end(worker)
            if not isinstance(exc, Exception):
                raise
            return None
        finally:
            os.close(write_end)
            if read_end >= 0:
                os.close(read_end)
        return worker

    def _end(self, worker: Any, keep: list[tuple[Path, Path]] = ()) -> None:
        """The worker killed and removed; ``keep``: episodes whose databases, if still in its directory (their server
        died before it moved them), go to their run directories first."""
        for sock in (worker.control, worker.channel):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        if worker.output is not None:
            with contextlib.suppress(OSError):
                os.close(worker.output)
            worker.output = None
        if worker.proc is not None:
            from awm_engine.sandbox.launcher import kill_tree

            kill_tree(worker.proc)
        if worker.sandbox is not None:
            worker.sandbox.cleanup()
        if keep:
            from awm_engine.runtime.pool import _move_databases

            for live, run_dir in keep:
                if not any(os.path.lexists(live / name) for name in ("initial.db", "final.db")):
                    continue  # (its server moved them: it stopped as it should)
                try:
                    _move_databases(worker.home, live, run_dir)
                    _log(f"its server gone, the databases of {live.name} are kept in {run_dir}")
                except Exception as exc:  # noqa: BLE001 - the directory goes all the same
                    _log(f"could not keep the databases of {live.name} in {run_dir}: {exc}")
        worker.release_home()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            pid, uid, gid = array.array("i", creds)
            if uid != os.getuid():
                writer.close()
                return
            line = await asyncio.wait_for(reader.readline(), 10)
            request = json.loads(line or b"{}")
        except (OSError, ValueError, asyncio.TimeoutError, TimeoutError):
            writer.close()
            return
        self.last_activity = time.monotonic()
        op = request.get("op") if isinstance(request, dict) else None
        if op == "stop":
            self.stopping.set()
            writer.write(b'{"ok": true}\n')
            await writer.drain()
            writer.close()
            return
        if op == "prepare" and not self.stopping.is_set():  # no signature (not computed this early): a stale
            writer.close()  # service's bound spare is never taken, the take stops it
            await self._prepare(request)
            return
        if op not in ("take", "bind") or self.stopping.is_set():
            writer.close()
            return
        if request.get("signature") != self.signature:  # other code or settings: this service is stale
            self._unlink_socket()  # gone at once: the taker starts the next service
            self.stopping.set()
            writer.write(json.dumps({"ok": False, "why": "signature"}).encode())
            await writer.drain()
            writer.close()
            return
        if op == "bind":
            max_age = request.setdefault("max_age", 0.0)
            ok = isinstance(request.get("recipe"), str) and isinstance(request.get("load"), dict) and \
                isinstance(request.get("template"), str) and type(max_age) in (int, float) and \
                max_age >= 0  # (NaN is not)
            if ok:
                self._bind(request)
            writer.write(json.dumps({"ok": ok}).encode())
            await writer.drain()
            writer.close()
            return
        bound = False
        if request.get("recipe") is not None and self.binding is not None and not self.binding.done() and \
                self.binding_recipe == request.get("recipe"):  # its module is being loaded (a prepare): wait
            binding = self.binding
            _log("take: waiting for the prepared load")
            try:
                await asyncio.wait_for(asyncio.shield(binding), PREPARED_WAIT)
            except (Exception, asyncio.CancelledError):  # failed, replaced or slow: what is bound now is seen below
                if asyncio.current_task().cancelling():
                    raise
                if not binding.done():  # too slow (code that loops at import?): ended, not left loading
                    binding.cancel()  # the server loads in a worker of its own, under its own load timeout
        if self.bound is not None:
            recipe, spare, since, max_age = self.bound
            if spare.proc.poll() is not None or time.monotonic() - since > max_age:  # gone, or bound too long ago
                self._unbind()
            elif request.get("recipe") == recipe:
                self.bound, bound = None, True
        if bound:
            worker = spare
        else:
            worker, self.spare = self.spare, None
        _log(f"take: {'spare ' + str(worker.index) if worker else 'no spare'}{' (bound)' if bound else ''}"
             f"{' (exited)' if worker is not None and worker.proc.poll() is not None else ''}")
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                self._end(worker)
            writer.write(json.dumps({"ok": False, "why": "no spare ready"}).encode())
            await writer.drain()
            writer.close()
            self._replenish()
            return
        from awm_engine.sandbox import host

        answer = {"ok": True, "pid": worker.proc.pid, "home": str(worker.home),
                  "protections": host.protections().to_dict(), "bound": bound,
                  "early": base64.b64encode(getattr(worker, "early", b"")).decode()}
        pidfd = os.pidfd_open(worker.proc.pid)
        raw = socket.socket(fileno=os.dup(sock.fileno()))  # asyncio's wrapper has no sendmsg
        try:
            socket.send_fds(raw, [json.dumps(answer).encode()],
                            [worker.control.fileno(), worker.channel.fileno(), worker.output, pidfd])
        except OSError as exc:
            _log(f"take: could not hand spare {worker.index} over: {exc}")
            self._end(worker)
            writer.close()
            self._replenish()
            return
        finally:
            os.close(pidfd)
            raw.close()
        for handed in (worker.control, worker.channel):
            handed.close()
        os.close(worker.output)
        worker.control = worker.channel = worker.output = None
        self._replenish()
        task = asyncio.current_task()
        self.leases.add(task)
        keep: list[tuple[Path, Path]] = []
        try:
            async for line in reader:  # until the server closes its lease (or dies); each line: where its episode's
                keep += _kept(line, worker.home)  # databases go if it dies first (``Lease.keep_databases``)
        except (OSError, ValueError, asyncio.CancelledError):
            pass
        finally:
            self.leases.discard(task)
            self.last_activity = time.monotonic()
            self._end(worker, keep)
            writer.close()


def _kept(line: bytes, home: Path) -> list[tuple[Path, Path]]:
    """The (live, run directory) a ``keep`` line names, when its live directory is below the worker's ``home``."""
    try:
        keep = json.loads(line)["keep"]
        live, run_dir = Path(keep["live"]), Path(keep["run_dir"])
    except (ValueError, KeyError, TypeError):
        return []
    below = live.is_absolute() and live.is_relative_to(home) and ".." not in live.parts
    return [(live, run_dir)] if below and run_dir.is_absolute() else []


_log_file: Any = None
LOG_LIMIT = 1 << 20  # bytes of the service's own log (warm.log in its directory)


def _log(text: str) -> None:
    if _log_file is not None and _log_file.tell() < LOG_LIMIT:
        _log_file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")
        _log_file.flush()


SPARES = "spares"


def _own_dir(spares: Path) -> Path:
    """A new directory for this service's spares in ``spares``, marked as this process's (``sandbox.owned``); first,
    what services that are gone left there (killed: their workers died with them) is removed. A service that is
    stopping but still has workers in use keeps its directory (its process lives)."""
    from awm_engine.sandbox import owned

    _private_dir(spares)
    for entry in sorted(spares.iterdir()):
        if entry.is_symlink() or not entry.is_dir():
            continue
        mark = owned.owner_of(entry)
        if mark is None or owned.is_dead(mark):  # unmarked: a spare of an older layout, whose service is gone
            safe_fs.remove_tree(entry)  # (any service of this directory holds the lock we hold)
    path = Path(tempfile.mkdtemp(prefix=f"s{os.getpid()}-", dir=str(spares)))
    owned.mark(path)
    return path


def serve(idle: float | None = None) -> int:
    """The service's process: one per user and directory (a lock, held until it takes no more servers), until idle
    or stopped."""
    where = _private_dir(service_dir())
    lock = os.open(where / "warm.lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + 30  # a stale service may still be removing its spare
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline or (where / SOCKET).exists():
                return 0  # another service runs here
            time.sleep(0.1)
    from awm_engine.sandbox.host import harden_parent

    harden_parent()
    global _log_file
    _log_file = open(where / "warm.log", "a", encoding="utf-8")
    _log(f"service started (pid {os.getpid()})")
    idle = float(os.environ.get(ENV_IDLE) or IDLE) if idle is None else idle
    asyncio.run(Service(where, idle, on_closed=lambda: os.close(lock)).run())
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        sys.exit(serve())
    sys.exit(2)
