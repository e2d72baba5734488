"""A pool of environment worker processes, and the episode handles front ends use.

Generated environment code never runs in the caller's process, and no two scenarios ever share one: each worker
is a sandbox (``sandbox.launcher``) bound to exactly one scenario, with a writable directory of its own (a
size-capped tmpfs where awm runs as root). ``EnvPool`` keeps ``spares`` pre-started workers — Python, FastAPI,
SQLAlchemy and pydantic already imported — and binds one to a scenario at its first use; up to ``workers``
sandboxes serve one scenario, at most ``max_sandboxes`` live at once (the least recently used idle ones stop).
The scenario's sealed template (built in a sandbox of its own, ``db.templates``) is copied into the worker's
directory by the parent, never read from the cache by sandboxed code. Files come back out of a worker's
directory only through ``sandbox.safe_fs`` (no symlink, hard link or special file is followed). A call that
does not come back within its timeout plus a grace period kills that worker; the pool starts a new
one and re-attaches the other episodes to their databases on disk, so only the hung call is lost.
Templates whose contents depend on the build time are refreshed as ``TemplateCache`` says (``_template``).
"""
from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from awm_engine.data.catalog import Scenario
from awm_engine.db.build import BuildReport
from awm_engine.db.templates import TemplateCache, template_facts
from awm_engine.runtime import caps, protocol
from awm_engine.runtime.episode import (
    DEFAULT_CALL_TIMEOUT,
    ON_TIMEOUT,
    SETTLE_LIMIT,
    EnvLoadError,
    ToolResult,
    check_schema_check,
    snapshot_database,
)
from awm_engine.runtime.hosted import is_hosted
from awm_engine.runtime.protocol import WorkerError
from awm_engine.sandbox import host, limits, owned, safe_fs
from awm_engine.sandbox.launcher import (
    INSIDE_FIRST_WAIT,
    Sandbox,
    SandboxPolicy,
    default_memory_mb,
    give_to_sandbox,
    kill_inside_first,
    kill_tree,
    sandbox_ids,
)

KILL_GRACE = 5.0
QUEUE_ALLOWANCE = 120.0  # a call may wait this long inside its worker behind others before the worker is presumed hung
MAX_INFLIGHT = 64  # calls in flight per worker; more wait in the pool (back-pressure)
MAX_LOADED = 64  # scenario modules per worker; the least recently used are unloaded beyond this
LOAD_TIMEOUT = 60.0  # a scenario whose code does not finish importing by then is broken (its worker replaced)
MAX_SANDBOXES = 32  # worker sandboxes alive at once; the least recently used idle scenario's go beyond this
DISK_MB = limits.DISK_MB  # a worker's directory quota (tmpfs, root only)
OP_DEADLINES = {"load": LOAD_TIMEOUT, "open": 60.0, "reset": 60.0, "close": 15.0, "list_tools": 30.0, "ping": 10.0}


