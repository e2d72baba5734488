"""Snapshots and row-level diffs of two SQLite databases.

Rows are matched by primary key, else by rowid. For every table present in either database the
diff lists inserted rows, deleted rows and updated rows with the columns that changed.

The databases compared are usually an episode's, written by the environment's code: anything at all. Reading
them is bounded (``DiffLimits``): no value over 16 MiB (a generated column ``AS (zeroblob(4e8))`` in an 8 KB file
is computed at every read: it took a diff to 8 GB), 2 million values and 256 MiB of text and blobs read in all, a
minute of SQLite's time. A diff that reaches a bound stops there and says so (``DbDiff.incomplete``): what it
lists is right, it is not all.
"""
from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awm_engine.data.sql_guard import Deadline, open_untrusted, quote_ident

if TYPE_CHECKING:
    import sqlite_utils


@dataclass
class RowUpdate:
    key: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]
    changed: list[str]


@dataclass
class TableDiff:
    table: str
    key_columns: list[str]  # ["rowid"] when the table has no primary key
    status: str = "changed"  # changed | added | removed
    inserted: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)
    updated: list[RowUpdate] = field(default_factory=list)
    columns_added: list[str] = field(default_factory=list)
    columns_removed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.deleted or self.updated or self.columns_added or self.columns_removed
                    or self.status != "changed")


@dataclass
class DbDiff:
    before: str
    after: str
    tables: list[TableDiff]
    incomplete: str | None = None  # why the diff stopped before the end (a bound of ``DiffLimits``), if it did
    # virtual tables, not read: their module (FTS, R-tree …) would parse what the environment wrote in awm's process;
    # the shadow tables holding their data are ordinary tables, compared like the others
    skipped: list[str] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not self.tables

    def counts(self) -> dict[str, int]:
        return {"tables": len(self.tables), "inserted": sum(len(t.inserted) for t in self.tables),
                "deleted": sum(len(t.deleted) for t in self.tables),
                "updated": sum(len(t.updated) for t in self.tables)}

    def table(self, name: str) -> TableDiff | None:
        return next((t for t in self.tables if t.table == name), None)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"before": self.before, "after": self.after, "summary": self.counts(),
                "tables": [asdict(t) for t in self.tables], "incomplete": self.incomplete, "skipped": self.skipped}


def snapshot(src: Path | str, dst: Path | str) -> Path:
    """Consistent copy of a live database (SQLite backup API), e.g. ``initial.db`` / ``final.db``."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    return dst


def copy_database(src: Path | str, dst: Path | str) -> Path:
    """Plain file copy (the fast reset path; the source must not be mid-write)."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


@dataclass
class DiffLimits:
    """How much of two databases a diff reads (they may be anything an environment's code wrote)."""

    value_bytes: int = 16 << 20  # one text or blob (SQLite's SQLITE_LIMIT_LENGTH on the connections)
    values: int = 2_000_000  # values read in all
    bytes: int = 256 << 20  # text and blob bytes read in all
    seconds: float = 60.0  # SQLite's time in all


class DiffStopped(Exception):
    """A bound of ``DiffLimits`` was reached."""


class _Budget(Deadline):
    def __init__(self, limits: DiffLimits):
        super().__init__(limits.seconds)
        self.limits = limits
        self.values = 0
        self.bytes = 0

    def take(self, row: tuple) -> None:
        self.values += len(row)
        self.bytes += sum(len(v) for v in row if isinstance(v, (str, bytes)))
        if self.values > self.limits.values:
            raise DiffStopped(f"the databases hold more than {self.limits.values:,} values")
        if self.bytes > self.limits.bytes:
            raise DiffStopped(f"the databases hold more than {self.limits.bytes >> 20} MiB of text and blobs")


def _read_table(db: sqlite_utils.Database, name: str,
                budget: _Budget) -> tuple[list[str], list[str], dict[tuple, dict[str, Any]]]:
    table = db[name]
    columns = [c.name for c in table.columns]
    pks = [c.name for c in table.columns if c.is_pk]
    if pks:
        key_cols, select = pks, "*"
    else:
        key_cols, select = ["rowid"], "rowid, *"
    rows: dict[tuple, dict[str, Any]] = {}
    cursor = db.conn.execute(f'SELECT {select} FROM {quote_ident(name)}')
    names = [d[0] for d in cursor.description]
    for values in cursor:
        budget.take(values)
        record = dict(zip(names, values))
        key = tuple(record[k] for k in key_cols)
        if not pks:
            record = {c: record[c] for c in columns}
        rows[key] = record
    return columns, key_cols, rows


