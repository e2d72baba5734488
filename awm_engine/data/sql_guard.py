"""Guards for SQL that awm did not write (generated data files, a user's query box).

``forbid_attach`` makes ``ATTACH`` (and ``VACUUM INTO``, which attaches its target) impossible on a
connection: SQLite's attached-database limit set to 0 plus an authorizer that denies it. ``read_only``
allows only reading statements. ``Deadline`` is a progress handler that stops a statement past its time
or when cancelled (a recursive CTE can otherwise run forever).
"""
from __future__ import annotations

import sqlite3
import threading
import time

SAFE_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
                          "foreign_key_list", "table_list", "collation_list", "function_list"})
_READING = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                      getattr(sqlite3, "SQLITE_RECURSIVE", 33)})


# SQL functions that hand SQLite a raw pointer or a library to load: the two-argument ``fts3_tokenizer`` (this host's
# SQLite is built with SQLITE_ENABLE_FTS3_TOKENIZER, as Debian's is) registers a tokenizer module at any address —
# with the one-argument form leaking where the real one is, the primitive of the published SQLite code-execution
# technique (Check Point, "SELECT code_execution FROM * USING SQLite", 2019). Nothing awm runs itself may call them.
POINTER_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension"})


def _pointer_call(action: int, arg2) -> bool:
    return action == sqlite3.SQLITE_FUNCTION and str(arg2 or "").lower() in POINTER_FUNCTIONS


def deny_attach(action: int, arg1, arg2, db_name, trigger) -> int:
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK


def untrusted_reads(action: int, arg1, arg2, db_name, trigger) -> int:
    """awm's own queries on a database someone else wrote: no ATTACH, no pointer-taking function."""
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) or _pointer_call(action, arg2):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def read_only(action: int, arg1, arg2, db_name, trigger) -> int:
    """Reading statements only: no writes, no ATTACH / VACUUM INTO, only introspection pragmas, no pointer-taking
    function."""
    if _pointer_call(action, arg2):
        return sqlite3.SQLITE_DENY
    if action in _READING:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in SAFE_PRAGMAS:  # introspection only
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def forbid_attach(conn: sqlite3.Connection) -> sqlite3.Connection:
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.set_authorizer(deny_attach)
    return conn


class Deadline:
    """``conn.set_progress_handler(Deadline(10), 10_000)``: non-zero (abort) past ``seconds`` or after
    ``cancel()``; SQLite then fails the statement with ``interrupted``."""

    def __init__(self, seconds: float | None):
        self.until = None if seconds is None else time.monotonic() + seconds
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()

    def expired(self) -> bool:
        return self.until is not None and time.monotonic() > self.until

    def __call__(self) -> int:
        return 1 if (self.cancelled.is_set() or self.expired()) else 0


def quote_ident(name: object) -> str:
    """A safe SQL identifier for any table or column name (``we"ird`` → ``"we""ird"``)."""
    return '"' + str(name).replace('"', '""') + '"'


def no_settings(action: int, arg1, arg2, db_name, trigger) -> int:
    """Generated SQL may not change how the connection is bounded: no ``PRAGMA`` but the introspection ones (a
    ``PRAGMA max_page_count`` or ``cache_size`` would lift the caps), no ``ATTACH``; nor run module code on its own
    arguments in awm's process: no virtual table, no pointer-taking function (``POINTER_FUNCTIONS``)."""
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_CREATE_VTABLE) or _pointer_call(
            action, arg2):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in SAFE_PRAGMAS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class Bounds:
    """What ``bounded`` set on a connection: ``restart()`` before each statement; ``spent`` once the total time is
    used up (every later statement is interrupted at once); ``release()`` before awm's own queries."""

    def __init__(self, conn: sqlite3.Connection, seconds: float, total_seconds: float):
        self.conn = conn
        self.seconds = seconds
        self.total_seconds = total_seconds
        self.deadline: float | None = None
        self.total_deadline: float | None = None

    def restart(self) -> None:
        self.deadline = None

    @property
    def spent(self) -> bool:
        return self.total_deadline is not None and time.monotonic() > self.total_deadline

    def __call__(self) -> int:
        now = time.monotonic()
        if self.total_deadline is None:
            self.total_deadline = now + self.total_seconds
        if self.deadline is None:
            self.deadline = now + self.seconds
        return 1 if now > self.deadline or now > self.total_deadline else 0

    def release(self) -> None:
        """The generated SQL is done: no more clock; awm's own statements may set pragmas (ATTACH stays denied)."""
        self.conn.set_progress_handler(None, 0)
        self.conn.set_authorizer(untrusted_reads)


def bounded(conn: sqlite3.Connection, seconds: float = 2.0, max_length: int = 1 << 20, max_bytes: int = 64 << 20,
            total_seconds: float = 10.0) -> Bounds:
    """Generated SQL the awm process itself runs (the catalog introspects a scenario's DDL in memory): a statement
    that computes for longer than ``seconds`` is interrupted, and all of them together get ``total_seconds`` (many
    statements of two seconds each add up: ``Bounds.spent`` says when the rest should not even start); no string or
    blob may exceed ``max_length`` bytes (a ``CREATE TABLE … AS SELECT zeroblob(4e8)`` fails instead of taking the
    process to gigabytes), and the database (main and temp) may not grow past ``max_bytes`` in total (many rows of
    1 MB each fail the same way: "database or disk is full"). The SQL can change none of this: no ``PRAGMA`` but
    introspection, no ``ATTACH`` (``no_settings``)."""
    try:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)
    except AttributeError:  # Python < 3.11
        pass
    for schema in ("main", "temp"):
        page = conn.execute(f"PRAGMA {schema}.page_size").fetchone()[0] or 4096
        conn.execute(f"PRAGMA {schema}.max_page_count = {max(1, max_bytes // page)}")
    conn.set_authorizer(no_settings)
    bounds = Bounds(conn, seconds, total_seconds)
    conn.set_progress_handler(bounds, 10_000)
    return bounds


def any_text(raw: bytes) -> str:
    """A TEXT value as it is stored, whatever its bytes (a ``text_factory``): text that is not UTF-8 (an environment's
    ``CAST(x'ff' AS TEXT)``) made SQLite's default factory raise for the whole query — one such value hid every row
    of its table (and the whole diff) from the user. Undecodable bytes become lone surrogates (``surrogateescape``:
    two different byte strings stay two different texts); the CLI and the TUI show them as escapes."""
    return raw.decode("utf-8", "surrogateescape")


def open_untrusted(path, value_bytes: int = 16 << 20, deadline: "Deadline | None" = None) -> sqlite3.Connection:
    """A read-only connection to a database someone else's code wrote (an episode's, a generated template): no value
    over ``value_bytes`` (a generated column ``AS (zeroblob(4e8))`` is computed at every read), functions the schema
    names run only where SQLite deems them harmless (``trusted_schema`` off), no ``ATTACH`` or pointer-taking
    function (``untrusted_reads``), and statements stop at
    ``deadline`` (a ``Deadline``) when given."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.text_factory = any_text
    try:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, value_bytes)
    except AttributeError:  # Python < 3.11
        pass
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.set_authorizer(untrusted_reads)
    if deadline is not None:
        conn.set_progress_handler(deadline, 10_000)
    return conn