class WorkerProcess:
    """One subprocess speaking JSON lines over a socket pair."""

    def __init__(self, index: int, log_path: Path, home: Path, readable: list[str] | None = None,
                 channel: bool = False):
        self.index = index
        self.lease: Any = None  # a worker taken from the warm service (``adopt``) until it is replaced or released
        self.wants_channel = channel  # a descriptor channel for serving over MCP (mcp_http.channel_loop)
        self.channel: socket.socket | None = None  # its parent end (SOCK_SEQPACKET): only ever sent on
        self.on_event: Any = None  # called with each event the worker sends (a message without id)
        self.home = home  # the only directory this worker may write: its episodes, template copies, module DBs
        self.own_home = home  # (a leased worker's is the warm service's)
        self.readable = list(readable or [])  # what its scenario reads besides its code (a hosted domain's data)
        self.scenario: str | None = None  # the one scenario this sandbox hosts (None: a spare)
        self.quota = False
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.sandbox: Sandbox | None = None
        self.opening = 0  # episodes being opened here (counted by placement before they exist)
        self.inflight: asyncio.Semaphore | None = None  # bounded calls in flight: back-pressure, not timeouts
        self.last_used: dict[str, float] = {}  # scenario -> when an episode of it was last opened here
        self.pending: dict[int, asyncio.Future] = {}
        self.abandoned: set[int] = set()  # requests whose caller stopped waiting (their late answers are dropped)
        self.ids = itertools.count(1)
        self.loaded: dict[str, dict[str, Any]] = {}
        self.load_locks: dict[str, asyncio.Lock] = {}
        self.episodes: set[str] = set()
        self.alive = False
        self.generation = 0
        self.attached: set[str] | None = None  # after a restart: episodes re-opened on their databases
        self._reader_task: asyncio.Task | None = None
        self._watch_task: asyncio.Task | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def _prepare_home(self) -> None:
        safe_fs.mark_untrusted(self.home)
        if not self.home.exists():
            self.home.mkdir(parents=True)
            uid, gid = sandbox_ids()
            self.quota = limits.mount_quota(self.home, DISK_MB, uid, gid)
        if not self.quota:
            give_to_sandbox(self.home)

    def release_home(self) -> None:
        """The worker is done for good: its directory (and quota mount) goes (a leased one's, with the lease: the
        warm service removes it)."""
        if self.lease is not None:
            self.lease.close()
            self.lease = None
            self.home = self.own_home
            return
        if self.quota:
            limits.unmount_quota(self.home)
            self.quota = False
        safe_fs.remove_tree(self.home)

    async def start(self) -> None:
        if self.lease is not None:  # a leased worker is replaced by one of this process's own
            self.lease.close()
            self.lease = None
            self.home = self.own_home
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self._prepare_home()
        log = open(self.log_path, "ab")
        try:
            launched = launch_worker(self.index, self.home, self.readable, self.wants_channel, log)
        finally:
            log.close()
        self.proc, self.sandbox, self.channel = launched.proc, launched.sandbox, launched.channel
        await self._attach(launched.control)

    async def adopt(self, lease: Any, unread: bytes = b"") -> None:
        """Take over a worker a warm service started (``runtime.warm``): already running, imported and warmed up.
        The service stays its parent and removes it, its sandbox and its directory when ``lease`` is closed.
        ``unread``: what it sent that was read and not yet taken (``lean_handoff``: it is read first)."""
        self.lease = lease
        self.home = lease.home
        self.proc, self.sandbox, self.channel = LeasedProcess(lease.pid, lease.pidfd), None, lease.channel
        lease.copy_log(self.log_path)
        await self._attach(lease.control, unread)

    async def _attach(self, control: socket.socket, unread: bytes = b"") -> None:
        if unread:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=protocol.LINE_LIMIT, loop=loop)
            reader.feed_data(unread)  # before the socket's own bytes: they came after
            transport, stream = await loop.connect_accepted_socket(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop), sock=control)
            self._writer = asyncio.StreamWriter(transport, stream, reader, loop)
        else:
            reader, self._writer = await asyncio.open_connection(sock=control, limit=protocol.LINE_LIMIT)
        self._reader = reader
        self.alive = True
        self.generation += 1
        self.loaded.clear()
        self.abandoned.clear()
        self._reader_task = asyncio.create_task(self._read(reader))
        self._watch_task = asyncio.create_task(self._watch(self.proc, self.generation))

    async def _watch(self, proc: subprocess.Popen, generation: int) -> None:
        """Worker death is seen from the process itself (a child it forked may keep the socket open), through a pidfd
        on the event loop: no thread per worker (one each had filled the default executor, starving template
        builds)."""
        code = await wait_for_exit(proc)
        if self.generation == generation and self.alive:
            self._fail_pending(f"environment worker {self.index} exited with {code} (log: {self.log_path})")

    async def _read(self, reader: asyncio.StreamReader) -> None:
        why = f"environment worker {self.index} exited (log: {self.log_path})"
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                try:
                    msg = protocol.decode(line)
                except (ValueError, RecursionError):  # not JSON, or nested past the decoder's depth
                    why = f"environment worker {self.index} sent a malformed answer (it is replaced)"
                    break
                if "id" not in msg and "event" in msg and self.on_event is not None:  # a served call's record
                    self.on_event(msg)
                    continue
                rid = msg.get("id")
                future = self.pending.pop(rid, None) if isinstance(rid, int) else None
                if future is None:
                    if isinstance(rid, int) and rid in self.abandoned:  # late: its caller gave up waiting
                        self.abandoned.discard(rid)
                        continue
                    # an honest worker answers each request once, and sends events only to a parent that takes them:
                    # anything else is the environment's code writing to the channel (each line costs the parent a
                    # parse of up to 16 MiB)
                    why = f"environment worker {self.index} sent an answer to no request (it is replaced)"
                    break
                if not future.done():
                    future.set_result(msg)
        except (ValueError, asyncio.LimitOverrunError):
            why = (f"environment worker {self.index} sent a line over {protocol.LINE_LIMIT} bytes (it is "
                   "replaced)")
        except (ConnectionError, OSError):
            pass
        finally:
            self._fail_pending(why)
            if "replaced" in why and self.proc is not None and self.proc.poll() is None:
                try:  # a worker that broke the protocol is not trusted with another request (its inside first:
                    # bubblewrap collects it and exits; its group only when there was nothing inside to kill)
                    if not kill_inside_first(self.proc.pid):
                        os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def _fail_pending(self, message: str) -> None:
        self.alive = False
        for future in self.pending.values():
            if not future.done():
                future.set_exception(WorkerError(message, "worker_died"))
        self.pending.clear()

    async def request(self, op: str, wait: float | None = None, **fields: Any) -> dict[str, Any]:
        """One request with a deadline (``wait``, else the op's default): a worker never hangs its caller."""
        wait = OP_DEADLINES.get(op, 60.0) if wait is None else wait
        if not self.alive or self._writer is None:
            raise WorkerError(f"environment worker {self.index} is not running", "worker_died")
        rid = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        self._writer.write(protocol.request(rid, op, **fields))
        await self._writer.drain()
        try:  # (not ``asyncio.wait_for``: in Python 3.11 it drops a cancel that lands as the answer comes — a stop)
            async with asyncio.timeout(wait):
                msg = await future
        except (asyncio.TimeoutError, TimeoutError):
            if self.pending.pop(rid, None) is not None:
                self.abandoned.add(rid)
            raise
        return protocol.result_of(msg)

    def detach(self) -> bytes:
        """Stop reading the worker (``lean_handoff``: another program reads it from now on): what was read of it and
        not yet taken, which that program takes first."""
        self._writer.transport.pause_reading()
        for task in (self._reader_task, self._watch_task):
            if task is not None:
                task.cancel()
        return bytes(self._reader._buffer)  # (StreamReader's own buffer: no public way to take what it holds)

    def kill(self) -> None:
        self.alive = False
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is not None:
            kill_tree(self.proc)
        if self._writer is not None:
            self._writer.close()
        if self.sandbox is not None:
            self.sandbox.cleanup()

    async def stop(self) -> None:
        if self.alive and self._writer is not None:
            try:
                self._writer.write(protocol.shutdown())
                await self._writer.drain()
                await asyncio.wait_for(wait_for_exit(self.proc), 3)
            except (OSError, asyncio.TimeoutError, TimeoutError):
                pass
        self.kill()


@dataclass
class LaunchedWorker:
    proc: subprocess.Popen
    sandbox: Sandbox
    control: socket.socket  # this side of the worker's protocol socket
    channel: socket.socket | None  # this side of its descriptor channel (``awm env serve``), when asked for


def launch_worker(index: int, home: Path, readable: list[str], channel: bool, output: Any) -> LaunchedWorker:
    """Start one worker sandbox writing only ``home`` (its stdout and stderr to ``output``)."""
    parent, child = socket.socketpair()
    argv = [sys.executable, "-m", "awm_engine.runtime.worker", "--fd", str(child.fileno())]
    passed = [child.fileno()]
    ours = inner = None
    if channel:
        ours, inner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setblocking(False)  # a worker that does not read never blocks the parent
        argv += ["--channel", str(inner.fileno())]
        passed.append(inner.fileno())
    sandbox = Sandbox(SandboxPolicy(writable=[str(home)], readable=readable, memory_mb=default_memory_mb("worker"),
                                    max_procs=256), f"worker{index}")
    try:
        proc = sandbox.popen(argv, pass_fds=passed, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                             cwd=str(home))
    except BaseException:
        parent.close()
        if ours is not None:
            ours.close()
        raise
    finally:
        child.close()
        if inner is not None:
            inner.close()
    return LaunchedWorker(proc, sandbox, parent, ours)


