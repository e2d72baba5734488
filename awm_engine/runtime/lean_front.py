"""``awm env serve``'s front while a warm worker serves the episode: Python's built-in modules and nothing else.

Once the episode is served by a worker taken from the warm service, the ``awm env serve`` process ``exec``s
``python -I -S`` importing this file from its directory (``lean_handoff.go_lean``): the same process (same pid, the
worker's sockets, the listening socket, the lease), holding about 9 MB instead of the whole engine's 32 MB. It does
the front's whole work on the call path, as the engine's ``ServeFront`` would:

- accepts each connection, reads its first request's head, refuses a foreign ``Host``, a foreign ``Origin``, a
  cross-site request or a missing bearer token (``http_guard``, the same file the engine uses), and hands the socket
  with what was read to the worker over its descriptor channel;
- appends each call record the worker sends to ``calls.jsonl`` (``CallsLog``'s encoding and byte limit);
- copies the worker's output into ``server.log`` (``copy_capped``'s cap and note).

Everything else goes back to the engine: the process ``exec``s ``awm`` again (its own command line; the state on a
memfd named by ``AWM_SERVE_STATE_FD``) when it is told to stop (SIGINT, SIGTERM, ``--exit-with-parent``) — the
engine then closes the episode and moves its databases — and when the worker needs the engine: it died, it said a
handler would not stop, or it sent anything but a plain call record (a line this front does not take as exactly
what an honest worker sends is not read: the engine reads it, as it would have). SIGINT and SIGTERM are blocked
across each ``exec`` (``lean_handoff.hold_stops``): one sent while the next program starts is taken once it has set
its handlers — never lost, never killing the process — and one sent while the engine cleans up cannot cut it short.
"""
import _json
import _signal
import _socket
import posix
import select
import sys
import time

if __package__:
    from awm_engine.runtime import http_guard, http_head
else:  # imported from its own directory by ``python -I -S``: the two helper files beside it, nothing of the package
    sys.path.append(__file__.rpartition("/")[0])
    import http_guard  # noqa: E402
    import http_head  # noqa: E402

FORMAT = 2  # (2: the control bytes not taken follow the state's line, raw)
STATE_ENV = "AWM_SERVE_STATE_FD"
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
READ = 1 << 16
ACCEPT_SHORTAGES = {24, 23, 105, 12}  # EMFILE, ENFILE, ENOBUFS, ENOMEM: wait for admissions to end
ACCEPT_SKIPPED = {103, 71, 1}  # ECONNABORTED, EPROTO, EPERM: that connection only
STOP_SIGNALS = (_signal.SIGINT, _signal.SIGTERM)


# --- JSON with _json alone (what ``json.loads`` and ``data.jsonl.dumps_text`` give, for what an honest worker sends)

class _Decoding:  # the attributes ``_json``'s scanner reads of a ``json.JSONDecoder``
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = _json.make_scanner(_Decoding())
_plain = _json.make_encoder(None, str, _json.encode_basestring, None, ": ", ", ", False, False, True)
_ascii = _json.make_encoder(None, str, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)


def loads_line(line: bytes):
    """The object of one line as an honest worker writes it (UTF-8, no space around it, its newline); None for any
    other line (it is then left to the engine, which reads every line as ``json.loads``)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.endswith("\n") or not text or text[0] in " \t\r\n":
        return None
    try:
        obj, end = _scan(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    return obj if end == len(text) - 1 else None


def dumps_text(obj) -> str:
    """``data.jsonl.dumps_text(obj, default=str)``: non-ASCII kept, unless a lone surrogate is in it."""
    text = "".join(_plain(obj, 0))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(_ascii(obj, 0))
    return text


class CallsLog:
    """``mcp_server.CallsLog`` here: the same lines, notes and byte limit (``left`` carried across the ``exec``s)."""

    def __init__(self, path: str, left: int):
        self.fd = posix.open(path, posix.O_WRONLY | posix.O_APPEND | posix.O_CREAT | posix.O_CLOEXEC, 0o644)
        self.left = left

    def write(self, record) -> None:
        if self.left <= 0 or type(record) is not dict:
            return
        try:
            line = (dumps_text(record) + "\n").encode()
        except (ValueError, RecursionError):
            line = b'{"note": "a call record the worker sent could not be written"}\n'
        if len(line) > self.left:
            line = b'{"note": "calls.jsonl reached its size limit: later calls are not recorded"}\n'
            self.left = 0
        else:
            self.left -= len(line)
        _write_all(self.fd, line)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[posix.write(fd, view):]


class LogCopy:
    """``sandbox.output.copy_capped`` on the worker's output, one read at a time."""

    def __init__(self, source: int, path: str, cap: int, note: bytes):
        self.source = source
        self.fd = posix.open(path, posix.O_WRONLY | posix.O_APPEND | posix.O_CREAT | posix.O_CLOEXEC, 0o644)
        self.note = note
        try:
            self.room = cap - posix.fstat(self.fd).st_size
        except OSError:
            self.room = 0
        self.noted = self.room <= 0

    def pump(self) -> bool:
        """One read; False at the output's end."""
        try:
            block = posix.read(self.source, READ)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not block:
            return False
        try:
            if self.room > 0:
                keep = block[:self.room]
                self.room -= len(keep)
                _write_all(self.fd, keep)
            if self.room <= 0 and not self.noted:
                self.noted = True
                _write_all(self.fd, self.note)
        except OSError:
            pass
        return True


