"""Limits that hold for a whole sandbox, not one process: a cgroup per sandbox (memory and process count, cgroup
v2 or v1, whichever the host offers awm) and a size-capped tmpfs for a sandbox's writable directory (its disk
quota; root only). Each is optional: ``cgroup_support()`` / ``quota_support()`` say why one is missing, and the
launcher reports it.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import signal
import time
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
DISK_MB = int(os.environ.get("AWM_SANDBOX_DISK_MB") or 1024)  # a sandbox directory's quota (tmpfs, root only)
MOUNT_SOURCE = "awm-sbx"  # tmpfs source name of quota mounts: ``awm-sbx-<pid of the awm process>``
MNT_DETACH = 2


def _writable_root(base: Path, needed: tuple[str, ...]) -> Path | None:
    root = base / "awm"
    try:
        root.mkdir(exist_ok=True)
        probe = root / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        ok = all((probe / name).exists() for name in needed) and (probe / "cgroup.procs").exists()
        probe.rmdir()
    except OSError:
        return None
    return root if ok else None


@functools.lru_cache(maxsize=1)
def cgroup_support() -> tuple[dict[str, Path], str]:
    """{'memory': root, 'pids': root} of the controllers awm may create sandboxes' cgroups under, and why any
    is missing ('' when both are there)."""
    if os.environ.get("AWM_SANDBOX") == "off-cgroups":
        return {}, "AWM_SANDBOX=off-cgroups"
    if os.geteuid() != 0:
        return {}, "awm is not running as root, so it cannot create cgroups (no delegated cgroup is used)"
    found: dict[str, Path] = {}
    try:
        enabled = (CGROUP_FS / "cgroup.subtree_control").read_text().split()
    except OSError:
        enabled = []
    for controller, needed in (("memory", ("memory.max",)), ("pids", ("pids.max",))):
        if controller in enabled:  # cgroup v2 with the controller enabled for children
            root = _writable_root(CGROUP_FS, needed)
            if root is not None:
                found[controller] = root
                continue
        legacy = {"memory": ("memory.limit_in_bytes",), "pids": ("pids.max",)}[controller]
        root = _writable_root(CGROUP_FS / controller, legacy)  # cgroup v1
        if root is not None:
            found[controller] = root
    missing = [c for c in ("memory", "pids") if c not in found]
    return found, ("no writable cgroup with the " + " and ".join(missing) + " controller") if missing else ""


def total_memory_mb() -> int:
    """What all the sandboxes of one awm process may hold together (``AWM_SANDBOX_TOTAL_MEMORY_MB``; default three
    quarters of the machine's memory). Each sandbox has its own limit (2 GiB for a worker) and a 1 GiB tmpfs
    directory whose pages are memory too: 32 workers may otherwise ask for 96 GiB, and tmpfs pages are not freed by
    killing any process."""
    override = os.environ.get("AWM_SANDBOX_TOTAL_MEMORY_MB", "")
    if override.isdigit() and int(override) > 0:
        return int(override)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 3 // 4 // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 16 * 1024


TOTAL_LABEL = "total"  # ``awm-total-<pid>-all``: the memory cgroup every sandbox of the process <pid> is made in


_totals: dict[tuple[Path, int], Path | None] = {}


def total_group(root: Path) -> Path | None:
    """This process's memory cgroup below ``root`` (the memory controller's), limited to ``total_memory_mb()``, in
    which each of its sandboxes gets its own (None when it cannot be made: the sandboxes then go directly below
    ``root``). On cgroup v2 the pids controller shares the hierarchy, so the sandboxes' one group is made there."""
    key = (root, os.getpid())
    if key in _totals:
        return _totals[key]
    path = root / f"awm-{TOTAL_LABEL}-{os.getpid()}-all"
    limit = str(total_memory_mb() * 1024 * 1024)
    try:
        path.mkdir(exist_ok=True)
        if (path / "memory.max").exists():  # cgroup v2: the sandboxes below need the controllers passed down
            (path / "memory.max").write_text(limit)
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
            shared = [c for c, r in cgroup_support()[0].items() if r == root]
            (path / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in shared))
        else:
            (path / "memory.limit_in_bytes").write_text(limit)
    except OSError:
        SandboxCgroup._remove(path)
        path = None
    _totals[key] = path
    return path


def remove_total_groups() -> None:
    """This process's total groups, once its sandboxes' are gone (at exit; what remains is swept later)."""
    for (_root, pid), path in list(_totals.items()):
        if pid == os.getpid() and path is not None:
            try:
                path.rmdir()
            except OSError:
                pass
            _totals.pop((_root, pid), None)