class LeasedProcess:
    """The ``Popen`` face of a worker another process (the warm service) started: seen through a pidfd, killed with
    its process group; its exit status is its parent's to collect (-1 here)."""

    def __init__(self, pid: int, pidfd: int | None = None):
        self.pid = pid
        self.returncode: int | None = None
        self._fd = pidfd  # from the service itself: never another process that got the pid later
        if self._fd is None:
            try:
                self._fd = os.pidfd_open(pid)
            except OSError:
                self.returncode = -1

    def poll(self) -> int | None:
        if self.returncode is None and self._fd is not None:
            import select

            if select.select([self._fd], [], [], 0)[0]:
                self._ended()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self._fd is not None:
            import select

            if not select.select([self._fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            self._ended()
        return self.returncode if self.returncode is not None else -1

    def kill(self) -> None:
        if self.poll() is None and self._fd is not None:
            # the inside first, collected by bubblewrap (``kill_inside_first``); its parent, the service, collects it
            if kill_inside_first(self.pid):
                try:
                    self.wait(INSIDE_FIRST_WAIT)
                except subprocess.TimeoutExpired:
                    pass
            if self._fd is None:
                return
            try:  # the sandbox's first process: everything inside dies with it (--die-with-parent, its pid namespace)
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass

    def _ended(self) -> None:
        self.returncode = -1
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


async def wait_for_exit(proc: subprocess.Popen) -> int:
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except (OSError, AttributeError):
        return await asyncio.to_thread(proc.wait)
    try:
        if proc.poll() is None:
            done = loop.create_future()
            loop.add_reader(fd, lambda: done.done() or done.set_result(None))
            try:
                await done
            finally:
                loop.remove_reader(fd)
    finally:
        os.close(fd)
    return proc.wait()


@dataclass
class TemplateState:
    """A scenario's current template in a pool, sealed: its digest taken in the parent, before any environment code
    ran, and checked by the worker on the copy it is given and before every episode copy."""

    path: Path
    report: BuildReport
    digest: str | None = None

    def __post_init__(self) -> None:
        if self.digest is None and self.path.is_file():
            import hashlib

            # (never blocked by a FIFO put there after the check: the warm service seals a template a server names)
            with open(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as fh:
                if stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    self.digest = hashlib.file_digest(fh, "sha256").hexdigest()


@dataclass
class EpisodeInfo:
    id: str
    scenario: str
    run_dir: Path  # where the databases end up (moved there when the episode closes)
    live_dir: Path  # where they are while the episode runs: inside its worker's own directory


class PoolEpisode:
    """An episode hosted by a worker process (implements ``episode.EpisodeHandle``)."""

    def __init__(self, pool: "EnvPool", scenario: Scenario, info: EpisodeInfo, worker: WorkerProcess,
                 tools: list[dict[str, Any]], shared: bool, schema_check: str = "reference"):
        self.pool = pool
        self.schema_check = schema_check
        self.scenario = scenario
        self.info = info
        self.worker = worker
        self.tools = tools
        self.shared = shared
        self.methods: dict[str, str] = {}
        self.task_idx: int | None = None
        self.template: dict[str, Any] | None = None  # when its template was built (``template_facts``)
        self.options: dict[str, Any] | None = None  # what a hosted environment's episode was opened with
        self.closed = False
        self.left_running = False  # a handler of this episode went on past its call's timeout (on_timeout="finish")
        self._closing: asyncio.Future | None = None

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def run_dir(self) -> Path:
        return self.info.run_dir

    @property
    def initial_db(self) -> Path:
        return (self.info.run_dir if self.closed else self.info.live_dir) / "initial.db"

    @property
    def final_db(self) -> Path:
        return (self.info.run_dir if self.closed else self.info.live_dir) / "final.db"

    def list_tools(self) -> list[dict[str, Any]]:
        return self.tools

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = None, on_timeout: str = "interrupt") -> ToolResult:
        timeout = self.pool.call_timeout if timeout is None else timeout
        if on_timeout not in ON_TIMEOUT:
            raise ValueError(f"on_timeout must be one of {', '.join(ON_TIMEOUT)}, not {on_timeout!r}")
        if self.closed:
            return ToolResult(f"Episode {self.id} is closed", True, error_kind="internal")
        try:
            await self.pool._ensure_attached(self)
        except (WorkerError, EnvLoadError, asyncio.TimeoutError, TimeoutError) as exc:  # an answer, never a raise
            return ToolResult(f"Error calling {name}: {exc}", True, error_kind="internal")
        generation = self.worker.generation
        try:
            async with self.worker.inflight:  # waiting here is back-pressure: no clock runs yet
                # the worker's own clock starts when the handler does; this one only guards a dead worker
                data = await self.worker.request("call", wait=None if timeout is None else timeout + KILL_GRACE
                                                 + QUEUE_ALLOWANCE, episode=self.id, tool=name,
                                                 arguments=arguments or {}, timeout=timeout,
                                                 **({"on_timeout": on_timeout} if on_timeout != "interrupt" else {}))
        except (asyncio.TimeoutError, TimeoutError):
            await self.pool._restart(self.worker, generation)
            return ToolResult(f"Error calling {name}: timed out after {timeout:.1f}s (the environment worker "
                              "was restarted)", True, error_kind="timeout", elapsed_ms=timeout * 1000)
        except WorkerError as exc:
            if exc.kind == "worker_died":
                await self.pool._restart(self.worker, generation)
            return ToolResult(f"Error calling {name}: {exc}", True, error_kind="internal", traceback=exc.traceback)
        try:  # the worker runs the environment's code: its answer is checked and cut here, not trusted
            data = protocol.call_answer(data)
        except protocol.MalformedAnswer as exc:
            await self.pool._restart(self.worker, generation)
            return ToolResult(f"Error calling {name}: environment worker {self.worker.index} sent a malformed answer "
                              f"({exc}); it was restarted", True, error_kind="internal")
        self.left_running = bool(data.pop("left_running"))  # close and reset wait for it in the worker
        if data.pop("stuck"):  # a handler thread would not stop: recycle the worker
            await self.pool._restart(self.worker, generation)
            data["text"] += " (the environment worker was restarted)"
        return caps.cap_result(ToolResult(**data), caps.DEFAULT_RESULT_CAP)

    async def reset(self) -> None:
        for attempt in (1, 2):
            await self.pool._ensure_attached(self)
            generation = self.worker.generation
            try:
                await self.worker.request("reset", episode=self.id, wait=self._settle_wait("reset"))
                self.left_running = False
                return
            except (asyncio.TimeoutError, TimeoutError):
                await self.pool._restart(self.worker, generation)
                raise WorkerError(f"environment worker {self.worker.index} did not reset the episode in time "
                                  "(the worker was restarted)", "timeout") from None
            except WorkerError as exc:
                if exc.kind != "worker_died" or attempt == 2:
                    raise
                await self.pool._restart(self.worker, generation)  # then re-attach and reset on the new one

    def _settle_wait(self, op: str) -> float:
        """The op's deadline, plus the time the worker may wait for a handler left running past a timeout."""
        return OP_DEADLINES[op] + (SETTLE_LIMIT + KILL_GRACE if self.left_running else 0.0)

    def snapshot(self, dest: Path | str) -> Path:
        if self.closed:
            return snapshot_database(self.final_db, dest)
        return _snapshot_live(self.worker.home, self.info.live_dir / "final.db", Path(dest))

    async def close(self) -> None:
        """Stop serving, then move ``initial.db`` and ``final.db`` from the worker's directory to ``run_dir``.
        Closing twice at once (a rollout's own close and the pool's, when an app quits mid-episode) does it once;
        every caller returns when the databases are in place."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        if self.closed:
            return
        self.worker.episodes.discard(self.id)
        self.pool.episodes.pop(self.id, None)
        if self.worker.alive:
            generation = self.worker.generation
            try:
                answer = await self.worker.request("close", episode=self.id, wait=self._settle_wait("close"))
            except (WorkerError, asyncio.TimeoutError, TimeoutError):
                answer = {}
            if answer.get("stuck"):  # its thread could still write final.db once moved: the worker goes first
                # (no longer among the pool's episodes, its databases are taken out of a leased worker's directory
                # by name: the warm service removes that directory with the lease)
                await self.pool._restart(self.worker, generation, closing=self)
        self.closed = True
        await asyncio.to_thread(_move_out, self)


BUILD_THREADS = 4
_build_executor = None


async def _in_build_thread(fn):
    """Template builds (and their digests) wait on threads of their own: a scenario's SQL may keep its sandboxed
    build busy until its timeout (600 s), and on the default executor a few such builds held up every other
    scenario's episode closes, template copies and results lines behind them."""
    global _build_executor
    if _build_executor is None:
        from concurrent.futures import ThreadPoolExecutor

        _build_executor = ThreadPoolExecutor(max_workers=BUILD_THREADS, thread_name_prefix="awm-build")
    return await asyncio.get_running_loop().run_in_executor(_build_executor, fn)


def _give_template(template: Path, home: Path, name: str) -> None:
    uid, gid = sandbox_ids()
    dfd = safe_fs.open_dir(home)
    try:
        safe_fs.copy_in(template, dfd, name, uid if os.geteuid() == 0 else None, gid)
    finally:
        os.close(dfd)


def _discard(home: Path, name: str) -> None:
    try:
        dfd = safe_fs.open_dir(home)
    except OSError:
        return
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _hosted_readable(scenario: Any) -> list[str]:
    """What a hosted environment reads: the paths its hosted config names (a τ² domain's data directory)."""
    config = (getattr(scenario, "hosted", None) or {}).get("config") or {}
    return [v for k, v in config.items() if isinstance(v, str) and k.endswith(("_dir", "_db", "path")) and
            os.path.exists(v)]


def _snapshot_live(home: Path, path: Path, dest: Path) -> Path:
    """A consistent copy of a live database in a worker's directory, opened through a checked descriptor."""
    dfd = safe_fs.open_dir(home, path.parent.relative_to(home))
    try:
        fd = safe_fs.open_regular(dfd, path.name, f"{path.parent}/")
    finally:
        os.close(dfd)
    try:
        return snapshot_database(Path(f"/proc/self/fd/{fd}"), dest)
    finally:
        os.close(fd)


DB_FILES = ("initial.db", "final.db", "final.db-journal", "final.db-wal", "final.db-shm")
# what one episode's databases may take out of its sandbox, together: they stay in the run directory (and a verifier
# gets copies of two in a tmpfs), so a worker refilling its 1 GiB directory for every episode would otherwise fill
# the host's disk (and memory) one episode at a time
EPISODE_DB_MB = int(os.environ.get("AWM_EPISODE_DB_MB") or 256)


JOURNAL_MAGIC = bytes([0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7])


def names_super_journal(journal: Path) -> bool:
    """Whether the rollback journal ``journal`` (a copy the parent made) ends with a super-journal record: the name
    of a file SQLite deletes after rolling the journal back (once none of the journals that file lists is hot) —
    a journal the sandbox wrote can name any file. Only a transaction over several attached databases writes one;
    an episode's own journal never has one."""
    try:
        with open(journal, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() < 16:
                return False
            fh.seek(-8, os.SEEK_END)
            return fh.read(8) == JOURNAL_MAGIC
    except OSError:
        return True


def _move_databases(home: Path, live: Path, run_dir: Path) -> None:
    """Take the episode's databases out of its worker's directory into ``run_dir`` — through descriptors, refusing
    symlinks, hard links and special files (``safe_fs``): the sandbox could have rigged any entry below ``home``."""
    if live == run_dir or not live.is_relative_to(home):  # (not below home: taken out when its worker changed)
        return
    try:
        dfd = safe_fs.open_dir(home, live.relative_to(home))
    except FileNotFoundError:
        return
    except safe_fs.UnsafeEntry as exc:  # the episode's directory itself was swapped: nothing is taken from it
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "unsafe_entries.txt").write_text(f"{exc}\n")
        return
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        problems = []
        room = EPISODE_DB_MB << 20
        for name in DB_FILES:
            try:
                if safe_fs.take_file(dfd, name, run_dir / name, f"{live}/", max_size=room):
                    room -= (run_dir / name).stat().st_size
                    if name.endswith("-journal") and names_super_journal(run_dir / name):
                        (run_dir / name).unlink()
                        problems.append(f"{live}/{name} names a super-journal (refused: SQLite, rolling it back "
                                        "where the database is opened read-write, would delete the file it names)")
            except safe_fs.TooLarge as exc:
                problems.append(f"{exc} (an episode's databases take at most {EPISODE_DB_MB} MiB together out of "
                                "its sandbox: AWM_EPISODE_DB_MB)")
            except safe_fs.UnsafeEntry as exc:
                problems.append(str(exc))
        if problems:
            (run_dir / "unsafe_entries.txt").write_text("\n".join(problems) + "\n")
    finally:
        os.close(dfd)
    # removed through its parent's descriptor: a path walk could follow a symlink swapped in meanwhile
    try:
        parent = safe_fs.open_dir(home, live.parent.relative_to(home))
    except OSError:
        return
    try:
        safe_fs.remove_below(parent, live.name)
    finally:
        os.close(parent)


class EnvPool:
    """``async with EnvPool() as pool: ep = await pool.open_episode(scenario)``.

    ``schema_check`` (``reference`` or ``robust``) is how episodes treat tools whose input schema is not valid
    JSON Schema (``runtime.episode.SCHEMA_CHECKS``); ``open_episode`` may choose per episode."""

    def __init__(self, workers: int | None = None, call_timeout: float = DEFAULT_CALL_TIMEOUT,
                 workdir: Path | str | None = None, templates: TemplateCache | None = None,
                 log_path: Path | str | None = None, schema_check: str = "reference",
                 load_timeout: float | None = None, max_inflight: int = MAX_INFLIGHT, max_loaded: int = MAX_LOADED,
                 spares: int | None = None, max_sandboxes: int = MAX_SANDBOXES, serve_channel: bool = False,
                 warm: bool = False):
        self.n_workers = workers or 1  # sandboxes per scenario
        self.serve_channel = serve_channel  # workers get a descriptor channel (``awm env serve``: mcp_http)
        # the first worker comes from the warm service when it has one ready (``runtime.warm``; awm env serve)
        self.warm_service = warm
        self._lease: Any = None
        self._started_service = False  # ``start`` found no warm service and started one
        self.n_spares = self.n_workers if spares is None else spares  # pre-started, not yet bound to a scenario
        self.max_sandboxes = max(max_sandboxes, self.n_workers)
        self._indexes = itertools.count()
        self._binding: dict[str, asyncio.Lock] = {}
        self._spare_tasks: set[asyncio.Task] = set()
        self.call_timeout = call_timeout
        self.schema_check = check_schema_check(schema_check)
        self._own_workdir = workdir is None
        # a directory of its own marked with this process's pid and start time: if the process is killed, the next
        # pool start of any awm process removes it (``owned.sweep_dead_dirs``)
        self.workdir = Path(workdir) if workdir else owned.owned_dir("awm_pool_")
        self.templates = templates or TemplateCache()
        self.log_path = Path(log_path) if log_path else None
        self.load_timeout = load_timeout or float(os.environ.get("AWM_LOAD_TIMEOUT") or LOAD_TIMEOUT)
        self.max_inflight = max_inflight
        self.max_loaded = max_loaded
        self._ready: dict[tuple[str, str], list[PoolEpisode]] = {}  # prefetched episodes, per (scenario, check)
        self._prefetching: set[asyncio.Task] = set()
        self.broken: dict[str, str] = {}  # scenario -> why it cannot be loaded (remembered: later opens fail fast)
        self.workers: list[WorkerProcess] = []
        self.episodes: dict[str, PoolEpisode] = {}
        self._restart_lock = asyncio.Lock()
        self._templates: dict[str, TemplateState] = {}
        self._template_locks: dict[str, asyncio.Lock] = {}
        self._refreshing: dict[str, asyncio.Task] = {}

    async def __aenter__(self) -> "EnvPool":
        try:
            await self.start()
        except BaseException:  # a sandbox refusal (SandboxUnavailable), a signal: nothing may stay behind
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self, warm_for: Scenario | None = None) -> None:
        """``warm_for``: the scenario this pool's first worker will serve — a spare the warm service bound to it
        ahead (``bind_next``) is taken when there is one, else its unbound spare."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.warm_service and self.serve_channel:
            from awm_engine.runtime import warm

            recipe = await self._recipe(warm_for) if warm_for is not None else None
            live: list = []
            try:
                self._lease = await asyncio.to_thread(warm.take, warm.TAKE_TIMEOUT, recipe, live)
            except asyncio.CancelledError:  # interrupted while the take waits (for a prepared load): it ends now,
                warm.cancel_take(live)  # not up to TAKE_TIMEOUT later (asyncio.run waits for its thread)
                raise
            if self._lease is not None and not host.adopt_measurement(self._lease.protections):
                self._lease.close()
                self._lease = None
            if self._lease is None:  # so that the next server finds one
                await asyncio.to_thread(warm.ensure_service)
                self._started_service = True
        host.warn_once()
        limits.sweep_stale_quota_mounts()  # first: a dead process's directories still have its workers' mounts
        await asyncio.to_thread(owned.sweep_dead_dirs)
        for _ in range(self.n_spares):
            await self._new_worker()

    async def _recipe(self, scenario: Scenario) -> str | None:
        """What a spare bound ahead to ``scenario`` must have been loaded from (``warm.recipe_id``); None for what
        is never bound ahead (hosted environments, code that is missing, a template that does not build)."""
        from awm_engine.runtime import warm

        if is_hosted(scenario) or scenario.code is None or scenario.key in self.broken:
            return None
        try:
            template = await self._template(scenario)
        except Exception:  # noqa: BLE001 - the open that follows says what is wrong
            return None
        return warm.recipe_id(scenario.key, scenario.code, template.digest, template.report.built_at)

    async def bind_next(self, scenario: Scenario) -> bool:
        """Ask the warm service for a spare bound to ``scenario`` ahead of the next server of it (its module
        loaded: that server skips the load). Bound for at most the template's maximum age (its module's
        import-time state no older than a template's), never past the service's idle time."""
        from awm_engine.runtime import warm

        if not (self.warm_service and self.serve_channel) or is_hosted(scenario) or scenario.code is None:
            return False
        template = self._templates.get(scenario.key)
        if template is None:
            return False
        recipe = warm.recipe_id(scenario.key, scenario.code, template.digest, template.report.built_at)
        load = {"scenario": scenario.key, "code": scenario.code, "template_built_at": template.report.built_at,
                "template_digest": template.digest}
        max_age = min(self.templates.max_age, float(os.environ.get(warm.ENV_IDLE) or warm.IDLE))
        if not max_age > 0:  # templates built for every episode: a module loaded ahead is never young enough
            return False
        # a pool that took no worker from the service started one (``start``): it may not listen yet, so it is
        # asked again for a while (here, not in the thread: a stop meanwhile ends the wait at once)
        deadline = time.monotonic() + (warm.SERVICE_START_WAIT if self._started_service else 0.0)
        while True:
            taken = await asyncio.to_thread(warm.bind_next, recipe, load, str(template.path), max_age)
            if taken is not None or time.monotonic() >= deadline:
                return bool(taken)
            await asyncio.sleep(0.2)

    async def _new_worker(self, readable: list[str] | None = None) -> WorkerProcess:
        """Start one more worker sandbox (a spare until ``_bind``)."""
        i = next(self._indexes)
        log = self.log_path if (self.log_path and self.n_workers == 1 and i == 0) else self.workdir / f"worker-{i}.log"
        worker = WorkerProcess(i, log, self.workdir / f"w{i}", readable, channel=self.serve_channel)
        worker.inflight = asyncio.Semaphore(self.max_inflight)
        self.workers.append(worker)
        lease, self._lease = (self._lease, None) if not readable else (None, self._lease)
        try:
            if lease is not None:
                await worker.adopt(lease)
            else:
                await worker.start()
        except BaseException:
            self.workers.remove(worker)
            worker.kill()
            worker.release_home()
            raise
        return worker

    def _refill_spares(self) -> None:
        spares = [w for w in self.workers if w.scenario is None]
        if len(spares) + len(self._spare_tasks) < min(1, self.n_spares):
            task = asyncio.ensure_future(self._new_worker())
            self._spare_tasks.add(task)
            task.add_done_callback(self._spare_tasks.discard)

    async def _workers_for(self, scenario: Scenario) -> list[WorkerProcess]:
        """The sandboxes of ``scenario``: bound on first use (a spare, or a new one; a hosted scenario always gets
        a new one that can read its data), up to ``n_workers``; idle sandboxes of other scenarios stop beyond
        ``max_sandboxes``."""
        key = scenario.key
        mine = [w for w in self.workers if w.scenario == key]
        if len(mine) >= self.n_workers:
            return mine
        async with self._binding.setdefault(key, asyncio.Lock()):
            mine = [w for w in self.workers if w.scenario == key]
            hosted = is_hosted(scenario)
            readable = _hosted_readable(scenario) if hosted else []
            while len(mine) < self.n_workers:
                spare = next((w for w in self.workers if w.scenario is None and w.alive and not hosted), None)
                worker = spare or await self._new_worker(readable)
                worker.scenario = key
                mine.append(worker)
            self._refill_spares()
            await self._evict(keep=key)
        return mine

    async def _evict(self, keep: str) -> None:
        bound = [w for w in self.workers if w.scenario is not None]
        idle = sorted((w for w in bound if w.scenario != keep and not w.episodes and not w.opening
                       and not any(e.worker is w for e in self.episodes.values())),
                      key=lambda w: max(w.last_used.values(), default=0.0))
        while len([w for w in self.workers if w.scenario is not None]) > self.max_sandboxes and idle:
            victim = idle.pop(0)
            self.workers.remove(victim)
            for ready in self._ready.values():
                for episode in [e for e in ready if e.worker is victim]:
                    ready.remove(episode)
            await victim.stop()
            victim.release_home()
            if victim.log_path != self.log_path:  # its log goes with it: the logs of a long run stay bounded
                victim.log_path.unlink(missing_ok=True)

    async def close(self) -> None:
        for task in [*self._refreshing.values(), *self._prefetching, *self._spare_tasks]:
            task.cancel()
        for ready in self._ready.values():
            for episode in ready:
                episode.info.run_dir = episode.info.live_dir  # never handed out: nothing to move
        self._ready.clear()
        for episode in list(self.episodes.values()):
            await episode.close()
        await asyncio.gather(*(w.stop() for w in self.workers))
        for worker in self.workers:
            worker.release_home()
        if self._lease is not None:  # taken but never used
            self._lease.close()
            self._lease = None
        if self._own_workdir:
            safe_fs.remove_tree(self.workdir)

    async def _template(self, scenario: Scenario) -> TemplateState:
        """The scenario's template: built on first use, built again before use once it expired, and built again
        in the background once past half its maximum age (then loaded by the workers hosting the scenario,
        while the current one is still handed out). Templates without time dependence never expire."""
        key = scenario.key
        state = self._templates.get(key)
        if state is None or self.templates.expired(state.report):
            async with self._template_locks.setdefault(key, asyncio.Lock()):
                state = self._templates.get(key)
                if state is None or self.templates.expired(state.report):
                    state = self._templates[key] = await _in_build_thread(
                        lambda: TemplateState(*self.templates.get(scenario)))
        elif self.templates.due(state.report) and key not in self._refreshing:
            self._refreshing[key] = asyncio.create_task(self._refresh(scenario, state))
        return state

    async def _refresh(self, scenario: Scenario, state: TemplateState) -> None:
        key = scenario.key
        try:
            fresh = await _in_build_thread(
                lambda: TemplateState(*self.templates.get(scenario, False, state.report.built_at)))
            async with self._template_locks.setdefault(key, asyncio.Lock()):
                if self._templates.get(key) is state:
                    self._templates[key] = fresh
            for worker in [w for w in self.workers if w.alive and key in w.loaded]:
                await self._load(worker, scenario)
        except Exception:  # noqa: BLE001 - an expired template is built again before its next use anyway
            pass
        finally:
            self._refreshing.pop(key, None)

    async def _load(self, worker: WorkerProcess, scenario: Scenario) -> dict[str, Any]:
        if scenario.key in self.broken:  # failed to load before (e.g. its import never finished): fail fast
            raise EnvLoadError(self.broken[scenario.key], scenario.key)
        if is_hosted(scenario):  # an environment awm implements itself: no code, no template (hosted.py)
            return await self._load_hosted(worker, scenario)
        template = await self._template(scenario)
        built_at = template.report.built_at
        lock = worker.load_locks.setdefault(scenario.key, asyncio.Lock())
        async with lock:
            loaded = worker.loaded.get(scenario.key)
            if loaded is None:
                await self._make_room(worker, scenario.key)
            if loaded is None or loaded.get("template_built_at") != built_at:
                code = scenario.code
                if code is None:
                    raise EnvLoadError(f"{scenario.key}: no environment code", scenario.key)
                report = template.report
                if report.fatal and "schema only" not in report.fatal and report.tables_ok == 0:
                    raise EnvLoadError(f"{scenario.key}: database build failed: {report.fatal}", scenario.key)
                generation = worker.generation
                incoming = f"incoming-{uuid.uuid4().hex[:12]}.db"
                try:
                    # the sealed template goes into the worker's own directory (created there, never followed)
                    await asyncio.to_thread(_give_template, template.path, worker.home, incoming)
                    worker.loaded[scenario.key] = protocol.load_answer(await worker.request(
                        "load", wait=self.load_timeout, scenario=scenario.key, code=code,
                        template=str(worker.home / incoming), template_built_at=built_at, workdir=str(worker.home),
                        template_digest=template.digest))
                except (asyncio.TimeoutError, TimeoutError):
                    message = (f"{scenario.key}: the environment did not finish loading within "
                               f"{self.load_timeout:.0f}s (its code loops or sleeps at import); the worker was "
                               "replaced")
                    self.broken[scenario.key] = message
                    await self._restart(worker, generation)
                    raise EnvLoadError(message, scenario.key) from None
                except WorkerError as exc:
                    if exc.kind == "worker_died":
                        self.broken[scenario.key] = f"{scenario.key}: the worker died while loading it: {exc}"
                        await self._restart(worker, generation)
                    raise EnvLoadError(f"{scenario.key}: {exc}", scenario.key) from None
                except protocol.MalformedAnswer as exc:  # the environment's code answered for the worker
                    message = f"{scenario.key}: environment worker {worker.index} sent a malformed answer: {exc}"
                    self.broken[scenario.key] = message
                    await self._restart(worker, generation)
                    raise EnvLoadError(message, scenario.key) from None
                finally:
                    await asyncio.to_thread(_discard, worker.home, incoming)
        return worker.loaded[scenario.key]

    async def _make_room(self, worker: WorkerProcess, keep: str) -> None:
        """Unload least recently used scenarios (with no open episode here) beyond ``max_loaded``."""
        busy = {e.scenario.key for e in self.episodes.values() if e.worker is worker}
        idle = sorted((k for k in worker.loaded if k not in busy and k != keep),
                      key=lambda k: worker.last_used.get(k, 0.0))
        while len(worker.loaded) >= self.max_loaded and idle:
            victim = idle.pop(0)
            worker.loaded.pop(victim, None)
            worker.last_used.pop(victim, None)
            try:
                await worker.request("unload", scenario=victim)
            except (WorkerError, asyncio.TimeoutError, TimeoutError):
                pass

    async def _load_hosted(self, worker: WorkerProcess, scenario: Any) -> dict[str, Any]:
        async with worker.load_locks.setdefault(scenario.key, asyncio.Lock()):
            if scenario.key not in worker.loaded:
                await self._make_room(worker, scenario.key)
                try:
                    worker.loaded[scenario.key] = protocol.load_answer(await worker.request(
                        "load", wait=self.load_timeout, scenario=scenario.key, hosted=scenario.hosted,
                        workdir=str(worker.home)))
                except (WorkerError, protocol.MalformedAnswer, asyncio.TimeoutError, TimeoutError) as exc:
                    raise EnvLoadError(f"{scenario.key}: {exc or 'the environment did not load in time'}",
                                       scenario.key) from None
        return worker.loaded[scenario.key]

    async def load(self, scenario: Scenario) -> dict[str, Any]:
        """Load a scenario on one worker (e.g. to list its tools); raises EnvLoadError for broken code."""
        return await self._load(await self._pick(scenario), scenario)

    async def warm(self, scenario: Scenario) -> dict[int, float]:
        """Load ``scenario`` on every worker now (its template built first), so that no episode open pays for a
        first load later: seconds each worker took to load it, by worker index (0.0 where it already was).
        Raises EnvLoadError for code that does not load."""
        if not is_hosted(scenario) and scenario.key not in self.broken:
            await self._template(scenario)

        async def one(worker: WorkerProcess) -> tuple[int, float]:
            started = time.perf_counter()
            await self._load(worker, scenario)
            worker.last_used[scenario.key] = time.monotonic()
            return worker.index, time.perf_counter() - started

        return dict(await asyncio.gather(*(one(w) for w in await self._workers_for(scenario) if w.alive)))

    async def _pick(self, scenario: Scenario) -> WorkerProcess:
        """The scenario's least-loaded sandbox, counting episodes still being opened (so a burst spreads evenly)."""
        mine = await self._workers_for(scenario)
        alive = [w for w in mine if w.alive] or mine
        return min(alive, key=lambda w: (len(w.episodes) + w.opening, scenario.key not in w.loaded, w.index))

    async def open_episode(self, scenario: Scenario, run_dir: Path | str | None = None,
                           episode_id: str | None = None, task_idx: int | None = None,
                           attach: bool = False, schema_check: str | None = None,
                           options: dict[str, Any] | None = None) -> PoolEpisode:
        """An isolated episode: its own ``initial.db`` and working ``final.db`` in ``run_dir`` (with
        ``attach``, the databases already in ``run_dir`` are used as they are); ``schema_check`` overrides
        the pool's for this episode; ``options`` go to a hosted environment's episode (e.g. its task)."""
        if task_idx is not None:
            scenario.task(task_idx)  # IndexError for a task that does not exist
        schema_check = self.schema_check if schema_check is None else check_schema_check(schema_check)
        ready = self._ready.get((scenario.key, schema_check))
        while ready and not attach and options is None:  # a prefetched episode: handed out at once
            episode = ready.pop()
            if episode.closed:
                continue
            if run_dir is not None:
                episode.info.run_dir = Path(run_dir)
            episode.task_idx = task_idx
            self.episodes[episode.id] = episode
            return episode
        worker = await self._pick(scenario)
        worker.opening += 1
        try:
            loaded = await self._load(worker, scenario)
            episode_id = episode_id or uuid.uuid4().hex[:12]
            live = worker.home / "episodes" / episode_id
            # without a run directory the databases still leave the sandbox's directory when the episode closes
            run_dir = Path(run_dir) if run_dir else self.workdir / "episodes" / episode_id
            if attach:  # continue from the databases already in run_dir
                await asyncio.to_thread(_copy_databases, run_dir, worker.home, live)
            extra = {"options": options} if options is not None else {}
            opened_on = worker.generation
            try:
                data = await worker.request("open", scenario=scenario.key, run_dir=str(live), episode=episode_id,
                                            attach=attach, schema_check=schema_check, **extra)
            except WorkerError as exc:
                # a worker that died before it answered (its death seen only now: what an earlier episode's code
                # did to it, or a kill) is replaced and asked once more; a new episode has nothing on it yet
                retry = exc.kind == "TemplateTampered" or (exc.kind == "worker_died" and not attach)
                if not retry:
                    raise EnvLoadError(f"{scenario.key}: the episode could not be opened: {exc}",
                                       scenario.key) from None
                # (TemplateTampered: earlier code wrote to what episodes start from: a fresh worker loads it again)
                await self._restart(worker, opened_on)
                loaded = await self._load(worker, scenario)
                opened_on = worker.generation
                try:
                    data = await worker.request("open", scenario=scenario.key, run_dir=str(live), episode=episode_id,
                                                attach=attach, schema_check=schema_check, **extra)
                except WorkerError as again:
                    raise EnvLoadError(f"{scenario.key}: the episode could not be opened: {again}",
                                       scenario.key) from None
        finally:
            worker.opening -= 1
        info = EpisodeInfo(episode_id, scenario.key, run_dir, live)
        episode = PoolEpisode(self, scenario, info, worker, loaded["tools"], loaded["shared"], schema_check)
        episode.methods = loaded.get("methods", {})
        episode.task_idx = task_idx
        episode.options = options
        if scenario.key in self._templates:
            built = data.get("template_built_at") if isinstance(data, dict) else None  # the worker's: checked
            episode.template = template_facts(self._templates[scenario.key].report, built if isinstance(
                built, (int, float)) and not isinstance(built, bool) else None)
        worker.episodes.add(episode_id)
        if worker.attached is not None and worker.generation == opened_on:  # opened on this very worker
            worker.attached.add(episode_id)
        worker.last_used[scenario.key] = time.monotonic()
        self.episodes[episode_id] = episode
        if worker.lease is not None:  # should this process die, the service moves them there, never removes them
            worker.lease.keep_databases(live, run_dir)
        return episode

    def prefetch(self, scenario: Scenario, count: int, schema_check: str | None = None) -> asyncio.Task:
        """Open ``count`` episodes of ``scenario`` ahead, in the background; ``open_episode`` then hands them
        out at once (the RL loop prefetches the next batch while the current one runs). Returns the task."""
        check = self.schema_check if schema_check is None else check_schema_check(schema_check)

        async def fill() -> None:
            opened = await asyncio.gather(*(self.open_episode(scenario, schema_check=check) for _ in range(count)),
                                          return_exceptions=True)
            ready = self._ready.setdefault((scenario.key, check), [])
            for episode in opened:
                if isinstance(episode, PoolEpisode):
                    self.episodes.pop(episode.id, None)  # not in use until handed out
                    ready.append(episode)

        task = asyncio.create_task(fill())
        self._prefetching.add(task)
        task.add_done_callback(self._prefetching.discard)
        return task

    def ready_count(self, scenario: Scenario, schema_check: str | None = None) -> int:
        check = self.schema_check if schema_check is None else check_schema_check(schema_check)
        return len(self._ready.get((scenario.key, check), []))

    async def _restart(self, worker: WorkerProcess, generation: int | None = None,
                       closing: PoolEpisode | None = None) -> None:
        """Kill and start ``worker`` again, unless someone already did since ``generation``. ``closing``: an episode
        of it being closed (its databases go to its run directory, never into the new worker's)."""
        async with self._restart_lock:
            if generation is not None and worker.generation != generation and worker.alive:
                return
            worker.kill()
            leased = self._episodes_of(worker) if worker.lease is not None else []
            if closing is not None and worker.lease is not None:
                closing.closed = True  # (``_bring_in`` leaves it out; ``_move_out`` finds nothing left to move)
                leased.append(closing)
            if leased:  # the warm service removes a leased worker's directory with its lease: the databases go first
                await asyncio.to_thread(_take_out, worker.home, leased)
            await worker.start()
            worker.attached = set()
            if leased:  # into the new worker's own directory, where the episodes are attached again
                await asyncio.to_thread(_bring_in, worker.home, leased)

    def _episodes_of(self, worker: WorkerProcess) -> list[PoolEpisode]:
        ready = [e for episodes in self._ready.values() for e in episodes]
        return [e for e in [*self.episodes.values(), *ready] if e.worker is worker and not e.closed]

    async def _ensure_attached(self, episode: PoolEpisode) -> None:
        """After a worker restart, re-open the episode on its existing databases (state is on disk). A worker that
        dies in the meantime (its death seen only now) is replaced once more and the episode opened there."""
        worker = episode.worker
        for attempt in (1, 2):
            if not worker.alive:
                await self._restart(worker, worker.generation)
            attached, generation = worker.attached, worker.generation
            if attached is None or episode.id in attached:
                return
            try:
                await self._load(worker, episode.scenario)
                extra = {"options": episode.options} if episode.options is not None else {}
                await worker.request("open", scenario=episode.scenario.key, run_dir=str(episode.info.live_dir),
                                     episode=episode.id, attach=True, schema_check=episode.schema_check, **extra)
            except WorkerError as exc:
                if exc.kind != "worker_died" or attempt == 2:
                    raise
                await self._restart(worker, generation)
                continue
            if worker.generation == generation:  # (else it was opened on a worker that is gone: again, next time)
                attached.add(episode.id)
            return


_MOVES = [threading.Lock() for _ in range(64)]  # one episode's databases move (out, in) one at a time


def _moving(episode: PoolEpisode) -> threading.Lock:
    return _MOVES[hash(str(episode.info.run_dir)) % len(_MOVES)]


def _move_out(episode: PoolEpisode) -> None:
    """A closed episode's databases into its run directory, from wherever they live now (its worker's directory,
    or the one a replaced leased worker had: ``_take_out`` emptied that one)."""
    with _moving(episode):
        live, worker = episode.info.live_dir, episode.worker
        home = next((h for h in (worker.home, worker.own_home) if live.is_relative_to(h)), None)
        if home is not None:
            _move_databases(home, live, episode.info.run_dir)


def _take_out(home: Path, episodes: list[PoolEpisode]) -> None:
    """The databases of ``episodes`` (their journals too) out of a leased worker's directory into their run
    directories: the directory goes with the lease, the episodes go on in the next worker (``_bring_in``)."""
    for episode in episodes:
        with _moving(episode):
            if episode.info.live_dir != episode.info.run_dir:
                _move_databases(home, episode.info.live_dir, episode.info.run_dir)


def _bring_in(home: Path, episodes: list[PoolEpisode]) -> None:
    """``_take_out``'s databases into the new worker's directory ``home``, where the episodes live from now on."""
    for episode in episodes:
        with _moving(episode):
            if episode.info.live_dir == episode.info.run_dir or episode.closed:
                continue
            live = home / "episodes" / episode.id
            _copy_databases(episode.info.run_dir, home, live, DB_FILES)
            episode.info.live_dir = live
            for name in DB_FILES[2:]:  # a journal stays only beside the database it belongs to
                (episode.info.run_dir / name).unlink(missing_ok=True)


def _copy_databases(src: Path, home: Path, live: Path, names: tuple[str, ...] = ("initial.db", "final.db")) -> None:
    """An attached episode's databases (from its run directory, the parent's) into a new directory of the worker's
    own, created without following anything the sandbox may have put there."""
    uid, gid = sandbox_ids()
    own = os.geteuid() == 0
    dfd = safe_fs.open_dir(home)
    try:
        for part in live.relative_to(home).parts:
            try:
                nxt = safe_fs.make_dir(dfd, part, uid if own else None, gid if own else None)
            except FileExistsError:
                nxt = os.open(part, safe_fs.DIR_FLAGS, dir_fd=dfd)  # a symlink there is refused (ELOOP)
            os.close(dfd)
            dfd = nxt
        for name in names:
            if (src / name).is_file():
                safe_fs.copy_in(src / name, dfd, name, uid if own else None, gid if own else None)
    finally:
        os.close(dfd)
