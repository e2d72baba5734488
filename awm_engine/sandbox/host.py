"""What this host enforces, measured once per process, and the awm process's own hardening.

``protections()`` does not assume: the first time it is asked it runs a probe through the real launcher — a
sandboxed process that tries what hostile code would (read a canary file in a fake home, connect to a path unix
socket, an abstract socket and a TCP listener of the probe's own on loopback, send UDP there, see the parent's
processes, ptrace, make a user namespace, leave a SysV shared-memory segment behind, signal the parent) — and
records which attempts failed. Each protection that is off is named with why and what that exposes, on stderr
the first time (``warn_once``), in the TUI's status bar and in every run's metadata.
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from awm_engine.sandbox import landlock, limits, safe_fs, seccomp

PR_SET_DUMPABLE = 4
DEFAULT_SANDBOX_UID = 1999999999
UNSAFE_ENV = "AWM_UNSAFE_NO_SANDBOX"

EXPOSES = {
    "namespaces": "untrusted code would share the host's processes, network, IPC and filesystem",
    "distinct_uid": "sandboxed code runs as your own uid: only the filesystem view keeps your files out of reach",
    "filesystem_view": "untrusted code can read every file your uid can (keys, configs, other runs)",
    "path_sockets_blocked": "untrusted code can connect to unix sockets on disk (tmux, ssh-agent, docker)",
    "network_isolated": "untrusted code can reach the network, including services on loopback (or, through AF_VSOCK, "
                        "the hypervisor's host)",
    "proc_isolated": "untrusted code can see the host's processes and their command lines",
    "ipc_isolated": "SysV IPC objects are shared with the host and can outlive the sandbox",
    "syscall_filter": "ptrace, mount, keyctl, bpf, io_uring, sockets of families no network namespace holds "
                      "(AF_VSOCK) and similar system calls are open to untrusted code",
    "writes_confined": "no second layer confines writes to the sandbox's own directories",
    "signals_scoped": "untrusted code can signal processes outside its sandbox that it can see",
    "memory_limit": "memory is limited per process only: many processes of one sandbox can exhaust the host",
    "process_limit": "processes and threads of one sandbox are not capped",
    "disk_quota": "a sandbox can fill the disk holding its directory",
    "no_survivors": "processes started inside can outlive the sandbox",
    "parent_nondumpable": "processes of your uid can read awm's memory and environment",
}


@dataclass
class Protections:
    """Which protections a sandboxed process gets on this host (True: measured to hold)."""

    env_allowlist: bool = True  # only allow-listed variable names
    namespaces: bool = False  # bubblewrap: own user, mount, pid, IPC, UTS (and network) namespaces
    distinct_uid: bool = False  # runs as a host uid that owns nothing (awm as root drops to AWM_SANDBOX_UID)
    filesystem_view: bool = False  # a minimal read-only view: no home, host /tmp, /run, /var, other runs
    path_sockets_blocked: bool = False  # host unix sockets on disk cannot be reached
    network_isolated: bool = False  # no TCP, UDP, abstract-socket or vsock traffic leaves the sandbox
    proc_isolated: bool = False  # own pid namespace and /proc
    ipc_isolated: bool = False  # own SysV IPC: nothing of it survives the sandbox
    syscall_filter: bool = False  # seccomp
    writes_confined: bool = False  # Landlock: writes only below the sandbox's own directories
    signals_scoped: bool = False  # Landlock scoping (ABI 6): no signals or abstract sockets outside the sandbox
    memory_limit: bool = False  # a memory cgroup per sandbox
    process_limit: bool = False  # a pids cgroup per sandbox (or RLIMIT_NPROC in its own user namespace)
    disk_quota: bool = False  # a size-capped tmpfs for the sandbox's writable directory
    limits: bool = True  # per process: address space, file size, open files, CPU time; no core dumps
    no_survivors: bool = False  # everything started inside dies with the sandbox (pid namespace)
    parent_nondumpable: bool = False  # the awm process's /proc/<pid>/environ is unreadable to others
    unsafe_no_sandbox: bool = False  # the user allowed untrusted code to run without the namespace layer
    mechanism: str = "bubblewrap"
    off: dict[str, str] = field(default_factory=dict)  # protection -> why it is off, and what that exposes

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """One line for a status bar."""
        if not self.off:
            return "sandbox: all protections on"
        return "sandbox: OFF " + ", ".join(n.replace("_", " ") for n in sorted(self.off))


def _set_nondumpable() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_hardened = False


def tcp_confined(facts: Any) -> bool:
    """Whether a sandbox without network, with these measured protections (``Protections`` or its dict), is refused
    every TCP bind and connect by Landlock (ABI >= 4) — also on a TCP socket of the host's network namespace it is
    handed. Its own empty network namespace does not stop that: such a socket (a served client's connection)
    keeps the namespace it was made in, and ``connect(AF_UNSPEC)`` turns it back into one that connects anywhere."""
    get = facts.get if isinstance(facts, dict) else (lambda name: getattr(facts, name, None))
    return get("writes_confined") is True and get("unsafe_no_sandbox") is not True and landlock_abi() >= 4


def harden_parent() -> bool:
    """Make the awm process non-dumpable: its /proc/<pid>/environ and memory are no longer readable by
    processes of the same user. Idempotent; returns whether it worked."""
    global _hardened
    if not _hardened:
        _hardened = _set_nondumpable()
        _raise_sender_limit()
    return _hardened


def _raise_sender_limit() -> None:
    """awm as a user: its sandboxes run as its own uid, and the kernel refuses to pass a descriptor (a served
    client's connection, a warm worker's sockets) once that uid has more in flight than the sender's soft
    ``RLIMIT_NOFILE`` — which a sandbox's code, sending descriptors into a socket it never reads, can reach at its
    own 1024. So awm's soft limit goes up to its hard one (at most 2**20), out of a sandbox's reach. (As root awm's
    own passes are not counted: it holds CAP_SYS_RESOURCE.)"""
    import resource

    if os.geteuid() == 0:
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)
        if soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        pass


def switched_off() -> set[str]:
    """Layers switched off for testing: ``AWM_SANDBOX=off-namespaces,off-landlock,…``."""
    value = os.environ.get("AWM_SANDBOX", "")
    return {part.strip()[4:] for part in value.split(",") if part.strip().startswith("off-")}


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def setpriv_path() -> str | None:
    return shutil.which("setpriv")


def unshare_path() -> str | None:  # kept for callers that still ask (nothing of awm uses unshare any more)
    return shutil.which("unshare")


def pids_cgroup_root() -> Path | None:
    return limits.cgroup_support()[0].get("pids")


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    if "landlock" in switched_off():
        return 0
    return landlock.abi_version()


def unsafe_allowed() -> bool:
    """The user said ``--unsafe-no-sandbox`` (or ``AWM_UNSAFE_NO_SANDBOX=1``, or ``unsafe_no_sandbox = true`` under
    ``[sandbox]`` in ``~/.config/awm/config.toml``)."""
    if os.environ.get(UNSAFE_ENV) == "1":
        return True
    path = Path(os.environ.get("AWM_CONFIG") or Path.home() / ".config" / "awm" / "config.toml")
    try:
        import tomllib

        data = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return False
    section = data.get("sandbox")
    return isinstance(section, dict) and section.get("unsafe_no_sandbox") is True


@functools.lru_cache(maxsize=1)
def namespace_layer() -> tuple[bool, str]:
    """Whether bubblewrap can run here at all (the probe then measures what it gives)."""
    if "namespaces" in switched_off():
        return False, "AWM_SANDBOX=off-namespaces"
    if bwrap_path() is None:
        return False, "bubblewrap is not installed (Debian: apt-get install bubblewrap; `make setup` does it as root)"
    return True, ""


def unavailable_message() -> str:
    ok, why = namespace_layer()
    return ("untrusted code was not run: the sandbox's namespace layer is unavailable on this host (" + (why or
            "bubblewrap could not create namespaces") + "). Install bubblewrap, or pass --unsafe-no-sandbox (or set "
            "AWM_UNSAFE_NO_SANDBOX=1) to run it anyway with only the weaker protections `awm doctor sandbox` lists; "
            "that choice is recorded in every run's metadata.")


PROBE = r'''
import ctypes, errno, json, os, socket, sys
cfg = json.loads(sys.argv[1])
r = {"uid": os.getuid()}
try:  # the host's user namespace maps every uid to itself
    with open("/proc/self/uid_map") as f:
        r["own_user_ns"] = f.read().split() != ["0", "0", "4294967295"]
except OSError:
    r["own_user_ns"] = None
r["canary"] = os.path.exists(cfg["canary"])
r["shadow"] = os.path.exists("/etc/shadow")
r["host_tmp"] = os.path.exists(cfg["host_tmp_marker"])
def attempt(key, fn):
    try:
        fn()
        r[key] = "ok"
    except OSError as exc:
        r[key] = type(exc).__name__
def unix(path):
    s = socket.socket(socket.AF_UNIX); s.settimeout(2)
    try: s.connect(path)
    finally: s.close()
attempt("path_socket", lambda: unix(cfg["unix"]))
attempt("abstract_socket", lambda: unix("\0" + cfg["abstract"]))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", cfg["tcp"]), timeout=2).close())
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try: s.sendto(b"awm-probe", ("127.0.0.1", cfg["udp"]))
    finally: s.close()
attempt("udp", udp)
def vsock():  # no network namespace holds AF_VSOCK: from a VM it reaches the hypervisor's host
    s = socket.socket(40, socket.SOCK_STREAM)
    s.close()
attempt("vsock", vsock)
r["pids"] = len([p for p in os.listdir("/proc") if p.isdigit()])
attempt("signal_parent", lambda: os.kill(cfg["parent"], 0))
libc = ctypes.CDLL(None, use_errno=True)
def in_child(call):  # where it is allowed (no filter), it must not change this process (a traced probe hangs)
    child = os.fork()
    if child == 0:
        os._exit(0 if call() == 0 else ctypes.get_errno())
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
r["ptrace"] = in_child(lambda: libc.ptrace(0, 0, 0, 0))
r["unshare"] = in_child(lambda: libc.unshare(0x10000000))
libc.shmget.restype = ctypes.c_int
r["shm"] = libc.shmget(cfg["shm_key"], 4096, 0o1000 | 0o600)
with open(os.path.join(cfg["dir"], "owned"), "w") as fh:
    fh.write("x")
attempt("write_usr", lambda: open("/usr/awm-probe-" + cfg["tag"], "w").close())
def fill():
    with open(os.path.join(cfg["dir"], "fill"), "wb") as fh:
        for _ in range(cfg["quota_mb"] * 2):
            fh.write(b"\0" * (1 << 20))
            fh.flush()
attempt("fill_quota", fill)
try:
    os.unlink(os.path.join(cfg["dir"], "fill"))
except OSError:
    pass
print(json.dumps(r))
'''


def _shm_keys() -> set[int]:
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(line.split()[0]) for line in lines if line.split()}


# what a sandbox in the host's network namespace can still do with abstract unix sockets: Landlock scopes only the
# connecting side (ABI 6), and nothing the kernel offers (nor a system-call filter, which cannot read the address)
# keeps it from binding a name there — a host client that connects to a name no host server holds (X11's
# ``@/tmp/.X11-unix/X0`` with no X server up, a D-Bus or containerd address) reaches the sandbox instead
ABSTRACT_BIND = ("; abstract unix socket names in the host's network namespace can be bound (listened on): a host "
                 "client connecting to a name no host server holds reaches the sandbox")


def _measure(network: bool) -> Protections:
    from awm_engine.sandbox import launcher

    p = Protections(parent_nondumpable=harden_parent())
    ns_ok, ns_why = namespace_layer()
    abi = landlock_abi()
    seccomp_ok, seccomp_why = seccomp.available() if "seccomp" not in switched_off() else (False, "AWM_SANDBOX=off-seccomp")
    groups, groups_why = limits.cgroup_support()
    process_why = groups_why
    quota_ok, quota_why = limits.quota_support()
    p.namespaces = ns_ok
    p.unsafe_no_sandbox = not ns_ok and unsafe_allowed()
    p.mechanism = "bubblewrap" if ns_ok else "none (unsafe: limits, Landlock and the variable allow-list only)"
    p.syscall_filter = ns_ok and seccomp_ok
    p.writes_confined = abi >= 1
    p.signals_scoped = abi >= 6
    p.memory_limit = "memory" in groups
    p.process_limit = "pids" in groups or (ns_ok and os.geteuid() != 0)
    p.disk_quota = quota_ok
    reasons: dict[str, str] = {}
    if ns_ok or p.unsafe_no_sandbox:
        result, why = _run_probe(launcher, p, network)
        if result is None:
            if ns_ok:
                p.namespaces = p.syscall_filter = False
                ns_ok, ns_why = False, f"the sandbox probe did not run: {why}"
                p.unsafe_no_sandbox = unsafe_allowed()
            reasons["probe"] = why
        else:
            p.distinct_uid = result["owner"] not in (0, os.getuid())
            p.filesystem_view = not (result["canary"] or result["shadow"] or result["host_tmp"])
            p.path_sockets_blocked = result["path_socket"] != "ok" and not result["accepted_unix"]
            p.network_isolated = (not network and result["tcp"] != "ok" and not result["accepted_tcp"]
                                  and not result["udp_received"] and result["abstract_socket"] != "ok"
                                  and result.get("vsock") != "ok")
            p.proc_isolated = result["pids"] <= 4
            p.no_survivors = p.proc_isolated
            p.ipc_isolated = result["shm_left"] is False
            p.syscall_filter = p.syscall_filter and result["ptrace"] == 1 and result["unshare"] == 1
            p.process_limit = p.process_limit or (p.namespaces and result["uid"] != 0 and
                                                  result.get("own_user_ns") is not False)
            if result.get("own_user_ns") is False and not p.process_limit:
                process_why = ("the host refused the sandbox a user namespace of its own, so no per-sandbox process "
                               "limit is set (one would count every sandbox's processes together); "
                               + (groups_why or "no pids cgroup"))
            p.signals_scoped = result["signal_parent"] != "ok"
            p.writes_confined = p.writes_confined and result["write_usr"] != "ok"
            p.disk_quota = p.disk_quota and result["quota_held"]
            if quota_ok and not p.disk_quota:
                quota_why = "the probe's size-capped tmpfs did not hold (mount failed or writes went past it)"
    if not ns_ok:
        reasons["namespaces"] = ns_why
    if not p.distinct_uid:
        reasons["distinct_uid"] = (f"awm runs as uid {os.getuid()}, and a user namespace can only map that uid"
                                   if os.geteuid() != 0 else ns_why or "the probe found the sandbox's files owned by "
                                   "root or awm's uid")
    for name, why in (("syscall_filter", seccomp_why), ("writes_confined", "Landlock is not available on this kernel"),
                      ("signals_scoped", f"Landlock ABI {abi} < 6"), ("memory_limit", groups_why),
                      ("process_limit", process_why), ("disk_quota", quota_why)):
        if not getattr(p, name):
            reasons.setdefault(name, why or ns_why or "measured off by the probe")
    for name in ("filesystem_view", "path_sockets_blocked", "network_isolated", "proc_isolated", "ipc_isolated",
                 "no_survivors"):
        if not getattr(p, name):
            if name == "network_isolated" and network:
                reasons[name] = ("network allowed by this sandbox's policy: TCP only to ports "
                                 f"{', '.join(map(str, launcher.network_ports()))} (any address), UDP anywhere"
                                 if abi >= 4 else "network allowed by this sandbox's policy, to any port and "
                                 f"address, the host's loopback listeners included (Landlock ABI {abi} < 4)") + \
                    ABSTRACT_BIND
            else:
                reasons.setdefault(name, ns_why or "measured off by the probe")
    if not p.parent_nondumpable:
        reasons["parent_nondumpable"] = "prctl(PR_SET_DUMPABLE) failed"
    reasons.pop("probe", None)
    p.off = {name: f"{why}; {EXPOSES[name]}" if name in EXPOSES else why for name, why in reasons.items()}
    return p


def _run_probe(launcher, provisional: Protections, network: bool) -> tuple[dict | None, str]:
    """Run the probe in a real sandbox; its findings, or None and why it could not run."""
    tag = uuid.uuid4().hex[:12]
    work = Path(tempfile.mkdtemp(prefix="awm_probe_"))
    listeners: list[socket.socket] = []
    quota_mounted, shm_key, own = False, -1, work / "own"
    try:
        home = work / "home"
        home.mkdir()
        canary = home / ".ssh-canary"
        canary.write_text("canary")
        canary.chmod(0o644)
        for d in (work, home):
            d.chmod(0o755)
        unix_path = str(work / "probe.sock")
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(unix_path)
        os.chmod(unix_path, 0o777)
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\0awm-probe-" + tag)
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        for s in (unix, abstract, tcp):
            s.listen(4)
            s.setblocking(False)
        udp.setblocking(False)
        listeners = [unix, abstract, tcp, udp]
        own = work / "own"
        own.mkdir()
        quota_mb = 8
        quota_mounted = limits.mount_quota(own, quota_mb, *launcher.sandbox_ids())
        shm_key = int(tag[:7], 16)
        before = _shm_keys()
        cfg = {"canary": str(canary), "unix": unix_path, "abstract": "awm-probe-" + tag,
               "tcp": tcp.getsockname()[1], "udp": udp.getsockname()[1], "parent": os.getpid(),
               "shm_key": shm_key, "dir": str(own), "tag": tag, "host_tmp_marker": str(home), "quota_mb": quota_mb}
        sandbox = launcher.Sandbox(launcher.SandboxPolicy(writable=[str(own)], network=network, max_procs=16,
                                                          memory_mb=512), "probe", protections=provisional)
        try:
            done = sandbox.run([sys.executable, "-S", "-c", PROBE, json.dumps(cfg)], timeout=60,
                               capture_output=True)
        except (OSError, subprocess.SubprocessError, launcher.SandboxUnavailable) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        if done.returncode != 0 or not done.stdout.strip():
            return None, (done.stderr or b"").decode(errors="replace").strip()[-300:] or f"exit {done.returncode}"
        try:
            result = json.loads(done.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None, "the probe printed no result"

        def accepted(s: socket.socket) -> bool:
            try:
                conn, _ = s.accept()
                conn.close()
                return True
            except (BlockingIOError, OSError):
                return False

        def received() -> bool:
            try:
                return bool(udp.recv(64))
            except (BlockingIOError, OSError):
                return False

        result["accepted_unix"] = accepted(unix) or accepted(abstract)
        result["accepted_tcp"] = accepted(tcp)
        result["udp_received"] = received()
        try:
            result["owner"] = (own / "owned").lstat().st_uid
        except OSError:
            result["owner"] = 0
        left = _shm_keys() - before
        result["shm_left"] = bool(left) if result.get("shm", -1) >= 0 else False
        result["quota_held"] = quota_mounted and result.get("fill_quota") not in ("ok", None)
        return result, ""
    finally:
        for shmid in _shm_ids_for(shm_key):  # never leave one behind, even when the layer is off
            ctypes.CDLL(None).shmctl(shmid, 0, None)
        if quota_mounted:
            limits.unmount_quota(own)
        for s in listeners:
            s.close()
        safe_fs.remove_tree(work)


def _shm_ids_for(key: int) -> list[int]:
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return []
    return [int(line.split()[1]) for line in lines if line.split() and int(line.split()[0]) == key]


_measured: dict[bool, Protections] = {}


def protections(network: bool = False) -> Protections:
    """The protections sandboxes of this kind get here (measured on first use, then remembered)."""
    if network not in _measured:
        _measured[network] = _measure(network)
    return _measured[network]


def adopt_measurement(data: dict, network: bool = False) -> bool:
    """Take the protections another awm process of this user measured with the same code and settings (the warm
    service that started this process's worker, ``runtime.warm``) instead of probing again. False when ``data`` is
    not a measurement."""
    if network in _measured:
        return True
    try:
        known = {f.name for f in fields(Protections)}
        if not isinstance(data, dict) or not data or set(data) - known or not isinstance(data.get("off", {}), dict):
            return False
        _measured[network] = Protections(**data)
    except TypeError:
        return False
    return True


_warned = False


def warn_once(stream=None) -> Protections:
    """Say once, plainly, which protections are off on this host and what that exposes."""
    global _warned
    p = protections()
    if p.off and not _warned:
        _warned = True
        out = stream or sys.stderr
        for name, why in sorted(p.off.items()):
            print(f"awm sandbox: {name.replace('_', ' ')} is OFF on this host ({why})", file=out)
        if p.unsafe_no_sandbox:
            print("awm sandbox: running untrusted code WITHOUT the namespace layer (--unsafe-no-sandbox)", file=out)
    return p
