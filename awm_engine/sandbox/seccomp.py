"""The sandbox's system-call filter, compiled by libseccomp (the library bubblewrap, Flatpak, Docker and systemd
use) and handed to ``bwrap --seccomp FD`` as a BPF program.

Everything is allowed except the calls untrusted code has no business making: tracing or reading other
processes (``ptrace``, ``process_vm_*``, ``kcmp``), mounting and namespace games (``mount``, ``unshare``,
``setns``, ``clone`` with namespace flags; ``clone3`` answers ENOSYS so libc falls back to ``clone``), the
kernel keyring, BPF, perf, userfaultfd, io_uring (its operations bypass this filter), module and kexec
loading, terminal injection (``ioctl TIOCSTI/TIOCLINUX``), inotify and dnotify (``fcntl F_NOTIFY``): inotify's
instances are counted per host uid, so shared by every sandbox, and both watch files every sandbox shares, and the like. Sockets only of the families a network
namespace contains (unix, IPv4, IPv6, and netlink for routing only): any other fails with EAFNOSUPPORT — ``AF_VSOCK`` above all, which
no network namespace isolates (from a VM it reaches the hypervisor's host, whose VMM may hand the connection on to
a unix socket of a host process). Denied calls fail with EPERM; a call
made through another ABI (i386 ``int 0x80``, x32) kills the process (libseccomp's bad-architecture action).
The filter is loaded by ``init.py`` as the last step before the untrusted code (after the uid drop and the user
namespace, which it would otherwise forbid).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os

ACT_ALLOW = 0x7FFF0000
ACT_ERRNO = 0x00050000
CMP_EQ, CMP_MASKED_EQ = 4, 7

DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "open_by_handle_at", "name_to_handle_at",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "iopl", "ioperm", "vhangup", "lookup_dcookie", "uselib", "nfsservctl", "personality",
    "fanotify_init",
    # inotify: the kernel counts instances and watches per uid of the host's user namespace, over every namespace
    # below it: one sandbox could hold them all for every other sandbox (all run as one uid), and a watch needs no
    # Landlock right, so it would see other sandboxes and the host open the files they all share read-only
    "inotify_init", "inotify_init1", "inotify_add_watch",
)
NAMESPACE_FLAGS = (0x00020000, 0x10000000, 0x20000000, 0x40000000, 0x08000000, 0x04000000, 0x02000000)
#                  NEWNS       NEWUSER     NEWPID      NEWNET      NEWIPC      NEWUTS      NEWCGROUP
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
F_NOTIFY = 1026  # fcntl: directory notifications (dnotify)
S_ISUID, S_ISGID, O_CREAT, O_TMPFILE = 0o4000, 0o2000, 0o100, 0o20000000
SOCKET_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK: what a network namespace holds
AF_NETLINK, NETLINK_ROUTE = 16, 0
CMP_NE, CMP_GT = 1, 6


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _lib():
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        name = ctypes.util.find_library("seccomp")
        if not name:
            return None
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


def available() -> tuple[bool, str]:
    if _lib() is None:
        return False, "libseccomp (Debian package libseccomp2) is not installed"
    try:
        os.close(compiled_filter())
    except OSError as exc:
        return False, f"libseccomp could not compile the filter: {exc}"
    return True, ""


def compiled_filter() -> int:
    """A file descriptor (offset 0) holding the BPF program (as ``bwrap --seccomp FD`` takes it); the caller closes
    it."""
    return _build(export=True)


def load(epoll: bool = True) -> None:
    """Load the filter into this process (sets no-new-privileges; inherited by every child, irreversible).
    ``epoll=False``: no new epoll instance either (``EPOLL``)."""
    _build(export=False, epoll=epoll)


# epoll: the kernel counts watches per uid of the host (fs.epoll.max_user_watches, over every user namespace), which
# every sandbox shares; one sandbox's processes, each adding its 500 descriptors to 500 epoll instances, held them
# all within seconds, and no other sandbox could start an event loop (asyncio registers its wake-up pipe at once):
# every other scenario's worker died at start. A sandbox without network gets none: Python's ``selectors`` tries
# epoll at import and, refused, makes poll the default (``init.py`` does it for its own interpreter, which imported
# ``selectors`` before the filter): asyncio's loops poll, which the kernel counts nowhere. (A
# server with network — MCP-Universe's, on Node — keeps epoll; docs/containment.md says so.)
EPOLL = ("epoll_create", "epoll_create1")


# kernel objects that outlive the process that made them, shared by every process of one IPC namespace (SysV
# segments, queues and semaphores; POSIX message queues), and watches on paths a process may not read (inotify
# needs no Landlock right): what a process that shares its sandbox with others (a verifier host's child) must not
# have
SHARED_OBJECTS = ("shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
                  "semtimedop", "semctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
                  "mq_getsetattr", "inotify_init", "inotify_init1", "inotify_add_watch")


@contextlib.contextmanager
def _filter():
    """A libseccomp context that allows everything, with ``rule(action, name, *comparisons)`` to add to it;
    released at the end."""
    lib = _lib()
    if lib is None:
        raise OSError("libseccomp is not available")
    ctx = lib.seccomp_init(ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")

    def rule(action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return  # not a call of this architecture
        array = (ArgCmp * max(1, len(cmps)))(*[ArgCmp(*c) for c in cmps])
        rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
        if rc < 0:
            raise OSError(-rc, f"seccomp_rule_add({name}) failed")

    try:
        yield lib, ctx, rule
    finally:
        lib.seccomp_release(ctx)


def _load(lib, ctx) -> None:
    rc = lib.seccomp_load(ctx)
    if rc < 0:
        raise OSError(-rc, "seccomp_load failed")


def deny(names: tuple[str, ...]) -> None:
    """Load, on top of the filter this process has, one that fails ``names`` with EPERM (inherited, irreversible)."""
    with _filter() as (lib, ctx, rule):
        for name in names:
            rule(ACT_ERRNO | errno.EPERM, name)
        _load(lib, ctx)


def _build(export: bool, epoll: bool = True) -> int:
    with _filter() as (lib, ctx, rule):
        eperm = ACT_ERRNO | errno.EPERM
        for name in DENIED + (() if epoll else EPOLL):
            rule(eperm, name)
        rule(ACT_ERRNO | errno.ENOSYS, "clone3")  # its flags live in memory a filter cannot read
        for flag in NAMESPACE_FLAGS:
            rule(eperm, "clone", (0, CMP_MASKED_EQ, flag, flag))
        # no set-user-ID or set-group-ID file: a sandbox directory without a size-capped tmpfs (nosuid) of its own
        # lies on a host file system, where anyone who can reach it would run such a file as the sandbox uid — the
        # owner of every sandbox's directory and user namespace
        for bit in (S_ISUID, S_ISGID):
            for call, mode_arg in (("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2), ("creat", 1),
                                   ("mknod", 1), ("mknodat", 2)):
                rule(eperm, call, (mode_arg, CMP_MASKED_EQ, bit, bit))
            for call, flags_arg in (("open", 1), ("openat", 2)):
                for creating in (O_CREAT, O_TMPFILE):
                    rule(eperm, call, (flags_arg, CMP_MASKED_EQ, creating, creating),
                         (flags_arg + 1, CMP_MASKED_EQ, bit, bit))
        rule(ACT_ERRNO | errno.ENOSYS, "openat2")  # its mode lives in memory a filter cannot read (libc falls back)
        for call in ("fcntl", "fcntl64"):  # dnotify: inotify's elder, the same watch on what every sandbox shares
            rule(eperm, call, (1, CMP_EQ, F_NOTIFY, 0))
        for request in (TIOCSTI, TIOCLINUX):
            rule(eperm, "ioctl", (1, CMP_MASKED_EQ, 0xFFFFFFFF, request))
        no_family = ACT_ERRNO | errno.EAFNOSUPPORT
        for call in ("socket", "socketpair"):
            for family in range(max(SOCKET_FAMILIES)):
                if family not in SOCKET_FAMILIES:
                    rule(no_family, call, (0, CMP_EQ, family, 0))
            rule(no_family, call, (0, CMP_GT, max(SOCKET_FAMILIES), 0))  # upper bits set included
        # netlink: routing only (what getaddrinfo asks); not the audit, uevent, netfilter or generic families
        rule(ACT_ERRNO | errno.EPROTONOSUPPORT, "socket", (0, CMP_EQ, AF_NETLINK, 0), (2, CMP_NE, NETLINK_ROUTE, 0))
        if not export:
            _load(lib, ctx)
            return -1
        fd = os.memfd_create("awm-seccomp", os.MFD_CLOEXEC)
        rc = lib.seccomp_export_bpf(ctx, fd)
        if rc < 0:
            os.close(fd)
            raise OSError(-rc, "seccomp_export_bpf failed")
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
