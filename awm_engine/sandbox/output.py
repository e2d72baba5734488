"""A sandboxed process's stdout and stderr, copied into a host log file that the sandbox never holds.

Handing a sandbox the descriptor of a host file as its stdout gives it that file: it can ``posix_fallocate`` or
``ftruncate`` it to any size up to its file-size limit (gigabytes of the host's disk in milliseconds, outside its
directory's quota), clear ``O_APPEND`` and overwrite what is there, or reopen it through ``/proc/self/fd``. So the
launcher gives it the write end of a pipe instead (``Sandbox.popen`` does it for any regular file passed as stdout
or stderr), and a thread of awm's copies what arrives into the file — up to ``LOG_CAP`` bytes in the file, what it
held before included (a worker restarted on the same log gets no fresh allowance); past that it notes once that the
rest was dropped and goes on reading without keeping anything, so the process never blocks on a full pipe.
"""
from __future__ import annotations

import fcntl
import os
import stat
import threading

MB = 1 << 20
LOG_CAP = int(os.environ.get("AWM_SANDBOX_LOG_MB") or 16) * MB  # the most a sandbox's log file holds
F_SETPIPE_SZ = 1031
CHUNK = 1 << 16


def cap_note(cap: int) -> bytes:
    return (f"\n[awm: this log reached its cap of {cap:,} bytes ($AWM_SANDBOX_LOG_MB); what the sandboxed process "
            "wrote after that was dropped]\n").encode()


def is_regular_file(target) -> bool:
    """Whether ``target`` (a file object or a descriptor, as ``subprocess`` takes for stdout) is a regular file."""
    try:
        fd = target if isinstance(target, int) else target.fileno()
        return fd >= 0 and stat.S_ISREG(os.fstat(fd).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def copy_capped(read_fd: int, out_fd: int, cap: int = LOG_CAP, stop_fd: int | None = None) -> None:
    """Copy a pipe into a log file until the pipe's end, keeping at most ``cap`` bytes in the file (what it held
    before included), noting once where the rest was dropped; the rest is read and dropped (the writer never blocks
    on a full pipe). Closes both descriptors — unless ``stop_fd`` became readable first: then it returns between two
    reads, ``read_fd`` left open for whoever copies on (``lean_front.LogCopy``; nothing read is lost)."""
    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(out_fd, view):]

    stopped = False
    try:
        try:
            room = cap - os.fstat(out_fd).st_size
        except OSError:
            room = 0
        noted = room <= 0  # a file already at its cap was noted when it got there
        while True:
            if stop_fd is not None:
                import select

                if stop_fd in select.select([read_fd, stop_fd], [], [])[0]:
                    stopped = True
                    return
            block = os.read(read_fd, CHUNK)
            if not block:
                return
            if room > 0:
                keep = block[:room]
                room -= len(keep)
                write(keep)
            if room <= 0 and not noted:
                noted = True
                write(cap_note(cap))
    except OSError:
        return
    finally:
        if not stopped:
            os.close(read_fd)
        os.close(out_fd)


class CappedLog:
    """``log = CappedLog(file)``; start the process with ``log.write_fd`` as its stdout/stderr, then ``log.start()``
    (the parent's copy of the write end is closed and the copying begins); ``log.close()`` after the process ended
    waits for the last bytes. ``file`` is a file object or descriptor of the parent's (duplicated: the caller may
    close its own at once)."""

    def __init__(self, target, cap: int | None = None):
        self.cap = LOG_CAP if cap is None else cap
        self.out_fd = os.dup(target if isinstance(target, int) else target.fileno())
        os.set_inheritable(self.out_fd, False)
        self.read_fd, self.write_fd = os.pipe2(os.O_CLOEXEC)
        try:  # room for a burst, so a process printing a lot rarely waits on the copy
            fcntl.fcntl(self.write_fd, F_SETPIPE_SZ, MB)
        except OSError:
            pass
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        os.close(self.write_fd)
        self.write_fd = -1
        self._thread = threading.Thread(target=copy_capped, args=(self.read_fd, self.out_fd, self.cap),
                                        name="awm-sandbox-log", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Wait for the copy to end (at end of file: every process holding the pipe is gone)."""
        if self.write_fd >= 0:  # never started (the process did not start): nothing will come
            os.close(self.write_fd)
            self.write_fd = -1
            if self._thread is None:
                os.close(self.read_fd)
                os.close(self.out_fd)
                return
        if self._thread is not None:
            self._thread.join(timeout)
