"""Build a scenario's SQLite database exactly as AWM does (spec/awm-format.md §3).

Schema phase: one connection with foreign keys at SQLite's default (off); per table, the DDL, then
its indexes, then its examples, one ``execute`` each; the first failure marks the table failed and
skips the rest of that table. Sample phase: a new connection with ``PRAGMA foreign_keys = ON``;
every INSERT executed as written; integrity and SQL errors are counted and kept; any other error
rolls the insertion back (the database keeps its schema only), as in the reference.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.data.jsonl import dumps_text
from awm_engine.data.sql_guard import forbid_attach, quote_ident


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
    built_at: float | None = None  # when the build started (seconds since the epoch)
    # what makes the contents depend on the build time (``time_dependence``); None: not scanned
    time_dependent: list[str] | None = None
    built: bool = True  # a database file was written (False: no schema, or the build failed before writing one)

    @property
    def usable(self) -> bool:
        """A database was written with at least one table: something an episode can run on."""
        return self.built and self.tables_ok > 0

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
        report.built = False
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
        return {n: conn.execute(f'SELECT COUNT(*) FROM {quote_ident(n)}').fetchone()[0] for n in names}
    finally:
        conn.close()


def build_database(scenario: str, db_schema: dict[str, Any] | None, sample_data: dict[str, Any] | None,
                   path: Path | str) -> BuildReport:
    """Build ``path`` from scratch (an existing file is deleted first) and report what failed. A scenario without
    a usable schema is a failed build: no file is written (``report.built`` is False), never an empty database."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    started = time.perf_counter()
    report = BuildReport(scenario=scenario, path=str(path), built_at=time.time(),
                         time_dependent=time_dependence(db_schema, sample_data))
    if db_schema is None:
        report.fatal = "no database schema (gen_db.jsonl row missing); no database written"
        report.built = False
    else:
        create_schema(path, db_schema, report)
        if report.built and sample_data is None:
            report.fatal = "no sample data (gen_sample.jsonl row missing); the database has its schema only"
        elif report.fatal is None:
            insert_samples(path, sample_data, report)
    report.row_counts = table_row_counts(path) if report.built else {}
    report.seconds = time.perf_counter() - started
    return report


