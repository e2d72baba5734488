"""File operations of the (unsandboxed) parent in directories sandboxed code could write.

Sandboxed code may have replaced any entry of such a directory by a symlink, a hard link to a file of the
parent's, a FIFO or a device node. Every operation here therefore starts from a directory the parent trusts
(its own, created by it, whose parent the sandbox cannot write), walks each further component with
``O_NOFOLLOW | O_DIRECTORY``, opens files with ``O_NOFOLLOW | O_NONBLOCK`` and checks with ``fstat`` that it got
a regular file with a single link before reading a byte; deletes go through the directory's descriptor.
Anything else is refused with ``UnsafeEntry`` naming the entry and what it was.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CHUNK = 1 << 20
MAX_FILE = int(os.environ.get("AWM_SANDBOX_MAX_FILE_MB") or 4096) * 1024 * 1024  # a file taken out of a sandbox
SPARSE_SLACK = 1 << 20


class UnsafeEntry(OSError):
    """An entry of a sandbox-writable directory that is not what it must be (symlink, hard link, special file)."""


class TooLarge(UnsafeEntry):
    """A file over the size the caller takes out of a sandbox."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def open_dir(trusted: Path | str, relative: Path | str = "") -> int:
    """A descriptor of ``trusted/relative``: ``trusted`` is opened as given (the parent made it), every component of
    ``relative`` without following symlinks. The caller closes it."""
    fd = os.open(str(trusted), DIR_FLAGS)
    try:
        for part in Path(relative).parts:
            if part in ("..", "/"):
                raise UnsafeEntry(f"{relative}: '..' or '/' in a path below a sandbox directory")
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    raise exc from None
                raise UnsafeEntry(f"{Path(trusted) / relative}: {part} is {_kind(st.st_mode)}, not a directory "
                                  "(refused: sandboxed code could have put it there)") from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(dir_fd: int, name: str, where: str = "", max_size: int | None = None) -> int:
    """``name`` in ``dir_fd`` opened for reading, only if it is a regular file with one link (and at most
    ``max_size`` bytes when given)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (40, 6):  # ELOOP (a symlink), ENXIO (a socket)
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            raise UnsafeEntry(f"{where}{name} is {_kind(st.st_mode)} (refused: sandboxed code could have put it "
                              "there)") from None
        if exc.errno == errno.EWOULDBLOCK:  # a file lease (fcntl F_SETLEASE) of the process that owns the file
            raise UnsafeEntry(f"{where}{name} is held under a file lease by sandboxed code (refused: an open would "
                              "wait for it to let go)") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeEntry(f"{where}{name} is {_kind(st.st_mode)} (refused: sandboxed code could have put it there)")
    if st.st_nlink != 1:
        os.close(fd)
        raise UnsafeEntry(f"{where}{name} has {st.st_nlink} hard links (refused: it may be another file of the host)")
    if st.st_size > MAX_FILE:
        os.close(fd)
        raise UnsafeEntry(f"{where}{name} is {st.st_size} bytes, over the {MAX_FILE} taken out of a sandbox")
    if st.st_size > st.st_blocks * 512 + SPARSE_SLACK:
        os.close(fd)
        raise UnsafeEntry(f"{where}{name} is sparse ({st.st_size} bytes in {st.st_blocks * 512} on disk): refused, "
                          "a copy would fill the host's disk")
    if max_size is not None and st.st_size > max_size:
        os.close(fd)
        raise TooLarge(f"{where}{name} is {st.st_size:,} bytes, over the {max_size:,} it may take here")
    return fd


def _copy_fd(src: int, dest: Path, limit: int | None = None) -> None:
    """Copy an open file into ``dest`` (a path in a directory the parent trusts), never following a symlink there;
    at most ``limit`` bytes (what was checked: a sandbox still running may grow the file while it is copied)."""
    out = os.open(str(dest), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    left = MAX_FILE if limit is None else limit
    try:
        os.lseek(src, 0, os.SEEK_SET)
        while left > 0:
            block = os.read(src, min(CHUNK, left))
            if not block:
                break
            left -= len(block)
            view = memoryview(block)
            while view:
                view = view[os.write(out, view):]
    finally:
        os.close(out)


def take_file(dir_fd: int, name: str, dest: Path, where: str = "", max_size: int | None = None) -> bool:
    """Move ``name`` out of a sandbox directory into ``dest`` (copied through its descriptor, then unlinked there).
    False when there is no such entry; ``UnsafeEntry`` when it is not a regular file of one link, or is over
    ``max_size`` bytes."""
    try:
        fd = open_regular(dir_fd, name, where, max_size)
    except FileNotFoundError:
        return False
    try:
        _copy_fd(fd, dest, min(os.fstat(fd).st_size, MAX_FILE if max_size is None else max_size))
    finally:
        os.close(fd)
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    return True


def read_file(trusted: Path | str, relative: Path | str, limit: int | None = None) -> bytes:
    """The bytes of a regular file below ``trusted`` (``limit``: at most that many)."""
    rel = Path(relative)
    dfd = open_dir(trusted, rel.parent)
    try:
        fd = open_regular(dfd, rel.name, f"{Path(trusted) / rel.parent}/")
    finally:
        os.close(dfd)
    try:
        chunks, total = [], 0
        while limit is None or total < limit:
            block = os.read(fd, CHUNK if limit is None else min(CHUNK, limit - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def copy_in(src: Path | str, dir_fd: int, name: str, uid: int | None = None, gid: int | None = None) -> None:
    """Create ``name`` (it must not exist: O_EXCL, no symlink followed) in a sandbox directory with ``src``'s bytes,
    owned by the sandbox's uid when given."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with open(src, "rb") as fh:
            while True:
                block = fh.read(CHUNK)
                if not block:
                    break
                view = memoryview(block)
                while view:
                    view = view[os.write(fd, view):]
        if uid is not None:
            os.fchown(fd, uid, gid if gid is not None else uid)
    finally:
        os.close(fd)


