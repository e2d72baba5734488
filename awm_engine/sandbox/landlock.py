"""Landlock (Linux ≥ 5.13): confine a process's own file writes (and, ABI ≥ 4, its TCP) with no privileges.

Used inside the sandbox just before the untrusted code starts: everything stays readable and executable,
only the listed directories are writable, and (when asked) TCP bind/connect is denied. Restrictions are
inherited by every child and cannot be lifted.
"""
from __future__ import annotations

import ctypes
import os
import struct

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable."""
    try:
        value = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(value))


def fs_access(abi: int) -> int:
    """Every file-system right this ABI knows (all of them are 'handled', i.e. denied unless a rule allows)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


def restrict(writable: list[str], deny_tcp: bool = False, scope: bool = False,
             readable: list[str] | None = None, connect_ports: list[int] | None = None,
             bind_ports: list[int] | None = None) -> int:
    """Confine this process: read/execute everywhere (or, with ``readable``, only below those paths: ``[]`` reads
    no file at all), write only below ``writable`` (plus /dev/null & co); with ``scope`` (ABI ≥ 6) it can neither
    connect to abstract unix sockets nor signal processes created outside its Landlock domain; with
    ``connect_ports`` (ABI ≥ 4) its TCP connections go only to those ports, on any address, and it binds TCP only
    to ``bind_ports`` (none when not given) and port 0 (a port the kernel picks): a process in the host's network
    namespace that could bind any port would take one a host client connects to later — a local model server not
    up yet, an ``awm env serve --port`` — and read what that client sends it (its API key). Returns the ABI used;
    raises OSError when Landlock is unavailable or a step fails."""
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    libc = _libc()
    handled = fs_access(abi)
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if (deny_tcp and abi >= 4) else 0
    allowed_ports = list(connect_ports) if connect_ports is not None and not deny_tcp and abi >= 4 else []
    binds = sorted({0, *(bind_ports or [])}) if connect_ports is not None and not deny_tcp and abi >= 4 else []
    if connect_ports is not None and abi >= 4:
        net |= NET_CONNECT_TCP | NET_BIND_TCP
    scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if (scope and abi >= 6) else 0
    if abi >= 6:
        attr = struct.pack("QQQ", handled, net, scoped)
    elif abi >= 4:
        attr = struct.pack("QQ", handled, net)
    else:
        attr = struct.pack("Q", handled)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        def allow(path: str, rights: int) -> None:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                return  # a path that does not exist grants nothing
            try:
                if not os.path.isdir(path):
                    rights &= WRITE_FILE | READ_FILE | EXECUTE | TRUNCATE | IOCTL_DEV
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
                if libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), rule,
                                ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)

        for path in ["/"] if readable is None else readable:
            allow(path, READ)
        for right, ports in ((NET_CONNECT_TCP, allowed_ports), (NET_BIND_TCP, binds)):
            for port in ports:
                rule = ctypes.create_string_buffer(struct.pack("=QQ", right, int(port)), 16)
                if libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_NET_PORT), rule,
                                ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for TCP port {port}")
        for device in ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full", "/dev/tty"):
            allow(device, READ_FILE | WRITE_FILE | (IOCTL_DEV if abi >= 5 else 0))
        for path in writable:
            allow(path, handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi
