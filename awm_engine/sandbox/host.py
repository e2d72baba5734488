"""What this host can enforce, probed once per process, and the awm process's own hardening.

Each protection is named, and one that the host cannot provide is reported (a warning on stderr the
first time, and the ``protections()`` record that runs write into their metadata) — never skipped
silently.
"""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from awm_engine.sandbox import landlock

PR_SET_DUMPABLE = 4


@dataclass
class Protections:
    """Which protections a sandboxed process gets on this host (True: enforced)."""

    env_allowlist: bool = True  # only allow-listed variable names
    proc_isolated: bool = False  # own pid namespace and /proc: no ancestor's environ is even visible
    parent_nondumpable: bool = False  # the awm process's /proc/<pid>/environ is unreadable to others
    network_isolated: bool = False  # own empty network namespace (or, failing that, Landlock TCP denial)
    writes_confined: bool = False  # Landlock: writes only below the sandbox's own directories
    limits: bool = True  # memory, processes, file size, open files, CPU time; no core dumps
    no_survivors: bool = False  # everything started inside dies with the sandbox (pid namespace)
    process_limit: bool = False  # a cap on processes and threads (pids cgroup for root, RLIMIT_NPROC otherwise)
    off: dict[str, str] = field(default_factory=dict)  # protection -> why it is off

    def to_dict(self) -> dict:
        return asdict(self)


def _set_nondumpable() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_hardened = False


def harden_parent() -> bool:
    """Make the awm process non-dumpable: its /proc/<pid>/environ and memory are no longer readable by
    processes of the same user (sandboxes included). Idempotent; returns whether it worked."""
    global _hardened
    if not _hardened:
        _hardened = _set_nondumpable()
    return _hardened


@functools.lru_cache(maxsize=1)
def unshare_path() -> str | None:
    return shutil.which("unshare")


def namespace_flags(network: bool) -> list[str]:
    """The ``unshare`` options of a sandbox: user, pid, mount (own /proc) and, unless asked, network."""
    flags = ["--user", "--map-root-user", "--pid", "--fork", "--kill-child"]
    if os.environ.get("AWM_SANDBOXED") != "1":
        # its own /proc (only its processes visible); inside a sandbox, Landlock forbids mounts, and the /proc
        # already there is the outer sandbox's own
        flags += ["--mount", "--mount-proc"]
    if not network:
        flags.append("--net")
    return flags


@functools.lru_cache(maxsize=1)
def namespaces_work() -> tuple[bool, str]:
    """Whether ``unshare`` can make user, pid, mount and network namespaces here (tried once)."""
    tool = unshare_path()
    if tool is None:
        return False, "the unshare command (util-linux) is not installed"
    if os.environ.get("AWM_SANDBOX") == "off-namespaces":
        return False, "AWM_SANDBOX=off-namespaces"
    try:
        proc = subprocess.run([tool, *namespace_flags(False), "--", sys.executable, "-c", "pass"],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"unshare failed: {exc}"
    if proc.returncode != 0:
        return False, "user namespaces are not permitted here: " + proc.stderr.decode(errors="replace").strip()[:200]
    return True, ""


@functools.lru_cache(maxsize=1)
def pids_cgroup_root() -> Path | None:
    """A pids-controller cgroup directory awm may create sandboxes' cgroups in (root only), or None."""
    if os.geteuid() != 0:
        return None
    candidates = [Path("/sys/fs/cgroup/pids")]  # cgroup v1
    unified = Path("/sys/fs/cgroup")
    try:
        if "pids" in (unified / "cgroup.subtree_control").read_text().split():
            candidates.append(unified)  # cgroup v2 with the pids controller enabled for children
    except OSError:
        pass
    for base in candidates:
        root = base / "awm"
        try:
            root.mkdir(exist_ok=True)
            probe = root / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            ok = (probe / "pids.max").exists() and (probe / "cgroup.procs").exists()
            probe.rmdir()
        except OSError:
            continue
        if ok:
            return root
    return None


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    if os.environ.get("AWM_SANDBOX") == "off-landlock":
        return 0
    return landlock.abi_version()


@functools.lru_cache(maxsize=2)
def protections(network: bool = False) -> Protections:
    p = Protections(parent_nondumpable=harden_parent())
    ns_ok, ns_why = namespaces_work()
    abi = landlock_abi()
    p.proc_isolated = p.no_survivors = ns_ok
    p.process_limit = os.geteuid() != 0 or pids_cgroup_root() is not None
    p.writes_confined = abi >= 1
    if network:
        p.network_isolated = False
    else:
        p.network_isolated = ns_ok or abi >= 4
    if not ns_ok:
        p.off["proc_isolated"] = p.off["no_survivors"] = ns_why
        if abi < 4:
            p.off["network_isolated"] = ns_why + "; and Landlock TCP rules need Landlock ABI ≥ 4"
    if not p.process_limit:
        p.off["process_limit"] = "running as root (exempt from RLIMIT_NPROC) and no writable pids cgroup"
    if abi < 1:
        p.off["writes_confined"] = "Landlock is not available on this kernel"
    if not p.parent_nondumpable:
        p.off["parent_nondumpable"] = "prctl(PR_SET_DUMPABLE) failed"
    return p


_warned = False


def warn_once(stream=None) -> Protections:
    """Say once, plainly, which protections are off on this host."""
    global _warned
    p = protections()
    if p.off and not _warned:
        _warned = True
        out = stream or sys.stderr
        for name, why in sorted(p.off.items()):
            print(f"awm sandbox: {name.replace('_', ' ')} is OFF on this host ({why})", file=out)
    return p