def build_database_sandboxed(scenario: str, db_schema: dict[str, Any] | None, sample_data: dict[str, Any] | None,
                             path: Path | str, timeout: float = 600.0, placeholder: bool = True) -> BuildReport:
    """``build_database`` in the sandbox: the generated SQL runs in a process that may write only its own
    scratch directory (the finished file is then moved to ``path``); a build that crashes or runs past
    ``timeout`` comes back as a report with ``fatal`` set. When no database was built (no schema, a failed
    build), ``placeholder`` leaves an empty database at ``path`` (what the template cache hands episodes);
    without it ``path`` is left absent (``awm db build``: a failed build writes no file)."""
    from awm_engine.sandbox import limits, safe_fs
    from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy, sandbox_ids

    path = Path(path).resolve()  # the sandbox runs in a directory of its own: relative paths would miss
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=path.parent))
    os.chmod(scratch, 0o755)
    # the data's SQL decides how big the database gets: its scratch directory has a worker's quota (a template
    # larger than that could not be copied into a worker anyway), and without one each file a worker's size
    disk_mb = limits.DISK_MB
    quota = limits.mount_quota(scratch, disk_mb, *sandbox_ids())
    try:
        request = scratch / "request.json"
        # the data's text may hold a lone surrogate (a JSON "\\ud800" escape), which no UTF-8 file holds as it is
        request.write_text(dumps_text({"scenario": scenario, "db_schema": db_schema, "sample_data": sample_data}),
                           encoding="utf-8")
        out_db, out_report = scratch / "out.db", scratch / "report.json"
        sandbox = Sandbox(SandboxPolicy(writable=[str(scratch)], memory_mb=2048, max_procs=16, file_size_mb=disk_mb),
                          "build")
        try:
            result = sandbox.run([sys.executable, "-m", "awm_engine.db.build", str(request), str(out_db),
                                  str(out_report)], timeout=timeout, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            failure = None if result.returncode == 0 and out_report.is_file() and not out_report.is_symlink() else \
                f"exited with {result.returncode}: {(result.stderr or b'').decode(errors='replace')[-500:]}"
        except subprocess.TimeoutExpired:
            failure = f"did not finish within {timeout:.0f}s"
        if failure is not None and quota and _nearly_full(scratch):
            failure = f"filled its disk quota of {disk_mb} MB (AWM_SANDBOX_DISK_MB) and {failure}"
        if failure is not None:
            report = BuildReport(scenario=scenario, path=str(path), built_at=time.time(),
                                 time_dependent=time_dependence(db_schema, sample_data))
            report.fatal = f"the sandboxed database build {failure}"
            report.built = False
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
            if placeholder:
                sqlite3.connect(path).close()
            return report

        # the scratch directory was the sandbox's: its files are read through descriptors, never followed
        partial = path.with_name(path.name + f".part-{os.getpid()}")
        try:
            report = BuildReport.from_dict(json.loads(safe_fs.read_file(scratch, "report.json", 64 * 1024 * 1024)))
            if not report.built:  # nothing to take: no schema
                report.path = str(path)
                for suffix in ("", "-journal", "-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
                if placeholder:
                    sqlite3.connect(path).close()
                return report
            dfd = safe_fs.open_dir(scratch)
            try:
                if not safe_fs.take_file(dfd, "out.db", partial, f"{scratch}/"):
                    raise FileNotFoundError("the build left no database")
            finally:
                os.close(dfd)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            partial.unlink(missing_ok=True)
            report = BuildReport(scenario=scenario, path=str(path), built_at=time.time(),
                                 time_dependent=time_dependence(db_schema, sample_data))
            report.fatal = f"the sandboxed database build's output was refused: {exc}"
            report.built = False
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
            if placeholder:
                sqlite3.connect(path).close()
            return report
        report.path = str(path)
        os.replace(partial, path)
        return report
    finally:
        if quota:
            limits.unmount_quota(scratch)
        safe_fs.remove_tree(scratch)


def _nearly_full(directory: Path) -> bool:
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


def _main(argv: list[str]) -> int:
    """Inside the sandbox: ``python -m awm_engine.db.build REQUEST OUT_DB OUT_REPORT``."""
    request = json.loads(Path(argv[0]).read_text())
    report = build_database(request["scenario"], request.get("db_schema"), request.get("sample_data"), argv[1])
    Path(argv[2]).write_text(dumps_text(report.to_dict(), default=str), encoding="utf-8")
    return 0


# -- time dependence: values SQLite computes from the clock while the database is built ----------------------

_STRING = re.compile(r"'(?:[^']|'')*'")
_NOW_KEYWORD = re.compile(r"\bcurrent_(?:timestamp|date|time)\b", re.IGNORECASE)
_DATE_CALL = re.compile(r"\b(date|time|datetime|julianday|unixepoch|strftime|timediff)\s*\(([^()]*)\)", re.IGNORECASE)
_NOW_ARG = re.compile(r"""^\s*['"]now['"]\s*$""", re.IGNORECASE)
MAX_FINDINGS = 20


def _split_args(args: str) -> list[str]:
    """``args`` split at the commas outside quotes (those followed by an even number of quotes), in one pass: the
    regular expression that said so (``,(?=(?:[^']*'[^']*')*[^']*$)``) scanned to the end at every comma, which took
    an hour, holding the awm process (the GIL), for a megabyte of ``date(',',',…``."""
    parts, start, quotes_after = [], 0, args.count("'")
    for match in re.finditer(r"[',]", args):
        if match.group() == "'":
            quotes_after -= 1
        elif quotes_after % 2 == 0:
            parts.append(args[start:match.start()])
            start = match.end()
    parts.append(args[start:])
    return parts


def _now_calls(sql: str) -> list[str]:
    """Date/time function calls that read the clock: an argument ``'now'``, or no time value at all
    (``datetime()``, ``strftime('%Y')``)."""
    found = []
    for match in _DATE_CALL.finditer(sql):
        name, args = match.group(1).lower(), match.group(2)
        parts = _split_args(args) if args.strip() else []
        time_values = parts[1:] if name == "strftime" else parts
        if not time_values or _NOW_ARG.match(time_values[0]) or (name == "timediff" and any(
                _NOW_ARG.match(p) for p in time_values)):
            found.append(" ".join(match.group(0).split()))
    return found


def _statements(value: Any) -> list[str]:
    """The SQL strings of a DDL / index / example / insert field: a string or a list of strings (else none)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def time_dependence(db_schema: Any, sample_data: Any) -> list[str]:
    """What makes a build's contents depend on when it ran, as ``"<table> <where>: <construct>"`` (at most
    ``MAX_FINDINGS``; empty when nothing does): ``CURRENT_TIMESTAMP`` / ``CURRENT_DATE`` / ``CURRENT_TIME``
    and date/time functions of ``'now'`` (or of no time value) in the DDL, indexes, examples and INSERT
    statements. Case-insensitive; malformed fields are skipped; quoted text is not SQL and is ignored for
    the keywords."""
    sources: list[tuple[str, str, Any]] = []
    tables = db_schema.get("tables") if isinstance(db_schema, dict) else None
    for table in tables if isinstance(tables, list) else []:
        if isinstance(table, dict):
            for key in ("ddl", "indexes", "examples"):
                sources.append((str(table.get("name", "?")), key, table.get(key)))
    tables = sample_data.get("tables") if isinstance(sample_data, dict) else None
    for table in tables if isinstance(tables, list) else []:
        if isinstance(table, dict):
            sources.append((str(table.get("table_name", "?")), "inserts", table.get("insert_statements")))
    findings: list[str] = []
    for table, where, value in sources:
        for sql in _statements(value):
            constructs = [m.group(0).upper() for m in _NOW_KEYWORD.finditer(_STRING.sub("''", sql))]
            for construct in dict.fromkeys(constructs + _now_calls(sql)):
                finding = f"{table} {where}: {construct}"
                if finding not in findings:
                    findings.append(finding)
                    if len(findings) >= MAX_FINDINGS:
                        return findings
    return findings


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