def make_dir(dir_fd: int, name: str, uid: int | None = None, gid: int | None = None) -> int:
    """A new directory ``name`` in ``dir_fd`` (it must not exist), owned by the sandbox's uid when given; returns its
    descriptor."""
    os.mkdir(name, 0o700, dir_fd=dir_fd)
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    if uid is not None:
        os.fchown(fd, uid, gid if gid is not None else uid)
    return fd


_untrusted: set[str] = set()


def mark_untrusted(path: Path | str) -> None:
    """``path`` is (or was) writable by sandboxed code: whatever is below it is read only through ``open_dir``."""
    _untrusted.add(os.path.abspath(str(path)))


def untrusted_root(path: Path | str) -> Path | None:
    """The sandbox-writable directory ``path`` lies in, if any."""
    p = Path(os.path.abspath(str(path)))
    for candidate in (p, *p.parents):
        if str(candidate) in _untrusted:
            return candidate
    return None


def _open_source(src: Path) -> int:
    """``src`` opened for reading: below a sandbox-writable directory every component is walked without following
    symlinks; elsewhere the file itself must still be a regular file with one link, opened without following a
    symlink."""
    root = untrusted_root(src)
    if root is not None and root != Path(os.path.abspath(str(src))):
        dfd = open_dir(root, Path(os.path.abspath(str(src))).parent.relative_to(root))
    else:
        dfd = os.open(str(Path(src).parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_regular(dfd, Path(src).name, f"{Path(src).parent}/")
    finally:
        os.close(dfd)


def copy_out(src: Path, dest: Path) -> None:
    """Copy the regular file ``src`` (see ``_open_source``) to ``dest`` (a path the parent trusts)."""
    fd = _open_source(src)
    try:
        _copy_fd(fd, dest)
    finally:
        os.close(fd)


def copy_into(src: Path, dir_fd: int, name: str, mode: int = 0o444) -> None:
    """Copy the regular file ``src`` (see ``_open_source``) to a new file ``name`` (O_EXCL, no symlink followed) in
    the directory ``dir_fd``, owned by awm, with ``mode``."""
    fd = _open_source(src)
    try:
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            while True:
                block = os.read(fd, CHUNK)
                if not block:
                    break
                view = memoryview(block)
                while view:
                    view = view[os.write(out, view):]
            os.fchmod(out, mode)
        finally:
            os.close(out)
    finally:
        os.close(fd)


REMOVE_LIMIT = 10_000_000  # entries one removal goes through (sandboxed code still running could add them for ever)


def remove_below(dir_fd: int, name: str) -> None:
    """Remove ``name`` in ``dir_fd`` and everything below it, never following a symlink, ignoring errors (as
    ``shutil.rmtree(..., ignore_errors=True)``), at any depth: ``shutil.rmtree`` recurses once per level, so a tree
    sandboxed code made deeper than the recursion limit raised ``RecursionError``. Here every subdirectory is first
    moved up into the top directory being removed (a rename inside the tree), so no walk is ever more than one
    level deep and no more than two descriptors are open."""
    try:
        top = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        return
    seen, serial = 0, 0
    try:
        pending: list[str | None] = [None]  # None: the top itself; else a directory moved up into it
        while pending and seen < REMOVE_LIMIT:
            sub = pending.pop()
            try:
                here = top if sub is None else os.open(sub, DIR_FLAGS, dir_fd=top)
            except OSError:
                continue
            try:
                with os.scandir(here) as entries:
                    for entry in entries:
                        seen += 1
                        try:
                            if not entry.is_dir(follow_symlinks=False):
                                os.unlink(entry.name, dir_fd=here)
                            elif sub is None:
                                pending.append(entry.name)
                            else:
                                while True:
                                    serial += 1
                                    moved = f".awm-removing-{serial}"
                                    try:
                                        os.stat(moved, dir_fd=top, follow_symlinks=False)
                                    except FileNotFoundError:
                                        break
                                os.rename(entry.name, moved, src_dir_fd=here, dst_dir_fd=top)
                                pending.append(moved)
                        except OSError:
                            pass
            except OSError:
                pass
            finally:
                if here != top:
                    os.close(here)
            if sub is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(sub, dir_fd=top)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=dir_fd)


def remove_tree(path: Path | str) -> None:
    """``remove_below`` for a path whose parent directory the caller trusts (its own)."""
    path = Path(os.path.abspath(str(path)))
    try:
        parent = os.open(str(path.parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        remove_below(parent, path.name)
    finally:
        os.close(parent)