# --- the front

class Admission:
    __slots__ = ("sock", "data", "deadline")

    def __init__(self, sock, deadline: float):
        self.sock, self.data, self.deadline = sock, b"", deadline


class LeanFront:
    def __init__(self, state: dict):
        self.state = state
        fds = state["fds"]
        self.listener = _socket.socket(fileno=fds["listener"])
        self.listener.setblocking(False)
        self.channel = _socket.socket(fileno=fds["channel"])
        self.control = fds["control"]
        posix.set_blocking(self.control, False)
        self.pidfd = fds["pidfd"]
        self.output = fds["output"]
        posix.set_blocking(self.output, False)
        for fd in fds.values():  # kept across the exec back only when it comes (``handback``)
            posix.set_inheritable(fd, False)
        front = state["front"]
        port = front["port"]
        self.hosts, self.origins = http_guard.allowed_hosts(port), http_guard.allowed_origins(port)
        self.token = front["token"]
        self.head_limit, self.message_limit = front["head_limit"], front["channel_message"] - 1
        self.head_timeout, self.max_admitting = front["head_timeout"], front["max_admitting"]
        self.line_limit = front["line_limit"]
        self.parent = front["exit_with_parent"]
        self.calls = CallsLog(state["calls"]["path"], state["calls"]["left"])
        log = state["log"]
        self.log = LogCopy(self.output, log["path"], log["cap"], log["note"].encode())
        self.pending = bytearray(state["control_prefix"])  # control bytes not taken yet
        self.scanned = 0  # of ``pending``: no newline before this
        self.admitting: dict[int, Admission] = {}
        self.poller = select.poll()
        self.accepting = False
        self.paused_until = 0.0
        self.why = ""
        self.wake_r, wake_w = posix.pipe()
        posix.set_blocking(self.wake_r, False)
        posix.set_blocking(wake_w, False)
        _signal.set_wakeup_fd(wake_w)
        for signum in STOP_SIGNALS:
            _signal.signal(signum, self._on_signal)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, STOP_SIGNALS)  # (held by the engine: one sent meanwhile comes)

    def _on_signal(self, signum, frame) -> None:
        self.why = "stop"  # (also when the worker needs the engine: the engine would serve on, the stop be lost)

    # the worker's side

    def take_control(self) -> None:
        """Read what the worker sent (a bounded number of reads per turn: a worker that writes without end never
        keeps clients waiting); take the plain call records; stop at anything else (the engine's to read)."""
        for _ in range(16):
            if self.why:
                return
            try:
                chunk = posix.read(self.control, READ)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.why = "worker"  # the worker closed its end (or it died): the engine sees the end too
                return
            self.pending += chunk
            self._take_lines()

    def _take_lines(self) -> None:
        while not self.why:
            end = self.pending.find(b"\n", self.scanned)
            if end < 0:
                self.scanned = len(self.pending)
                if len(self.pending) > self.line_limit:
                    self.why = "worker"  # over the engine's line limit: it says so and replaces the worker
                return
            self.scanned = 0
            if end >= self.line_limit:
                self.why = "worker"
                return
            msg = loads_line(bytes(self.pending[:end + 1]))
            if type(msg) is not dict or "id" in msg or "event" not in msg or \
                    (msg.get("event") == "call" and msg.get("stuck")):
                self.why = "worker"  # an answer to no request, a stuck handler, or a line not plain: the engine's
                return
            del self.pending[:end + 1]
            if msg.get("event") == "call":
                self.calls.write(msg.get("record"))

    # the clients' side

    def accept(self) -> None:
        while len(self.admitting) < self.max_admitting:
            try:
                fd, _ = self.listener._accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in ACCEPT_SHORTAGES:
                    self.paused_until = time.monotonic() + 0.1
                    return
                if exc.errno in ACCEPT_SKIPPED:
                    continue
                raise
            sock = _socket.socket(fileno=fd)
            sock.setblocking(False)
            self.admitting[fd] = Admission(sock, time.monotonic() + self.head_timeout)
            self.poller.register(fd, select.POLLIN)

    def admit(self, fd: int) -> None:
        adm = self.admitting[fd]
        room = self.message_limit - len(adm.data)
        if room <= 0:
            return self._refuse(fd, 431, "Request Header Fields Too Large", {})
        try:
            chunk = adm.sock.recv(min(READ, room))
        except BlockingIOError:
            return
        except OSError:
            return self._drop(fd)
        if not chunk:
            return self._drop(fd)
        adm.data += chunk
        end = adm.data.find(b"\r\n\r\n")
        if end < 0:
            if len(adm.data) > self.head_limit:
                self._refuse(fd, 431, "Request Header Fields Too Large", {})
            return
        parsed = http_head.parse_head(adm.data[:end])
        if parsed is None:
            return self._refuse(fd, 400, "Bad Request", {})
        refused = http_guard.refusal(parsed[3], self.hosts, self.origins, self.token)
        if refused is not None:
            return self._refuse(fd, *refused)
        try:
            self.channel.sendmsg([b"h" + adm.data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                                      fd.to_bytes(4, sys.byteorder))])
        except OSError:
            return self._refuse(fd, 503, "Service Unavailable: the environment is restarting", {})
        self._drop(fd)

    def _refuse(self, fd: int, status: int, text: str, extra: dict) -> None:
        try:
            self.admitting[fd].sock.send(http_head.plain_reply(status, text, extra))
        except OSError:
            pass
        self._drop(fd)

    def _drop(self, fd: int) -> None:
        adm = self.admitting.pop(fd)
        self.poller.unregister(fd)
        adm.sock.close()

    # the loop

    def run(self) -> str:
        self.poller.register(self.control, select.POLLIN)
        self.poller.register(self.pidfd, select.POLLIN)
        self.poller.register(self.output, select.POLLIN)
        self.poller.register(self.wake_r, select.POLLIN)
        self._take_lines()  # what the engine had read and not yet taken
        output_open = True
        while not self.why:
            now = time.monotonic()
            want = len(self.admitting) < self.max_admitting and now >= self.paused_until
            if want != self.accepting:
                (self.poller.register(self.listener.fileno(), select.POLLIN) if want
                 else self.poller.unregister(self.listener.fileno()))
                self.accepting = want
            wait = min([a.deadline for a in self.admitting.values()] + [now + 1.0])
            if self.paused_until > now:
                wait = min(wait, self.paused_until)
            events = self.poller.poll(max(0, int((wait - now) * 1000) + 1))
            for fd, _ in events:
                if fd == self.listener.fileno():
                    self.accept()
                elif fd == self.control:
                    self.take_control()
                elif fd == self.output:
                    if not self.log.pump():
                        self.poller.unregister(self.output)
                        output_open = False
                elif fd == self.pidfd:
                    self.why = self.why or "worker"
                elif fd == self.wake_r:
                    try:
                        posix.read(self.wake_r, 64)
                    except OSError:
                        pass
                elif fd in self.admitting:
                    self.admit(fd)
            now = time.monotonic()
            for fd in [fd for fd, a in self.admitting.items() if a.deadline <= now]:
                self._drop(fd)
            if self.parent is not None and posix.getppid() != self.parent:
                self.why = self.why or "stop"
            self._reap()
        while output_open and _readable(self.output) and self.log.pump():
            pass
        return self.why

    @staticmethod
    def _reap() -> None:
        """Children the engine left running when it exec'd this (a template build): collected, never zombies."""
        while True:
            try:
                pid, _ = posix.waitpid(-1, posix.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def handback(self) -> None:
        """``exec`` the engine again (``awm``'s own command line) with the state; connections being admitted are
        closed (their clients see the connection end before any request was read: they may send it again)."""
        # blocked across the exec (pending, not lost): the engine takes one sent from now on once it holds the
        # episode again — then it stops, or, when it is already stopping, ignores it (the clean-up is not cut short);
        # one sent before is in ``why`` (blocking runs its handler)
        _signal.pthread_sigmask(_signal.SIG_BLOCK, STOP_SIGNALS)
        for fd in list(self.admitting):
            self._drop(fd)
        self.state["control_prefix"] = self.pending
        self.state["calls"]["left"] = self.calls.left
        hand_back(self.state, self.why)


def hand_back(state: dict, why: str) -> None:
    """``exec`` the engine with ``state``, saying ``why``; the stop signals blocked across it (see ``handback``)."""
    _signal.pthread_sigmask(_signal.SIG_BLOCK, STOP_SIGNALS)
    state["why"] = why
    try:  # (a file description's flag: the engine's log thread reads it blocking)
        posix.set_blocking(state["fds"]["output"], True)
    except OSError:
        pass
    for fd in state["fds"].values():
        posix.set_inheritable(fd, True)
    execute(state["engine"], state)


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def write_state(state: dict) -> int:
    """The state on an inheritable memfd (its number goes in ``STATE_ENV``): a line of JSON, then the control bytes
    not taken (``control_prefix``) as they are — in the JSON, as a string, each byte of 0x80 or more took six, and a
    worker's 16 MiB of them took the process to 340 MB handing them over and reading them back."""
    fields = {k: v for k, v in state.items() if k != "control_prefix"}
    fd = posix.memfd_create("awm-serve-state", 0)
    _write_all(fd, "".join(_ascii(fields, 0)).encode() + b"\n")
    _write_all(fd, state.get("control_prefix", b""))
    posix.lseek(fd, 0, 0)
    return fd


def read_state(fd: int) -> dict:
    chunks = []
    while True:
        chunk = posix.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    posix.close(fd)
    data = b"".join(chunks)
    del chunks
    end = data.find(b"\n") + 1
    obj = loads_line(data[:end]) if end else None
    if type(obj) is not dict or obj.get("format") != FORMAT:
        raise ValueError("not a state of this awm")
    obj["control_prefix"] = data[end:]
    return obj


def execute(argv: list, state: dict) -> None:
    """Replace this process by ``argv`` with ``state`` handed over."""
    fd = write_state(state)
    posix.putenv(STATE_ENV, str(fd))
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    posix.execv(argv[0], argv)


def nondumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)``, as ``sandbox.host.harden_parent`` does for the engine (an exec made this
    process dumpable again): its memory and ``/proc`` entries closed to processes of the same user. Through
    ``_ctypes`` alone (``ctypes`` itself costs 0.5 MB more)."""
    try:
        import _ctypes

        class c_int(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = c_int

        libc = _ctypes.dlopen(None, 0)
        prctl = Function(_ctypes.dlsym(libc, "prctl"))
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (ImportError, OSError, AttributeError, TypeError, ValueError):
        return False


def main() -> None:
    hardened = nondumpable()
    state = read_state(int(posix.environ.pop(STATE_ENV.encode())))
    posix.unsetenv(STATE_ENV)
    if not hardened and state["front"]["need_nondumpable"]:
        hand_back(state, "lean_refused")  # the engine serves on: it never runs without what it had
    front = None
    try:
        front = LeanFront(state)
        front.run()
    except Exception as exc:  # a fault of this front (a write error on calls.jsonl …): said, and the engine takes
        # the episode back — ending here would lose it (the lease closes: the service removes the worker's directory,
        # databases too); it serves on with its own front, or stops when that was asked
        try:
            posix.write(2, f"awm: the lean front failed ({type(exc).__name__}: {exc}); the engine takes the episode "
                           "back (AWM_SERVE_LEAN=0 keeps the engine's front always)\n".encode("utf-8", "replace"))
        except OSError:
            pass
        if front is None:
            hand_back(state, "lean_failed")
        front.why = front.why if front.why == "stop" else "lean_failed"
    front.handback()


if __name__ == "__main__":
    main()
