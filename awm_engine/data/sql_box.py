"""The read-only SQL box on an environment's database (the TUI's Data tab): run a query someone typed, or page
through a table, within a deadline and a size cap, and return display strings.

Everything is bounded, not only the statement's run time:

- **deadline**: ``Deadline`` (``sql_guard``) as SQLite's progress handler covers preparing, executing and every
  fetch; the caller's ``deadline.cancel()`` stops a query at once (a new query, the app quitting);
- **each value**: SQLite's ``SQLITE_LIMIT_LENGTH`` is ``max_value`` bytes, so no statement can make a larger string
  or blob (``SELECT zeroblob(1e8)`` fails at once instead of handing Python 100 MB); and a query is wrapped so that
  SQLite itself returns only the first ``max_cell`` characters of a text and the length and first bytes of a blob
  (the value is never fetched whole); a statement that cannot be wrapped (``PRAGMA``, ``EXPLAIN``) is cut the same
  way in Python;
- **the result**: at most ``max_rows`` rows and ``max_bytes`` characters of display text are fetched; the result
  says which cap stopped it;
- **read-only**: ``sql_guard.read_only`` as the authorizer (no write, ``ATTACH``, ``VACUUM INTO``, only
  introspection pragmas) on a ``mode=ro`` connection; a write is answered by saying that the box is read-only.

Every display string is made ``terminal.visible`` (the database's contents are untrusted text).
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from awm_engine.data.sql_guard import Deadline, any_text, quote_ident, read_only
from awm_engine.data.terminal import visible

SECONDS = 10.0
MAX_ROWS = 500
MAX_CELL = 80  # characters of a text value shown; a longer one is cut with "…" and its length
MAX_BYTES = 2_000_000  # characters of display text in one result
MAX_VALUE = 4 * 1024 * 1024  # SQLITE_LIMIT_LENGTH: the largest string or blob a statement may make
BLOB_PREFIX = 16  # bytes of a blob shown (in hex)
BATCH = 64
_WRAP = "_awm_box"


@dataclass
class BoxResult:
    """What the box shows: column names and rows of display strings, or an error; and what the caps did."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str, ...]] = field(default_factory=list)
    error: str | None = None
    stopped: str | None = None  # "rows" | "bytes": the cap that ended fetching before the last row
    cut_values: int = 0  # texts cut to max_cell characters
    fetched_chars: int = 0  # display text fetched, all cells together (≤ max_bytes)
    seconds: float = 0.0
    limits: dict = field(default_factory=dict)

    def status(self) -> str:
        """One line for the status bar: the row count and every cap that applied, or the error."""
        if self.error is not None:
            return self.error
        parts = [f"query: {len(self.rows)} rows"]
        if self.stopped == "rows":
            parts.append(f"(first {self.limits.get('max_rows', MAX_ROWS)}: the box's row cap)")
        elif self.stopped == "bytes":
            parts.append(f"(stopped at the box's size cap of {self.limits.get('max_bytes', MAX_BYTES):,} "
                         "characters)")
        if self.cut_values:
            parts.append(f"· {self.cut_values} {'text' if self.cut_values == 1 else 'texts'} cut to "
                         f"{self.limits.get('max_cell', MAX_CELL)} characters")
        return " ".join(parts) + " — read-only"


def _cell(kind: str, length: int | None, value, max_cell: int) -> tuple[str, bool]:
    """(display string, whether the value was cut) for one value: ``kind`` its SQLite type, ``length`` its length
    (characters of a text, bytes of a blob), ``value`` the part fetched (a text's first characters, a blob's first
    bytes in hex)."""
    if kind == "null":
        return "NULL", False
    if kind == "blob":  # by its length and first bytes, never whole
        more = "…" if (length or 0) > BLOB_PREFIX else ""
        return f"<blob {length:,} bytes{': ' + str(value) + more if length else ''}>", False
    if kind == "text":
        text = str(value)
        if (length or 0) > max_cell:
            return visible(text[:max_cell]) + f"… ({length:,} characters)", True
        return visible(text), False
    return visible(value), False  # integer, real


def _python_cell(value, max_cell: int) -> tuple[str, bool]:
    """The same display string for a value Python already holds (a statement the box could not wrap)."""
    if value is None:
        return "NULL", False
    if isinstance(value, bytes):
        return _cell("blob", len(value), value[:BLOB_PREFIX].hex().upper(), max_cell)
    if isinstance(value, str):
        return _cell("text", len(value), value[:max_cell], max_cell)
    return _cell("number", None, value, max_cell)


def _wrapped(body: str, columns: int, max_cell: int) -> str:
    """The query with each of its ``columns`` values replaced by (type, length, first characters or bytes), computed
    by SQLite. ``OFFSET 0`` keeps the query a subquery of its own (it is not flattened into the outer one), so each
    of its values is computed once per row."""
    names = ", ".join(f"c{i}" for i in range(columns))
    cells = []
    for i in range(columns):
        c = f"c{i}"
        cells += [f"typeof({c})", f"CASE WHEN typeof({c}) IN ('text', 'blob') THEN length({c}) END",
                  f"CASE typeof({c}) WHEN 'text' THEN substr({c}, 1, {max_cell}) "
                  f"WHEN 'blob' THEN hex(substr({c}, 1, {BLOB_PREFIX})) ELSE {c} END"]
    return (f"WITH {_WRAP}({names}) AS (SELECT * FROM (\n{body}\n) LIMIT -1 OFFSET 0) "
            f"SELECT {', '.join(cells)} FROM {_WRAP}")


