"""Verifier hosts: one sandbox per scenario serves that scenario's verifications, each verifier in a fresh process.

Starting a sandbox and a Python for each verifier costs about 0.1 s; a host (``verify/host.py``) pays it once per
scenario and forks each verifier from a runner that holds nothing of any task (``sandbox/forkrunner``, the fork
runner BFCL's multi-turn execution runs on). Isolation between two verifiers of one host rests on each child's own
Landlock domain (reads only Python and its own job directory, writes nothing, signals nothing outside itself) and
on the sandbox's system-call filter, so a host is used only where the host measured all of them to hold
(``usable``); elsewhere, and for verifiers whose code starts threads or processes (``needs_own_sandbox``: a host's
child may start neither), each verifier gets a sandbox of its own, as before. ``AWM_VERIFIER_HOST=0`` turns hosts
off. Which way a verification ran is its outcome's ``runner`` (``host`` | ``sandbox``).

The parent makes each job's directory below the host's (``safe_fs``: never following anything sandboxed code could
have put there), copies the two databases in read-only, sends the request and removes the directory when the answer
is in. A host that dies fails the verifications it was running (``crashed``) and is replaced on the next request;
one idle for ``IDLE_SECONDS`` ends, and every host ends with this process.
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from awm_engine.sandbox import host as sandbox_host
from awm_engine.sandbox import limits, safe_fs
from awm_engine.sandbox.launcher import (
    FORK_HOST_FILES,
    Sandbox,
    SandboxPolicy,
    kill_tree,
    private_dir,
    remove_dir,
    sandbox_ids,
)

ENV_SWITCH = "AWM_VERIFIER_HOST"
OFF, ON = ("0", "false", "no", "off"), ("1", "true", "yes", "on")
IDLE_SECONDS = 60.0
ANSWER_GRACE = 30.0  # beyond a verifier's own timeout (and its wait for a turn), how long the parent waits
REQUIRED = ("namespaces", "filesystem_view", "syscall_filter", "writes_confined", "signals_scoped", "proc_isolated")
# a verifier whose code may start a thread or a process: a host's child can do neither
OWN_SANDBOX = re.compile(r"\b(threading|_thread|subprocess|multiprocessing|concurrent|asyncio|pty|os\.(fork|forkpty|"
                         r"system|popen|spawn\w*|exec\w*|posix_spawn\w*))\b")


def usable() -> tuple[bool, str]:
    """Whether verifications may share a host here, and if not, why."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if value in OFF:
        return False, f"{ENV_SWITCH}={os.environ[ENV_SWITCH]}"
    if value not in ("", *ON):  # not a value it knows: the slower way, which is never less isolated
        return False, f"{ENV_SWITCH}={os.environ[ENV_SWITCH]!r} is neither on (1) nor off (0)"
    protections = sandbox_host.protections()
    missing = [name for name in REQUIRED if not getattr(protections, name)]
    if protections.unsafe_no_sandbox or missing:
        return False, "missing protections: " + ", ".join(missing or ["namespaces"])
    from awm_engine.sandbox import landlock

    if landlock.abi_version() < 6:
        return False, "Landlock ABI < 6 (no signal scoping)"
    return True, ""


def needs_own_sandbox(code: str) -> bool:
    return bool(OWN_SANDBOX.search(code or ""))


class HostGone(Exception):
    """The host ended (or could not start): the verifications it held have no answer."""


