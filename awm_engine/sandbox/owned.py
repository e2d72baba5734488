"""Temporary directories that say which awm process they belong to, so that what a killed process left is removed.

``owned_dir(prefix)`` makes a directory in the temporary directory with a marker file in it: the owning process's
pid, its start time (``/proc/<pid>/stat``), the boot and the pid namespace. A process stopped by SIGKILL (or anything
that skips its clean-up) leaves its directories; ``sweep_dead_dirs()`` — run at the next pool start — removes those
whose marker names a process that is gone. It never touches a directory without a valid marker, one whose owner is
alive (same pid and start time), one marked in another pid namespace (its processes are not visible here), nor
anything not owned by awm's own uid; it never follows a symlink: the temporary directory is opened once and every
entry is checked and removed through descriptors (``safe_fs.remove_below``).

Only directories sandboxed code cannot write carry a marker (a pool's directory: its workers write only their own
subdirectories; the sandbox view's data files; a replay's copies): a marker there can be trusted.
"""
from __future__ import annotations

import functools
import os
import stat
import tempfile
from pathlib import Path

from awm_engine.sandbox import safe_fs

MARKER = ".awm-owner"
PREFIXES = ("awm_pool_", "awm_view_", "awm_replay_", "awm_raypool_", "awm_verify_", "awm_bfcl_")  # what the sweep looks at (and nothing else)


def start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks after boot), None when there is no such process — or only its
    zombie (it holds nothing any more; an init that does not reap, as in some containers, keeps zombies for good)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')': fields follow the last ')'
    fields = text.rsplit(")", 1)[-1].split()
    if fields and fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else None


@functools.lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def marker_text() -> str:
    return f"pid={os.getpid()}\nppid={os.getppid()}\nstart={start_time(os.getpid()) or ''}\nboot={_boot_id()}\npidns={_pid_namespace()}\n"


def owned_dir(prefix: str) -> Path:
    """A new private directory ``<tmp>/<prefix>XXXX`` (``tempfile.mkdtemp``) marked as this process's."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    mark(path)
    return path


def mark(path: Path | str) -> None:
    """Write the marker into ``path`` (a directory this process made), never following a symlink there."""
    dfd = os.open(str(path), safe_fs.DIR_FLAGS)
    try:
        fd = os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        try:
            os.write(fd, marker_text().encode())
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def owner_of(path: Path | str) -> dict[str, str] | None:
    """The marker of the directory ``path`` (pid, ppid, start, boot, pidns), None without a valid one."""
    try:
        dfd = os.open(str(path), safe_fs.DIR_FLAGS)
    except OSError:
        return None
    try:
        return _owner(dfd)
    finally:
        os.close(dfd)


def _owner(dfd: int) -> dict[str, str] | None:
    """The marker of the directory ``dfd``: only a regular file with one link owned by awm's own uid."""
    try:
        fd = safe_fs.open_regular(dfd, MARKER)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return None
        text = os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return fields if fields.get("pid", "").isdigit() and fields.get("start") else None


def is_dead(owner: dict[str, str]) -> bool:
    """Whether the process a marker names is gone for certain (another boot, or no process with that pid and start
    time). A marker from another pid namespace is never dead: its processes cannot be seen from here."""
    if owner.get("pidns", "") != _pid_namespace():
        return False
    if owner.get("boot") and _boot_id() and owner["boot"] != _boot_id():
        return True
    try:
        now = start_time(int(owner["pid"]))
    except OSError:  # unreadable: it may well be alive
        return False
    return now != owner["start"]


def sweep_dead_dirs(tmp: Path | str | None = None) -> int:
    """Remove the marked directories (``PREFIXES``) of dead awm processes from the temporary directory; returns how
    many went. Quota mounts below them must be gone first (``limits.sweep_stale_quota_mounts``); a directory that
    still cannot be removed whole is left for the next sweep."""
    base = str(tmp or tempfile.gettempdir())
    try:
        tfd = os.open(base, safe_fs.DIR_FLAGS)
    except OSError:
        return 0
    removed = 0
    try:
        for name in os.listdir(tfd):
            if not name.startswith(PREFIXES):
                continue
            try:
                st = os.stat(name, dir_fd=tfd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                    continue
                dfd = os.open(name, safe_fs.DIR_FLAGS, dir_fd=tfd)
            except OSError:
                continue
            try:
                owner = _owner(dfd)
                if owner is None or not is_dead(owner) or os.fstat(dfd).st_ino != st.st_ino:
                    continue
            finally:
                os.close(dfd)
            safe_fs.remove_below(tfd, name)
            try:
                os.stat(name, dir_fd=tfd, follow_symlinks=False)
            except FileNotFoundError:
                removed += 1
    finally:
        os.close(tfd)
    return removed