def _explain(exc: Exception, deadline: Deadline, seconds: float | None, max_value: int) -> str:
    message = str(exc)
    if deadline.cancelled.is_set():
        return "cancelled"
    if deadline.expired() or "interrupted" in message:
        return f"stopped after {seconds:g}s (the SQL box's deadline)" if seconds else "stopped"
    if "not authorized" in message or "authorization denied" in message:
        return ("the SQL box is read-only: it runs reading statements only (SELECT, WITH, introspection PRAGMAs) — "
                f"SQLite said: {visible(message)}")
    if "too big" in message:
        return (f"a value is larger than the SQL box's cap of {max_value:,} bytes per value — SQLite said: "
                f"{visible(message)}")
    return f"{type(exc).__name__}: {visible(message)}"


def run_query(db_path: str | Path, sql: str, *, seconds: float | None = SECONDS, deadline: Deadline | None = None,
              max_rows: int = MAX_ROWS, max_cell: int = MAX_CELL, max_bytes: int = MAX_BYTES,
              max_value: int = MAX_VALUE) -> BoxResult:
    """Run ``sql`` read-only on the database at ``db_path`` within every cap (module doc). ``deadline``: the
    caller's, to cancel from another thread (default: ``Deadline(seconds)``). Never raises for a bad query: the
    result's ``error`` says what happened."""
    deadline = deadline or Deadline(seconds)
    started = time.monotonic()
    result = BoxResult(limits={"max_rows": max_rows, "max_cell": max_cell, "max_bytes": max_bytes,
                               "max_value": max_value, "seconds": seconds})
    try:
        conn = sqlite3.connect(f"file:{Path(db_path)}?mode=ro", uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        result.error = f"cannot open the database: {visible(exc)}"
        return result
    try:
        conn.text_factory = any_text  # a text that is not UTF-8 is shown (escaped), not an error for the whole query
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value)
        conn.set_authorizer(read_only)
        conn.set_progress_handler(deadline, 1000)
        body = sql.strip().rstrip(";").rstrip()
        columns: list[str] | None = None
        try:  # the column names, without computing a row
            probe = conn.execute(f"SELECT * FROM (\n{body}\n) LIMIT 0")
            columns = [d[0] for d in probe.description or []]
        except sqlite3.Error:
            if deadline():
                raise
        wrapped = bool(columns)
        if wrapped:
            cursor = conn.execute(_wrapped(body, len(columns), max_cell))
        else:  # a PRAGMA, an EXPLAIN, or an error for the statement itself to report
            cursor = conn.execute(sql)
            columns = [d[0] for d in cursor.description or []]
        result.columns = [visible(c) for c in columns]
        _fetch(cursor, wrapped, result, deadline, max_rows, max_cell, max_bytes)
    except (sqlite3.Error, ValueError, OverflowError, MemoryError) as exc:
        result.error = _explain(exc, deadline, seconds, max_value)
        result.rows = []
    finally:
        conn.close()
    result.seconds = time.monotonic() - started
    return result


def _fetch(cursor: sqlite3.Cursor, wrapped: bool, result: BoxResult, deadline: Deadline, max_rows: int,
           max_cell: int, max_bytes: int) -> None:
    """Rows into ``result`` until the end or a cap; the deadline is checked between batches too (the formatting is
    Python's, outside SQLite's progress handler)."""
    while True:
        if deadline():
            raise sqlite3.OperationalError("interrupted")
        batch = cursor.fetchmany(min(BATCH, max_rows + 1 - len(result.rows)))
        if not batch:
            return
        for raw in batch:
            if len(result.rows) >= max_rows:
                result.stopped = "rows"
                return
            if wrapped:
                cells = [_cell(raw[i], raw[i + 1], raw[i + 2], max_cell) for i in range(0, len(raw), 3)]
            else:
                cells = [_python_cell(v, max_cell) for v in raw]
            size = sum(len(text) + 1 for text, _ in cells)
            if result.fetched_chars + size > max_bytes:
                result.stopped = "bytes"
                return
            result.rows.append(tuple(text for text, _ in cells))
            result.cut_values += sum(cut for _, cut in cells)
            result.fetched_chars += size


def count_rows(db_path: str | Path, table: str, *, seconds: float | None = SECONDS,
               deadline: Deadline | None = None) -> int | None:
    """``SELECT COUNT(*)`` of ``table`` within the deadline; None when it cannot be counted."""
    counted = run_query(db_path, f"SELECT COUNT(*) FROM {quote_ident(table)}", seconds=seconds, deadline=deadline)
    try:
        return int(counted.rows[0][0])
    except (IndexError, ValueError):
        return None


def table_page(db_path: str | Path, table: str, page: int, size: int, *, seconds: float | None = SECONDS,
               deadline: Deadline | None = None) -> BoxResult:
    """Rows ``page * size`` … of ``table`` (the Data tab's pages), with the box's caps."""
    return run_query(db_path, f"SELECT * FROM {quote_ident(table)} LIMIT {int(size)} OFFSET {int(page) * int(size)}",
                     seconds=seconds, deadline=deadline, max_rows=size)