class VerifierHost:
    """One sandboxed ``verify/host.py`` and the jobs sent to it."""

    def __init__(self, key: str, memory_mb: int | None, parallel: int = 4):
        self.key, self.parallel = key, parallel
        self.work = private_dir("awm_vhost_")
        uid, gid = sandbox_ids()
        self.quota = limits.mount_quota(self.work, limits.DISK_MB * parallel, uid, gid)
        safe_fs.mark_untrusted(self.work)
        per_job = (memory_mb or 1024) + 128
        self.sandbox = Sandbox(SandboxPolicy(writable=[str(self.work)], memory_mb=per_job * parallel + 512,
                                             max_procs=64 + 8 * parallel, env={"AWM_VERIFIER_PARALLEL": str(parallel)},
                                             open_files_hard=FORK_HOST_FILES),
                               "verifiers")
        self.lock = threading.Lock()
        self.pending: dict[str, Future] = {}
        self.last_used = time.monotonic()
        self.closed = False
        try:
            self.proc = self.sandbox.popen([sys.executable, "-m", "awm_engine.verify.host", str(self.work)],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except BaseException:
            self._remove()
            raise
        threading.Thread(target=self._read, daemon=True, name=f"awm-vhost-{key}").start()

    def _read(self) -> None:
        limit = 64 << 20  # above the host's own cap on an answer line: a longer one means the host is broken
        try:
            for raw in iter(lambda: self.proc.stdout.readline(limit), b""):
                if not raw.endswith(b"\n"):
                    break  # cut (or the end): nothing after it is read as an answer
                rid, _, body = raw.strip().partition(b" ")
                with self.lock:
                    future = self.pending.pop(rid.decode(errors="replace"), None)
                if future is None:
                    continue
                try:
                    answer = json.loads(body)
                except (ValueError, RecursionError):
                    answer = None
                if isinstance(answer, dict):
                    future.set_result(answer)
                else:
                    future.set_exception(HostGone("the verifier host's answer is not JSON"))
        finally:
            self.closed = True
            with self.lock:
                left, self.pending = list(self.pending.values()), {}
            for future in left:
                if not future.done():
                    future.set_exception(HostGone("the verifier host ended"))

    @property
    def alive(self) -> bool:
        return not self.closed and self.proc.poll() is None

    def run(self, request: dict[str, Any], initial_db: Path, final_db: Path, timeout: float) -> dict[str, Any]:
        """The host's answer for one verification: ``{"status": "answer", "result": …}`` (the child's verdict
        dict) or ``{"status": "host", "kind": "timeout" | "crashed" | "db_missing", "error": …}``."""
        self.last_used = time.monotonic()
        job = uuid.uuid4().hex
        root = safe_fs.open_dir(self.work)
        try:
            job_fd = safe_fs.make_dir(root, job)  # awm's: the sandbox's uid may read and enter it, change nothing
            try:
                os.fchmod(job_fd, 0o755)
                for src, name in ((initial_db, "initial.db"), (final_db, "final.db")):
                    safe_fs.copy_into(Path(src), job_fd, name, mode=0o444)
            except safe_fs.UnsafeEntry as exc:
                return {"status": "host", "kind": "db_missing", "error": f"database refused: {exc}"}
            except OSError as exc:
                # e.g. the host's quota, which every job waiting for a turn shares, is full: not this verification's
                # fault — it goes to a sandbox of its own (and a quota of its own), whose verdict is the old one
                raise HostGone(f"the databases could not be copied into the host: {exc}") from None
            finally:
                os.close(job_fd)
            directory = str(self.work / job)
            body = {**request, "dir": directory, "initial_db": f"{directory}/initial.db",
                    "final_db": f"{directory}/final.db", "timeout": timeout}
            future: Future = Future()
            with self.lock:
                if not self.alive:
                    raise HostGone("the verifier host ended")
                self.pending[job] = future
                try:
                    self.proc.stdin.write(job.encode() + b" " + json.dumps(body).encode() + b"\n")
                    self.proc.stdin.flush()
                except OSError as exc:
                    self.pending.pop(job, None)
                    raise HostGone(f"the verifier host is gone ({exc})") from None
            # the host enforces the verifier's timeout from its start; its turn may come after every verification
            # queued before it has had its own (the host stops none of them early): this only guards against a
            # host that stopped answering altogether
            cap = time.monotonic() + (timeout + 5) * (1 + len(self.pending)) + ANSWER_GRACE
            while True:
                try:
                    return future.result(timeout=1.0)
                except TimeoutError:
                    if future.done() or (self.alive and time.monotonic() < cap):
                        continue
                with self.lock:
                    self.pending.pop(job, None)
                if time.monotonic() >= cap:
                    self.close()  # a host that does not answer is not trusted with more
                raise HostGone("the verifier host did not answer")
        finally:
            safe_fs.remove_below(root, job)
            os.close(root)
            self.last_used = time.monotonic()

    def close(self) -> None:
        with self.lock:
            self.closed = True
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            self.proc.wait()
        self.sandbox.cleanup()
        self._remove()

    def _remove(self) -> None:
        if self.quota:
            limits.unmount_quota(self.work)
            self.quota = False
        remove_dir(self.work)


_hosts: dict[tuple[str, int | None], VerifierHost] = {}
_hosts_lock = threading.Lock()


def host_for(key: str, memory_mb: int | None) -> VerifierHost:
    """The running host of this scenario (and memory limit), started when there is none."""
    _start_reaper()
    with _hosts_lock:
        _reap_idle()
        found = _hosts.get((key, memory_mb))
        if found is not None and found.alive:
            return found
        if found is not None:
            threading.Thread(target=found.close, daemon=True).start()
        host = _hosts[(key, memory_mb)] = _started(key, memory_mb)
        return host


_starter: list[tuple[threading.Thread, "queue.SimpleQueue"]] = []


def _started(key: str, memory_mb: int | None) -> VerifierHost:
    """A new host, started from one long-lived thread: bubblewrap dies with the *thread* that started it
    (``--die-with-parent`` is the parent-death signal, which follows the creating thread), and verifications are
    run from short-lived ones."""
    if not _starter or not _starter[0][0].is_alive():
        jobs: queue.SimpleQueue = queue.SimpleQueue()

        def serve() -> None:
            while True:
                args, done = jobs.get()
                try:
                    done.set_result(VerifierHost(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
                    done.set_exception(exc)

        thread = threading.Thread(target=serve, daemon=True, name="awm-vhost-start")
        thread.start()
        _starter[:] = [(thread, jobs)]
    done: Future = Future()
    _starter[0][1].put(((key, memory_mb), done))
    return done.result()


_reaper: list[threading.Thread] = []


def _start_reaper() -> None:
    """A daemon thread that ends hosts idle for ``IDLE_SECONDS`` (a long-lived process keeps none it stopped using)."""
    if _reaper and _reaper[0].is_alive():
        return

    def reap() -> None:
        while True:
            time.sleep(IDLE_SECONDS / 4)
            with _hosts_lock:
                _reap_idle()

    _reaper[:] = [threading.Thread(target=reap, daemon=True, name="awm-vhost-reaper")]
    _reaper[0].start()


def _reap_idle() -> None:
    now = time.monotonic()
    for k, h in list(_hosts.items()):
        if now - h.last_used > IDLE_SECONDS and not h.pending:
            del _hosts[k]
            threading.Thread(target=h.close, daemon=True).start()


def close_all() -> None:
    """End every host of this process (at exit; after a batch of verifications)."""
    with _hosts_lock:
        hosts = list(_hosts.values())
        _hosts.clear()
    for h in hosts:
        try:
            h.close()
        except Exception:  # noqa: BLE001 - at exit: the rest still end
            pass


atexit.register(close_all)
