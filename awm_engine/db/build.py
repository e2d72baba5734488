"""Build a scenario's SQLite database exactly as AWM does (spec/awm-format.md §3).

Schema phase: one connection with foreign keys at SQLite's default (off); per table, the DDL, then
its indexes, then its examples, one ``execute`` each; the first failure marks the table failed and
skips the rest of that table. Sample phase: a new connection with ``PRAGMA foreign_keys = ON``;
every INSERT executed as written; integrity and SQL errors are counted and kept; any other error
rolls the insertion back (the database keeps its schema only), as in the reference.
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.db.guard import forbid_attach


@dataclass
class FailedStatement:
    phase: str  # "schema" or "sample"
    table: str
    statement: str
    error: str  # the exception text
    message: str  # the reference's error string for this failure


@dataclass
class BuildReport:
    scenario: str
    path: str
    tables_ok: int = 0
    tables_failed: int = 0
    inserts_ok: int = 0
    inserts_failed: int = 0
    failures: list[FailedStatement] = field(default_factory=list)
    fatal: str | None = None  # an error that stopped a whole phase
    row_counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def schema_error_ratio(self) -> float:
        total = self.tables_ok + self.tables_failed
        return self.tables_failed / total if total else 1.0

    @property
    def sample_error_ratio(self) -> float:
        total = self.inserts_ok + self.inserts_failed
        return self.inserts_failed / total if total else 1.0

    @property
    def ok(self) -> bool:
        return not self.failures and self.fatal is None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema_error_ratio"] = self.schema_error_ratio
        data["sample_error_ratio"] = self.sample_error_ratio
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BuildReport":
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        data["failures"] = [FailedStatement(**f) for f in data.get("failures", [])]
        return cls(**data)


def create_schema(path: Path, db_schema: dict[str, Any], report: BuildReport) -> None:
    """§3.1: DDL, indexes, examples per table; foreign keys off; one commit at the end."""
    tables = db_schema.get("tables") if isinstance(db_schema, dict) else None
    if not isinstance(tables, list):
        report.fatal = "db_schema has no 'tables' list"
        sqlite3.connect(path).close()
        return
    conn = forbid_attach(sqlite3.connect(path))  # generated SQL may not reach other files
    try:
        cursor = conn.cursor()
        for table in tables:
            name = table.get("name", "?") if isinstance(table, dict) else "?"
            statement = ""
            try:
                statement = table["ddl"]
                cursor.execute(statement)
                for key in ("indexes", "examples"):
                    for statement in table.get(key, []) or []:
                        cursor.execute(statement)
                report.tables_ok += 1
            except Exception as exc:  # the reference counts any exception as a failed table
                report.tables_failed += 1
                report.failures.append(FailedStatement(
                    "schema", str(name), str(statement), str(exc), f"Table {name}: {str(exc)[:3000]}"))
        conn.commit()
    finally:
        conn.close()


def insert_samples(path: Path, sample_data: dict[str, Any], report: BuildReport) -> None:
    """§3.2: every INSERT as is, with foreign keys on; one commit at the end."""
    tables = sample_data.get("tables") if isinstance(sample_data, dict) else None
    if not isinstance(tables, list):
        report.fatal = "sample_data has no 'tables' list; the database has its schema only"
        return
    conn = forbid_attach(sqlite3.connect(path))  # generated SQL may not reach other files
    try:
        cursor = conn.cursor()
        cursor.execute("PRAGMA foreign_keys = ON;")
        ok, failures = 0, []
        try:
            for table_data in tables:
                table = table_data["table_name"]
                for stmt in table_data["insert_statements"]:
                    try:
                        cursor.execute(stmt)
                        ok += 1
                    except sqlite3.IntegrityError as exc:
                        failures.append(FailedStatement(
                            "sample", table, stmt, str(exc), f"Table {table} - IntegrityError: {str(exc)[:1000]}"))
                    except sqlite3.Error as exc:
                        failures.append(FailedStatement(
                            "sample", table, stmt, str(exc),
                            f"Table {table} - SQLError: {str(exc)[:1000]}\nStatement: {stmt[:1000]}"))
        except Exception as exc:  # non-SQL failure: the reference rolls everything back
            conn.rollback()
            report.fatal = f"sample insertion aborted, database has its schema only: {type(exc).__name__}: {exc}"
            return
        conn.commit()
        report.inserts_ok += ok
        report.inserts_failed += len(failures)
        report.failures.extend(failures)
    finally:
        conn.close()


def table_row_counts(path: Path | str) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()


def build_database(scenario: str, db_schema: dict[str, Any] | None, sample_data: dict[str, Any] | None,
                   path: Path | str) -> BuildReport:
    """Build ``path`` from scratch (an existing file is deleted first) and report what failed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    started = time.perf_counter()
    report = BuildReport(scenario=scenario, path=str(path))
    if db_schema is None:
        report.fatal = "no database schema (gen_db.jsonl row missing)"
        sqlite3.connect(path).close()
    else:
        create_schema(path, db_schema, report)
        if sample_data is None:
            report.fatal = "no sample data (gen_sample.jsonl row missing); the database has its schema only"
        elif report.fatal is None:
            insert_samples(path, sample_data, report)
    report.row_counts = table_row_counts(path)
    report.seconds = time.perf_counter() - started
    return report