class SandboxCgroup:
    """The cgroups of one sandbox: created with its limits, joined by the sandbox's first process (the launch
    command writes its own pid into ``procs_files``), emptied and removed at cleanup. Its memory cgroup is made in
    the process's ``total_group``."""

    def __init__(self, name: str, memory_mb: int | None, max_procs: int | None):
        self.dirs: list[Path] = []
        self.controllers: set[str] = set()
        roots, _why = cgroup_support()
        for controller, root in roots.items():
            limit = memory_mb if controller == "memory" else max_procs
            if not limit:
                continue
            memory_root = roots.get("memory")
            path = ((total_group(memory_root) if root == memory_root else None) or root) / name
            try:
                path.mkdir(exist_ok=True)
                if controller == "pids":
                    (path / "pids.max").write_text(str(limit))
                elif (path / "memory.max").exists():
                    (path / "memory.max").write_text(str(limit * 1024 * 1024))
                    if (path / "memory.swap.max").exists():
                        (path / "memory.swap.max").write_text("0")
                else:
                    (path / "memory.limit_in_bytes").write_text(str(limit * 1024 * 1024))
                    swap = path / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        try:
                            swap.write_text(str(limit * 1024 * 1024))
                        except OSError:
                            pass
                self.dirs.append(path)
                self.controllers.add(controller)
            except OSError:
                self._remove(path)

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def peak_memory_bytes(self) -> int | None:
        for d in self.dirs:
            for name in ("memory.peak", "memory.max_usage_in_bytes"):
                try:
                    return int((d / name).read_text())
                except (OSError, ValueError):
                    continue
        return None

    def kill_all(self) -> None:
        """SIGKILL every process still in the sandbox's cgroups (a survivor that escaped its pid namespace would be
        here)."""
        for d in self.dirs:
            kill = d / "cgroup.kill"
            if kill.exists():
                try:
                    kill.write_text("1")
                    continue
                except OSError:
                    pass
            for _ in range(50):
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    break
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            self._remove(d)
        self.dirs = []

    @staticmethod
    def _remove(path: Path) -> None:
        for _ in range(100):
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)  # its last processes are still exiting


def _libc():
    return ctypes.CDLL(None, use_errno=True)


@functools.lru_cache(maxsize=1)
def quota_support() -> tuple[bool, str]:
    if os.environ.get("AWM_SANDBOX") == "off-quota":
        return False, "AWM_SANDBOX=off-quota"
    if os.geteuid() != 0:
        return False, "awm is not running as root, so it cannot mount a size-capped tmpfs for a sandbox's directory"
    return True, ""


def mount_quota(path: Path, size_mb: int, uid: int, gid: int) -> bool:
    """Mount a tmpfs of ``size_mb`` on the empty directory ``path``, owned by the sandbox's uid (its disk quota:
    writes past the size fail with ENOSPC). Its pages count against the memory cgroup of whoever writes them."""
    ok, _ = quota_support()
    if not ok:
        return False
    source = f"{MOUNT_SOURCE}-{os.getpid()}".encode()
    options = f"size={size_mb}m,mode=0711,uid={uid},gid={gid}".encode()  # 0711: bubblewrap (capabilities dropped) must enter it
    flags = 0x2 | 0x4 | 0x8  # MS_NOSUID | MS_NODEV | MS_NOEXEC
    if _libc().mount(source, os.fsencode(path), b"tmpfs", flags, options) != 0:
        return False
    return True


def unmount_quota(path: Path) -> None:
    _libc().umount2(os.fsencode(path), MNT_DETACH)


_OCTAL_ESCAPE = re.compile(rb"\\([0-7]{3})")


def mountinfo_path(field: str) -> str:
    """A path as ``/proc/self/mountinfo`` writes it, decoded: the kernel escapes space, tab, newline and backslash
    (``\\040``, ``\\011``, ``\\012``, ``\\134``) as three octal digits; every such escape is undone, on the bytes (the
    path's own bytes need not be UTF-8)."""
    raw = os.fsencode(field)
    return os.fsdecode(_OCTAL_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8) & 0xFF]), raw))


def sweep_stale_quota_mounts() -> int:
    """Unmount quota tmpfs left by awm processes that died without cleaning up (SIGKILL); returns how many."""
    if not quota_support()[0]:
        return 0
    swept = 0
    try:
        lines = os.fsdecode(Path("/proc/self/mountinfo").read_bytes()).split("\n")
    except OSError:
        return 0
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        after = fields[1].split()
        if len(after) < 2 or after[0] != "tmpfs" or not after[1].startswith(MOUNT_SOURCE + "-"):
            continue
        try:
            owner = int(after[1].rsplit("-", 1)[1])
        except ValueError:
            continue
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        unmount_quota(Path(mountinfo_path(fields[0].split()[4])))
        swept += 1
    return swept


def sweep_stale_cgroups() -> int:
    """Remove sandbox cgroups (``awm-<label>-<pid>-<tag>``) whose awm process is gone (it was SIGKILLed, or never
    cleaned up): their processes are killed first. Returns how many went."""
    roots, _ = cgroup_support()
    swept = 0
    for root in roots.values():
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for entry in entries:
            parts = entry.name.split("-")
            if not entry.is_dir() or len(parts) < 4 or parts[0] != "awm" or not parts[-2].isdigit():
                continue
            owner = int(parts[-2])
            if owner == os.getpid() or Path(f"/proc/{owner}").exists():
                continue
            # a process's total group holds its sandboxes' groups: they go first
            inner = [d for d in entry.iterdir() if d.is_dir()] if parts[1] == TOTAL_LABEL else []
            group = SandboxCgroup.__new__(SandboxCgroup)
            group.dirs, group.controllers = [*inner, entry], set()
            group.remove()
            swept += 1
    return swept
