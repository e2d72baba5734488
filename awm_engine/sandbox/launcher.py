"""The one sandbox launcher: every process that runs untrusted code (environment workers, verifiers, database
builds, benchmark servers and executables, generated-code checks) is started through ``Sandbox``.

The mechanism is bubblewrap (``bwrap``, the sandbox of Flatpak). Sandboxed code runs as an unprivileged uid that
owns nothing on the host: when awm runs as root, bubblewrap runs privileged (it can then bind the Python runtime
from anywhere, e.g. a pyenv under ``/root``) and the target drops to ``AWM_SANDBOX_UID`` and enters a user
namespace of its own before any untrusted code runs (``init.py``); otherwise bubblewrap makes the user namespace
itself. A sandboxed process gets:

- its own user, mount, pid, network (unless the policy allows network), IPC, UTS and cgroup namespaces; no
  capabilities; no further user namespaces; a new terminal session; it dies with the process that started it;
- a minimal read-only view of the filesystem (``view.py``): the system's ``/usr``, the Python runtime and the
  packages awm runs with, awm's own code, the policy's extra read-only paths, its own writable directories, a
  private size-capped ``/tmp``, its own ``/proc`` and a minimal ``/dev`` — nothing else of the host (no home
  directories, host ``/tmp``, ``/run``, ``/var``, other scenarios' data, other runs, the user's config), so path
  unix sockets of the host are not even there to connect to;
- a system-call filter (``seccomp.py``), and inside, Landlock write confinement and scoping of abstract unix
  sockets and signals (``init.py``);
- limits for the whole sandbox (``limits.py``: a memory and a pids cgroup where the host offers them) and per
  process (address space, file size, open files, CPU time where asked, no core dumps);
- only allow-listed environment variables (``environment.py``): no keys, tokens or endpoints.

``host.protections()`` measures which of these hold on this host; a protection that is missing is reported, and
without the namespace layer untrusted code does not run at all unless the user said ``--unsafe-no-sandbox``.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.sandbox import host, limits, owned, safe_fs, view
from awm_engine.sandbox.output import CappedLog, is_regular_file
from awm_engine.sandbox.environment import scrubbed_env

PACKAGE_PARENT = view.PACKAGE_PARENT  # so ``-m awm_engine…`` works inside
INSIDE_UID = 1000  # the uid sandboxed code sees (mapped to the unprivileged host uid)
TMP_MB = 256  # the private /tmp's size
# the hard limit on open files of a sandbox whose trusted process passes descriptors to a fork runner (a verifier or
# BFCL host: ``SandboxPolicy.open_files_hard``): far above the 1024 any sandbox's code may put in flight
FORK_HOST_FILES = 1 << 20


class SandboxUnavailable(RuntimeError):
    """Untrusted code was about to run without the namespace layer, and the user did not allow that."""


@dataclass
class SandboxPolicy:
    writable: list[str] = field(default_factory=list)  # directories the process may write below (bound read-write)
    readable: list[str] = field(default_factory=list)  # extra paths it may read (data a hosted environment reads)
    network: bool = False  # environments are offline worlds: no network unless asked
    # with network: the TCP ports it may connect to, on any address (Landlock ABI >= 4); None: network_ports()
    connect_ports: list[int] | None = None
    # with network: the TCP ports it may listen on (port 0 besides: one the kernel picks); none else (Landlock ABI >= 4)
    bind_ports: list[int] = field(default_factory=list)
    memory_mb: int | None = 2048  # the whole sandbox (memory cgroup) and each process's address space
    max_procs: int | None = 64  # processes and threads of the whole sandbox
    file_size_mb: int | None = 2048
    open_files: int | None = 1024
    # a higher hard limit on open files (the soft limit stays ``open_files``), for a host whose trusted process passes
    # descriptors to the fork runner (``forkrunner.start`` raises its own soft limit to it, keeps ``open_files`` for
    # the runner and every child): the kernel refuses a sender once its uid has more descriptors in flight than the
    # sender's soft limit, and every sandbox shares that uid
    open_files_hard: int | None = None
    cpu_seconds: int | None = None  # verifiers get one
    tmp_mb: int = TMP_MB
    env: dict[str, str] = field(default_factory=dict)  # set on top of the allow-listed variables

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NETWORK_PORTS_ENV = "AWM_SANDBOX_NET_PORTS"
DEFAULT_NETWORK_PORTS = (80, 443)


def network_ports() -> list[int]:
    """The TCP ports a sandbox with network may connect to: ``$AWM_SANDBOX_NET_PORTS`` (comma-separated) or 80
    and 443 — the web APIs a benchmark's servers call. Landlock names ports, not addresses, so this is also what
    keeps such a sandbox away from the host's own loopback listeners (a database, a Ray dashboard, a model
    server) on every other port."""
    raw = os.environ.get(NETWORK_PORTS_ENV, "").strip()
    if not raw:
        return list(DEFAULT_NETWORK_PORTS)
    ports = []
    for part in raw.split(","):
        part = part.strip()
        if not part.isdigit() or not 0 < int(part) < 65536:
            raise ValueError(f"{NETWORK_PORTS_ENV}: {part!r} is not a TCP port (give ports like 80,443,9876)")
        ports.append(int(part))
    return ports


def default_memory_mb(kind: str) -> int:
    override = os.environ.get(f"AWM_SANDBOX_{kind.upper()}_MEMORY_MB") or os.environ.get("AWM_SANDBOX_MEMORY_MB")
    if override and override.isdigit():
        return int(override)
    return {"worker": 2048, "verifier": 1024, "build": 1024, "serve": 2048}.get(kind, 2048)


LOADER_VARIABLES = ("LD_", "GCONV_PATH", "MALLOC_", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES",
                    "RESOLV_HOST_CONF", "PYTHON")


class UnsafeEnvironment(ValueError):
    pass


def checked_env(env: dict[str, str]) -> dict[str, str]:
    """A policy's extra variables, refusing those that change how programs load (``LD_PRELOAD``, ``GCONV_PATH`` …,
    ``PYTHON*``): they come from data (a benchmark's server config) and must not steer any process awm starts."""
    bad = sorted(name for name in env if name.upper().startswith(LOADER_VARIABLES))
    if bad:
        raise UnsafeEnvironment(f"refused environment variables for a sandboxed process: {', '.join(bad)} (they "
                                "change how programs are loaded)")
    return {str(k): str(v) for k, v in env.items()}


def sandbox_env() -> dict[str, str]:
    """The variables a sandboxed process starts with (before its policy's own): the allow-listed ones of this
    process, with its home, temporary directory and import path inside the sandbox."""
    env = scrubbed_env({"HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": PACKAGE_PARENT})
    env.pop("AWM_CACHE_DIR", None)
    env["AWM_SANDBOXED"] = "1"
    return env


def sandbox_ids() -> tuple[int, int]:
    """The host uid/gid sandboxed code runs as: ``AWM_SANDBOX_UID`` (default 1999999999, owning nothing) when awm
    runs as root; awm's own uid otherwise (a user namespace cannot map another)."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    uid = int(os.environ.get("AWM_SANDBOX_UID") or host.DEFAULT_SANDBOX_UID)
    return uid, uid


def give_to_sandbox(path: Path | str) -> None:
    """Make a directory awm created writable by the sandbox's uid (never following a symlink)."""
    uid, gid = sandbox_ids()
    if os.geteuid() == 0:
        os.chown(path, uid, gid, follow_symlinks=False)


_live: "weakref.WeakSet[Sandbox]" = weakref.WeakSet()
_swept = False


def _cleanup_all() -> None:
    for sandbox in list(_live):
        try:
            sandbox.cleanup()
        except Exception:  # noqa: BLE001 - at exit: do what can be done
            pass
    limits.remove_total_groups()


atexit.register(_cleanup_all)


_bytecode_lock = threading.Lock()
_bytecode_done = False


def ensure_bytecode() -> None:
    """awm's own modules compiled ahead (``__pycache__`` beside them), once per process: a sandboxed Python sees the
    package read-only and writes no bytecode, so without this it compiles every awm module it imports at each start
    (about 70 ms of a worker's). Skipped when this process is told not to write bytecode
    (``PYTHONDONTWRITEBYTECODE``); a package it cannot write to (a read-only install) is left as it is."""
    global _bytecode_done
    with _bytecode_lock:
        if _bytecode_done:
            return
        _bytecode_done = True
        if sys.dont_write_bytecode:
            return
        import compileall

        try:
            compileall.compile_dir(view.PACKAGE_DIR, quiet=2)
        except (OSError, ValueError):
            pass


class Sandbox:
    """One sandboxed process: ``Sandbox(policy).popen(argv, ...)``; ``cleanup()`` ends it and removes what it had
    (also at exit for any sandbox still alive; cgroups left by an awm process that was killed are swept)."""

    def __init__(self, policy: SandboxPolicy, label: str = "awm", protections: host.Protections | None = None):
        self.policy = policy
        self.label = label
        self.name = f"awm-{label}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.tmp = Path("/tmp")  # the private /tmp, as the sandboxed process sees it
        self.protections = protections or host.protections(policy.network)
        self.cgroup: limits.SandboxCgroup | None = None
        self._fds: list[int] = []
        self._logs: list[CappedLog] = []
        self.proc: subprocess.Popen | None = None

    # -- the command line ---------------------------------------------------------------------------------------

    def _init_argv(self, argv: list[str], writable: list[str]) -> list[str]:
        p = self.policy
        uid, gid = sandbox_ids()
        spec = {"writable": writable + ["/tmp"], "deny_tcp": not p.network, "memory_mb": p.memory_mb,
                "connect_ports": (network_ports() if p.connect_ports is None else list(p.connect_ports))
                if p.network else None, "bind_ports": list(p.bind_ports) if p.network else None,
                "max_procs": p.max_procs, "file_size_mb": p.file_size_mb, "open_files": p.open_files,
                "open_files_hard": p.open_files_hard,
                "cpu_seconds": p.cpu_seconds, "landlock": self.protections.writes_confined,
                "epoll": p.network,  # (seccomp.EPOLL: only a server with network keeps epoll)
                "scope": host.landlock_abi() >= 6, "seccomp": self.protections.syscall_filter,
                # awm as root: bubblewrap runs privileged (so it can bind any source), the target drops to the
                # sandbox uid and enters a user namespace of its own before anything untrusted runs
                "drop_to": [uid, gid] if os.geteuid() == 0 and self.protections.namespaces else None,
                "inside_uid": INSIDE_UID}
        python = os.path.abspath(sys.executable)  # the sandbox starts in /tmp: a relative path would miss
        if argv and argv[0] == sys.executable:
            argv = [python, *argv[1:]]
        # -I: nothing from the working directory, PYTHON* variables or user site is imported — the directory a
        # sandbox writes must never be able to plant a module that runs before (or instead of) the confinement
        return [python, "-I", "-B", "-u", "-m", "awm_engine.sandbox.init", json.dumps(spec), "--", *argv]

    def _fd(self, fd: int) -> str:
        self._fds.append(fd)
        return str(fd)

    def _bwrap_argv(self, writable: list[str], cwd: str) -> list[str]:
        p = self.policy
        args = [host.bwrap_path(), "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "awm-sandbox"]
        if os.geteuid() == 0:  # init.py needs these to drop to the sandbox uid; it loses every capability there
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        else:
            args += ["--unshare-user", "--disable-userns", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID)]
        if not p.network:
            args.append("--unshare-net")
        args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger",
                 "/proc/sysrq-trigger", "--dev", "/dev", "--perms", "1777", "--size", str(p.tmp_mb * 1024 * 1024),
                 "--tmpfs", "/tmp"]
        for entry in view.entries(p.readable, writable, network=p.network, uid=INSIDE_UID):
            if entry.kind == "dir":
                args += ["--perms", "0755", "--dir", entry.dest]
            elif entry.kind == "symlink":
                args += ["--symlink", entry.source, entry.dest]
            elif entry.kind == "data":
                args += ["--ro-bind", view.data_file(entry.source), entry.dest]
            else:
                args += ["--bind" if entry.kind == "rw" else "--ro-bind", entry.source, entry.dest]
        args += ["--chdir", cwd, "--"]
        return args

    def command(self, argv: list[str], cwd: str | None = None) -> tuple[list[str], dict[str, str]]:
        """The wrapped command line and its environment (the descriptors it names are in ``self.pass_fds``)."""
        writable = [str(Path(d).resolve()) for d in self.policy.writable]
        for d in writable:
            safe_fs.mark_untrusted(d)
            Path(d).mkdir(parents=True, exist_ok=True)
            if Path(d).stat().st_uid != sandbox_ids()[0]:
                give_to_sandbox(d)
        env = sandbox_env()
        extra = checked_env(self.policy.env)
        inner = self._init_argv(argv, writable)
        if not self.protections.namespaces:
            if not host.unsafe_allowed():
                raise SandboxUnavailable(host.unavailable_message())
            env.update(extra)
            command = inner  # the user said --unsafe-no-sandbox: rlimits, Landlock and the allow-list only (as root:
            # the code runs as root, since the Python runtime may not be readable by the sandbox uid), recorded in the run
        else:
            # the policy's variables (a benchmark server's declared env) reach only the sandboxed process, through
            # bubblewrap: never the host-side shell that joins the cgroups, nor bubblewrap itself, which run as root
            setenv = [a for name, value in extra.items() for a in ("--setenv", name, value)]
            bwrap = self._bwrap_argv(writable, cwd or "/tmp")
            command = bwrap[:-1] + setenv + ["--"] + inner
        global _swept
        if not _swept:
            _swept = True
            limits.sweep_stale_cgroups()
        if self.cgroup is not None:
            self.cgroup.remove()  # a previous command of this sandbox object's
        self.cgroup = limits.SandboxCgroup(self.name, self.policy.memory_mb, self.policy.max_procs)
        _live.add(self)
        if self.cgroup.procs_files:  # the launching shell joins the cgroups, then becomes the sandbox
            command = ["/bin/sh", "-c", 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; '
                       'shift; exec "$@"', "awm-sandbox", *self.cgroup.procs_files, "--", *command]
        return command, env

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self._fds)

    def _close_fds(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    # -- running ------------------------------------------------------------------------------------------------

    def popen(self, argv: list[str], cwd: str | None = None, **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` in the sandbox. A regular file given as stdout or stderr never reaches it: the process
        writes into a pipe whose contents awm copies into that file, up to ``output.LOG_CAP`` bytes (``output``)."""
        ensure_bytecode()
        logs = _logs_for(kwargs)
        try:
            command, env = self.command(argv, cwd)
            kwargs.setdefault("start_new_session", True)
            kwargs["pass_fds"] = tuple(kwargs.get("pass_fds", ())) + self.pass_fds
            self.proc = subprocess.Popen(command, env=env, cwd="/", **kwargs)
        except BaseException:
            for log in logs:
                log.close()
            raise
        finally:
            self._close_fds()
        for log in logs:
            log.start()
        self._logs.extend(logs)
        return self.proc

    def run(self, argv: list[str], timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run to completion (killed, with everything it started, at ``timeout``)."""
        if kwargs.pop("capture_output", False):
            kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        try:
            proc = self.popen(argv, **kwargs)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_tree(proc)
                out, err = proc.communicate()
                raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
        finally:
            self.cleanup()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def cleanup(self) -> None:
        """Everything of the sandbox ends (its cgroups emptied) and its cgroups go."""
        self._close_fds()
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc)
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        for log in self._logs:  # everything that held its pipe is gone: the last bytes are copied
            log.close()
        self._logs = []


def _logs_for(kwargs: dict[str, Any]) -> list[CappedLog]:
    """Replace a regular file given as ``stdout``/``stderr`` by the write end of a ``CappedLog`` (one for both when
    they are the same file)."""
    logs: list[CappedLog] = []
    seen: dict[tuple[int, int], CappedLog] = {}
    for key in ("stdout", "stderr"):
        target = kwargs.get(key)
        if target is None or not is_regular_file(target):
            continue
        st = os.fstat(target if isinstance(target, int) else target.fileno())
        log = seen.get((st.st_dev, st.st_ino))
        if log is None:
            log = seen[(st.st_dev, st.st_ino)] = CappedLog(target)
            logs.append(log)
        kwargs[key] = log.write_fd
    return logs


INSIDE_FIRST_WAIT = 2.0  # seconds bubblewrap gets to collect its child and exit before its group is killed


def kill_inside_first(pid: int) -> bool:
    """SIGKILL the children of the sandbox's first process ``pid`` (bubblewrap; its child is the sandbox's PID 1, so
    everything inside dies with it), not ``pid`` itself. bubblewrap then collects its child and exits. Killing the
    whole group at once could end bubblewrap first: its child would go to the host's init as a zombie, never
    collected where that init does not reap (a container's, this VM's). Each child is taken through a pidfd and
    checked to still be ``pid``'s, so a reused pid is never signalled. False when there was none to kill."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return False
    killed = False
    for child in children:
        try:
            fd = os.pidfd_open(child)
        except OSError:
            continue
        try:
            with open(f"/proc/{child}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                killed = True
        except (OSError, ValueError, IndexError):
            pass
        finally:
            os.close(fd)
    return killed


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's process group (bwrap; everything inside dies with it: pid namespace, die-with-parent):
    the inside first, so that bubblewrap collects it (``kill_inside_first``), then the group."""
    if proc.poll() is None and kill_inside_first(proc.pid):
        try:
            proc.wait(INSIDE_FIRST_WAIT)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


PRIVATE_LEAF = "work"


def private_dir(prefix: str, parent: Path | str | None = None) -> Path:
    """A fresh directory for one sandbox's writable files, owned by the sandbox's uid; the caller removes it with
    ``remove_dir``. Inside ``parent`` when given; else ``<tmp>/<prefix>XXXX/work``, in a directory of awm's own
    uid marked as this process's (``owned``), so that when this process is killed before its clean-up the next
    pool start sweeps it (the sandbox owns only the inner directory and cannot forge or remove the marker)."""
    if parent is not None:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=str(parent)))
    else:
        outer = owned.owned_dir(prefix)
        outer.chmod(0o711)  # the sandbox's uid may pass through to its own directory, not list or write here
        path = outer / PRIVATE_LEAF
        path.mkdir(mode=0o700)
    give_to_sandbox(path)
    return path


def remove_dir(path: Path | str) -> None:
    """Remove a ``private_dir`` (with its marked parent when it has one of this process's); never follows a
    symlink."""
    path = Path(path)
    if path.name == PRIVATE_LEAF:
        mark = owned.owner_of(path.parent)
        if mark is not None and mark.get("pid") == str(os.getpid()):
            path = path.parent
    safe_fs.remove_tree(path)
