"""awm's side of a sandboxed MCP server's pipes: ``python -I relay.py MESSAGE_LIMIT LOG_LIMIT -- ARGV…`` (run as a
script: it imports nothing of awm, only the standard library).

The MCP client reads a stdio server's stdout a line (one JSON-RPC message) at a time and keeps the whole line in
memory until its newline comes, and a server's stderr is a log file on the host: a server writing without end
would take awm's process to all of the host's memory, or fill the host's disk. The relay sits between them. It
starts ARGV (the sandboxed server's command line) with its own stdin, and copies on, as they come:

- the server's stdout to its stdout, each line counted: a line over MESSAGE_LIMIT bytes ends the server and the
  relay (awm sees the connection close: the calls in flight fail, nothing more of the line is kept). With
  MESSAGE_LIMIT 0 stdout is a log like stderr (an HTTP server's, whose messages go over its port);
- the server's stderr to its stderr (the log), up to LOG_LIMIT bytes in all, then one line saying the rest was
  dropped.

Ending the relay ends the server (bubblewrap dies with its parent).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


class _Log:
    """The log's byte budget, shared by the streams written into it."""

    def __init__(self, fd: int, limit: int):
        self.fd, self.left, self.lock = fd, limit, threading.Lock()

    def write(self, chunk: bytes) -> None:
        with self.lock:
            if self.left <= 0:
                return
            kept = chunk[:self.left]
            self.left -= len(chunk)
            _write_all(self.fd, kept)
            if self.left <= 0:
                _write_all(self.fd, b"\nawm: the server's log reached its limit: the rest is dropped\n")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _copy_log(source: int, log: _Log) -> None:
    try:
        while chunk := os.read(source, 1 << 16):
            log.write(chunk)
    except OSError:
        pass


def relay(message_limit: int, log_limit: int, argv: list[str]) -> int:
    child = subprocess.Popen(argv, stdin=0, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
    log = _Log(2, log_limit)
    threading.Thread(target=_copy_log, args=(child.stderr.fileno(), log), daemon=True).start()
    source = child.stdout.fileno()
    line = 0  # bytes of the current line forwarded so far
    try:
        if not message_limit:  # stdout is a log too
            _copy_log(source, log)
            return child.wait()
        while chunk := os.read(source, 1 << 16):
            parts = chunk.split(b"\n")  # the first continues the current line, the last starts the next one
            longest = max([line + len(parts[0]), *(len(part) for part in parts[1:])])
            line = line + len(parts[0]) if len(parts) == 1 else len(parts[-1])
            if longest > message_limit:
                log.left = max(log.left, 0) + 200  # this line is said whatever the log took
                log.write(f"\nawm: the server wrote a message over {message_limit} bytes: stopped\n".encode())
                return 1
            _write_all(1, chunk)
    except (BrokenPipeError, KeyboardInterrupt):
        return 1
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    return child.returncode or 0


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the clean-up above ends the server
    marker = sys.argv.index("--")
    return relay(int(sys.argv[1]), int(sys.argv[2]), sys.argv[marker + 1:])


if __name__ == "__main__":
    sys.exit(main())
