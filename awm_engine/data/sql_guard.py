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


def deny_attach(action: int, arg1, arg2, db_name, trigger) -> int:
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK


def read_only(action: int, arg1, arg2, db_name, trigger) -> int:
    """Reading statements only: no writes, no ATTACH / VACUUM INTO, only introspection pragmas."""
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


def bounded(conn: sqlite3.Connection, seconds: float = 2.0, max_length: int = 1 << 20, max_bytes: int = 64 << 20):
    """Generated SQL the awm process itself runs (the catalog introspects a scenario's DDL in memory): a statement
    that computes for longer than ``seconds`` is interrupted, no string or blob may exceed ``max_length`` bytes
    (a ``CREATE TABLE … AS SELECT zeroblob(4e8)`` fails instead of taking the process to gigabytes), and the
    database (main and temp) may not grow past ``max_bytes`` in total (many rows of 1 MB each fail the same way:
    "database or disk is full"). Returns a function that starts the clock again (call it before each statement)."""
    try:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)
    except AttributeError:  # Python < 3.11
        pass
    for schema in ("main", "temp"):
        page = conn.execute(f"PRAGMA {schema}.page_size").fetchone()[0] or 4096
        conn.execute(f"PRAGMA {schema}.max_page_count = {max(1, max_bytes // page)}")
    state = {"deadline": None}

    def check() -> int:
        now = time.monotonic()
        if state["deadline"] is None:
            state["deadline"] = now + seconds
        return 1 if now > state["deadline"] else 0

    conn.set_progress_handler(check, 10_000)
    return lambda: state.update(deadline=None)