def diff_databases(before: Path | str, after: Path | str, limits: DiffLimits | None = None) -> DbDiff:
    """Row-level differences from ``before`` to ``after`` (only tables that changed are listed); a diff that reaches
    a bound of ``limits`` lists what it read and says why it stopped (``incomplete``)."""
    import sqlite_utils  # here, not at import: it imports pandas when installed (0.6 s off every awm start)

    budget = _Budget(limits or DiffLimits())
    a = sqlite_utils.Database(open_untrusted(before, budget.limits.value_bytes, budget))
    b = sqlite_utils.Database(open_untrusted(after, budget.limits.value_bytes, budget))
    tables: list[TableDiff] = []
    skipped: list[str] = []
    try:
        _diff_tables(a, b, budget, tables, skipped)
    except DiffStopped as exc:
        return DbDiff(str(before), str(after), tables, f"{exc}: the diff stopped there", skipped)
    except (sqlite3.OperationalError, sqlite3.DataError) as exc:
        if "interrupted" in str(exc):
            why = f"reading took more than {budget.limits.seconds:.0f} s"
        elif "too big" in str(exc):
            why = f"a value is over {budget.limits.value_bytes >> 20} MiB"
        else:
            raise
        return DbDiff(str(before), str(after), tables, f"{why}: the diff stopped there", skipped)
    finally:
        a.conn.close()
        b.conn.close()
    return DbDiff(str(before), str(after), tables, skipped=skipped)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_tables(db, skipped: list[str]) -> list[str]:
    """The ordinary tables of ``db``; its virtual tables go to ``skipped`` (never opened: even listing their columns
    runs their module)."""
    names = []
    for name, sql in db.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid"):
        if not isinstance(name, str) or name.startswith("sqlite_"):
            continue
        if not _utf8(name):  # bytes that are not UTF-8 (``any_text``): no statement can name the table
            if name not in skipped:
                skipped.append(name)
            continue
        if str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
            if name not in skipped:
                skipped.append(name)
        else:
            names.append(name)
    return names


def _diff_tables(a, b, budget: _Budget, tables: list[TableDiff], skipped: list[str]) -> None:
    names_a = _plain_tables(a, skipped)
    names_b = _plain_tables(b, skipped)
    for name in names_a + [n for n in names_b if n not in names_a]:
        try:
            _diff_table(a, b, name, name in names_a, name in names_b, budget, tables)
        except UnicodeError:  # a column name that is not UTF-8: Python's sqlite3 cannot name the table's columns
            if name not in skipped:
                skipped.append(name)


def _diff_table(a, b, name: str, in_a: bool, in_b: bool, budget: _Budget, tables: list[TableDiff]) -> None:
    if not in_b:
        cols, keys, rows = _read_table(a, name, budget)
        tables.append(TableDiff(name, keys, "removed", deleted=list(rows.values())))
        return
    if not in_a:
        cols, keys, rows = _read_table(b, name, budget)
        tables.append(TableDiff(name, keys, "added", inserted=list(rows.values())))
        return
    cols_a, keys, rows_a = _read_table(a, name, budget)
    cols_b, keys_b, rows_b = _read_table(b, name, budget)
    diff = TableDiff(name, keys_b, columns_added=[c for c in cols_b if c not in cols_a],
                     columns_removed=[c for c in cols_a if c not in cols_b])
    if keys != keys_b:  # the key itself changed: compare by whole rows
        rows_a = {tuple(r.items()): r for r in rows_a.values()}
        rows_b = {tuple(r.items()): r for r in rows_b.values()}
    for key, row in rows_b.items():
        old = rows_a.get(key)
        if old is None:
            diff.inserted.append(row)
            continue
        changed = [c for c in row if c in old and old[c] != row[c]]
        if changed:
            key_dict = dict(zip(diff.key_columns, key)) if keys == keys_b else {}
            diff.updated.append(RowUpdate(key_dict, old, row, changed))
    diff.deleted = [row for key, row in rows_a.items() if key not in rows_b]
    if diff.changed:
        tables.append(diff)
