"""The catalog: every scenario found in one or more AWM data directories, joined on the normalized name.

Rows are indexed (line, byte offset, a few small fields) and read in full only when a scenario's
schema, sample data, spec, code or verifier is asked for, so listing 1,000 environments never parses
their code. Indexes are cached per file version under the cache directory.

Duplicate normalized names follow the reference (spec/awm-format.md §1.3): tasks, schema, sample
data and verifiers take the first row (``find_scenario_entry``); environment code and API spec take
the last row (dicts keyed by normalized name). Every duplicate is reported as a warning.

A verifier row's mode (sql or code) is classified by its code (``records.verifier_mode``), whichever of
``gen_verifier.jsonl`` and ``gen_verifier.pure_code.jsonl`` holds it: real pipeline output keeps code-mode
verifiers under the sql-mode file name (spec §9.1). Per (scenario, task, mode), each file's first row wins;
when both files have one, the file whose name is that mode's default wins.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from awm_engine.data import codeinfo
from awm_engine.data.jsonl import JsonlError, iter_jsonl, read_line_at
from awm_engine.data.names import normalize_scenario_name
from awm_engine.data.paths import cache_dir, not_a_directory, sample_envs_dir
from awm_engine.data.records import (
    VERIFIER_MODES,
    Column,
    ForeignKey,
    LoadIssue,
    RowRef,
    Table,
    Task,
    Tool,
    Verifier,
    verifier_mode,
)
from awm_engine.data.sql_guard import bounded, forbid_attach

FILES = {
    "scenario": "gen_scenario.jsonl",
    "tasks": "gen_tasks.jsonl",
    "db": "gen_db.jsonl",
    "sample": "gen_sample.jsonl",
    "spec": "gen_spec.jsonl",
    "envs": "gen_envs.jsonl",
    "verifier_sql": "gen_verifier.jsonl",
    "verifier_code": "gen_verifier.pure_code.jsonl",
    "solutions": "reference_solutions.jsonl",
}
LAST_WINS = {"spec", "envs"}
_FILE_MODE = {"verifier_sql": "sql", "verifier_code": "code"}  # the mode each verifier file's name stands for
_WINNER_NOTE = {"envs": "last wins, as awm.core.server", "spec": "last wins, as the generation stages",
                "scenario": "first wins", "tasks": "first wins, as find_scenario_entry",
                "db": "first wins, as find_scenario_entry", "sample": "first wins, as find_scenario_entry",
                "solutions": "first wins"}
INDEX_VERSION = 5  # 3: verifier rows carry the mode classified from their code; 4: MCP tool counts; 5: verifiers' compile errors


@dataclass
class IndexEntry:
    line: int
    offset: int
    raw_name: str
    task_idx: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def _extra(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """Small per-row facts kept in the index so listing needs no second read."""
    if kind == "scenario":
        return {"description": data.get("description") if isinstance(data.get("description"), str) else ""}
    if kind == "tasks":
        tasks = data.get("tasks")
        return {"tasks": tasks if isinstance(tasks, list) else None}
    if kind == "envs":
        code = data.get("full_code")
        return {"tool_count": codeinfo.count_routes(code) if isinstance(code, str) else None,
                "mcp_tool_count": codeinfo.count_mcp_tools(code) if isinstance(code, str) else None,
                "has_code": isinstance(code, str) and bool(code.strip())}
    if kind == "db":
        tables = (data.get("db_schema") or {}).get("tables") if isinstance(data.get("db_schema"), dict) else None
        return {"table_count": len(tables) if isinstance(tables, list) else None}
    if kind == "sample":
        tables = (data.get("sample_data") or {}).get("tables") if isinstance(data.get("sample_data"), dict) else None
        return {"insert_count": sum(len(t.get("insert_statements") or []) for t in tables if isinstance(t, dict))
                if isinstance(tables, list) else None}
    if kind.startswith("verifier"):
        code = data["verification"].get("code") if isinstance(data.get("verification"), dict) else None
        has_code = isinstance(code, str) and len(code.strip()) >= 10
        error = compile_error(code) if has_code else None
        return {"has_code": has_code and error is None, "mode": verifier_mode(code, _FILE_MODE[kind]),
                "compile_error": error}
    return {}


def compile_error(code: str) -> str | None:
    """Why a verifier's Python source does not compile (``SyntaxError: … (line N)``), or None when it does. Only
    compiled, never run: a verifier that does not compile counts as missing everywhere."""
    try:
        with warnings.catch_warnings():  # invalid escape sequences and the like: the verifier's own business
            warnings.simplefilter("ignore")
            compile(code, "<verifier>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:  # null bytes, absurd nesting
        return f"{type(exc).__name__}: {exc}"
    return None


def _index_cache_path(path: Path) -> Path:
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:20]
    return cache_dir() / "index" / f"{digest}.json"


def index_file(path: Path, kind: str) -> tuple[list[IndexEntry], list[JsonlError]]:
    """Index one JSONL file (cached on disk by path, size and mtime)."""
    stat = path.stat()
    stamp = {"version": INDEX_VERSION, "kind": kind, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    cache = _index_cache_path(path)
    try:
        cached = json.loads(cache.read_text())
        if cached.get("stamp") == stamp:
            return ([IndexEntry(**e) for e in cached["entries"]], [JsonlError(**e) for e in cached["errors"]])
    except (OSError, ValueError, TypeError, KeyError):
        pass
    errors: list[JsonlError] = []
    entries: list[IndexEntry] = []
    name_field = "name" if kind == "scenario" else "scenario"
    for row in iter_jsonl(path, errors):
        raw = row.data.get(name_field)
        if not isinstance(raw, str):
            errors.append(JsonlError(str(path), row.line, f"missing or non-string '{name_field}' field"))
            continue
        entries.append(IndexEntry(row.line, row.offset, raw, row.data.get("task_idx"), _extra(kind, row.data)))
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "entries": [e.__dict__ for e in entries],
                                   "errors": [e.__dict__ for e in errors]}))
        tmp.replace(cache)
    except OSError:
        pass
    return entries, errors


class Scenario:
    """One environment. Cheap fields are set at load; heavy ones are read from disk on first use."""

    def __init__(self, key: str, data_dir: Path):
        self.key = key
        self.data_dir = data_dir
        self.name = key
        self.description = ""
        self.refs: dict[str, RowRef] = {}
        self.extras: dict[str, dict[str, Any]] = {}
        self.tasks: list[str] = []
        self.verifier_refs: dict[str, dict[int, RowRef]] = {m: {} for m in VERIFIER_MODES}
        self.verifier_has_code: dict[str, dict[int, bool]] = {m: {} for m in VERIFIER_MODES}
        # per mode, task -> why its verifier does not compile (such a verifier counts as missing: has_code False)
        self.verifier_errors: dict[str, dict[int, str]] = {m: {} for m in VERIFIER_MODES}
        self.solution_refs: dict[int, RowRef] = {}
        self.issues: list[LoadIssue] = []
        self._rows: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"Scenario({self.key!r}, tasks={len(self.tasks)}, tools={self.tool_count})"

    # -- cheap facts -------------------------------------------------------------------------
    @property
    def tool_count(self) -> int | None:
        """Routes in the code (what ``catalog show`` lists)."""
        return self.extras.get("envs", {}).get("tool_count")

    @property
    def mcp_tool_count(self) -> int | None:
        """Tools an MCP client sees: routes sharing a method and path count once (fastapi-mcp)."""
        return self.extras.get("envs", {}).get("mcp_tool_count", self.tool_count)

    @property
    def table_count(self) -> int | None:
        return self.extras.get("db", {}).get("table_count")

    @property
    def insert_count(self) -> int | None:
        return self.extras.get("sample", {}).get("insert_count")

    def verifier_coverage(self, mode: str) -> int:
        """How many of this scenario's tasks have a verifier with usable code in ``mode``."""
        flags = self.verifier_has_code[mode]
        return sum(1 for i in range(len(self.tasks)) if flags.get(i))

    @property
    def has_solutions(self) -> bool:
        return bool(self.solution_refs)

    # -- full rows, read on demand ----------------------------------------------------------
    def row(self, kind: str) -> dict[str, Any] | None:
        if kind not in self._rows:
            ref = self.refs.get(kind)
            self._rows[kind] = read_line_at(ref.path, ref.offset) if ref else None
        return self._rows[kind]

    @property
    def db_schema(self) -> dict[str, Any] | None:
        row = self.row("db")
        return row.get("db_schema") if row else None

    @property
    def sample_data(self) -> dict[str, Any] | None:
        row = self.row("sample")
        return row.get("sample_data") if row else None

    @property
    def api_spec(self) -> dict[str, Any] | None:
        row = self.row("spec")
        return row.get("api_spec") if row else None

    @property
    def code(self) -> str | None:
        row = self.row("envs")
        code = row.get("full_code") if row else None
        return code if isinstance(code, str) else None

    def task(self, index: int) -> Task:
        if not 0 <= index < len(self.tasks):
            raise IndexError(f"{self.key} has {len(self.tasks)} tasks (0..{len(self.tasks) - 1}); no task {index}")
        return Task(self.key, index, self.tasks[index])

    def verifier(self, index: int, mode: str = "sql") -> Verifier | None:
        """This task's verifier of ``mode`` (classified by its code, from either verifier file), or None."""
        ref = self.verifier_refs.get(mode, {}).get(index)
        if ref is None:
            return None
        data = read_line_at(ref.path, ref.offset)
        verification = data.get("verification") if isinstance(data, dict) and isinstance(data.get("verification"),
                                                                                          dict) else {}
        return Verifier(self.key, index, mode, verification.get("code"), verification.get("raw_response"), ref)

    def solution(self, index: int) -> dict[str, Any] | None:
        ref = self.solution_refs.get(index)
        return read_line_at(ref.path, ref.offset) if ref else None

    def tools(self) -> list[Tool]:
        """Routes read statically from the code (names, methods, paths, parameters)."""
        return codeinfo.static_tools(self.code) if self.code else []

    def tables(self) -> list[Table]:
        """Tables from the schema with columns and keys, introspected from an in-memory build of the DDL."""
        schema = self.db_schema or {}
        specs = [t for t in schema.get("tables", []) if isinstance(t, dict)] if isinstance(schema, dict) else []
        # the DDL is generated: it may not reach any file, compute for long or build huge values in this process
        conn = forbid_attach(sqlite3.connect(":memory:"))
        bounds = bounded(conn)
        out: list[Table] = []
        try:
            for spec in specs:
                indexes = spec.get("indexes")
                table = Table(name=str(spec.get("name", "?")), ddl=str(spec.get("ddl", "")),
                              indexes=[str(i) for i in indexes] if isinstance(indexes, list) else [])
                if indexes is not None and not isinstance(indexes, list):
                    table.error = f"'indexes' is a {type(indexes).__name__}, not a list"
                if bounds.spent:
                    table.error = (f"not introspected: this schema's DDL took more than {bounds.total_seconds:.0f} s "
                                   "in total")
                else:
                    try:
                        bounds.restart()
                        conn.execute(table.ddl)
                    except (sqlite3.Error, ValueError) as exc:
                        table.error = str(exc)
                out.append(table)
            bounds.release()  # awm's own introspection below: a few pragmas per table
            import sqlite_utils

            db = sqlite_utils.Database(conn)
            existing = set(db.table_names())
            for table in out:
                if table.error or table.name not in existing:
                    continue
                t = db[table.name]
                pks = set(t.pks) if any(c.is_pk for c in t.columns) else set()
                table.columns = [Column(c.name, c.type, bool(c.notnull), c.default_value, c.name in pks)
                                 for c in t.columns]
                table.foreign_keys = [ForeignKey(fk.column, fk.other_table, fk.other_column) for fk in t.foreign_keys]
        finally:
            conn.close()
        return out

    def version_key(self) -> str:
        """Cheap identity of this scenario's code and data: where its rows live and those files' versions."""
        parts = []
        for kind in ("envs", "db", "sample"):
            ref = self.refs.get(kind)
            if ref is not None:
                st = os.stat(ref.path)
                parts.append(f"{ref.path}:{ref.offset}:{st.st_size}:{st.st_mtime_ns}")
        return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]

    def content_hash(self) -> str:
        """Hash of what determines the initial database (schema + sample data)."""
        blob = json.dumps([self.db_schema, self.sample_data], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()


class Catalog:
    """Scenarios from one or more data directories, in first-seen order."""

    def __init__(self, scenarios: dict[str, Scenario], issues: list[LoadIssue], dirs: list[Path]):
        self.scenarios = scenarios
        self.issues = issues
        self.dirs = dirs

    def __iter__(self) -> Iterator[Scenario]:
        return iter(self.scenarios.values())

    def __len__(self) -> int:
        return len(self.scenarios)

    def __contains__(self, name: str) -> bool:
        return normalize_scenario_name(name) in self.scenarios

    def get(self, name: str) -> Scenario:
        key = normalize_scenario_name(name)
        if key not in self.scenarios:
            close = [k for k in self.scenarios if key and (key in k or k in key)][:5]
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"no scenario {name!r} (normalized {key!r}) in {', '.join(map(str, self.dirs))}{hint}")
        return self.scenarios[key]

    @property
    def errors(self) -> list[LoadIssue]:
        return [i for i in self.issues if i.level == "error"]

    @classmethod
    def load(cls, dirs: Iterable[Path | str] | None = None) -> "Catalog":
        """Load the given directories (the bundled ``sample_envs/`` when none are given)."""
        paths = [Path(d) for d in dirs] if dirs else [sample_envs_dir()]
        scenarios: dict[str, Scenario] = {}
        issues: list[LoadIssue] = []
        for data_dir in paths:
            _load_dir(data_dir, scenarios, issues)
        return cls(scenarios, issues, paths)


def _load_dir(data_dir: Path, scenarios: dict[str, Scenario], issues: list[LoadIssue]) -> None:
    why = not_a_directory(data_dir)
    if why is not None:
        issues.append(LoadIssue("error", why, path=str(data_dir)))
        return
    present = {kind: data_dir / fname for kind, fname in FILES.items() if (data_dir / fname).is_file()}
    if not present:
        issues.append(LoadIssue("error", "no AWM files (gen_*.jsonl) here", path=str(data_dir)))
        return
    local: dict[str, Scenario] = {}
    seen: dict[tuple[str, Any], IndexEntry] = {}
    verifier_rows: dict[tuple[str, str, str], dict[int, RowRef]] = {}  # (scenario, mode, file kind) -> task -> row
    verifier_code: dict[tuple[str, int], bool] = {}  # (path, line) -> the row has usable code
    verifier_errors: dict[tuple[str, int], str] = {}  # (path, line) -> why the row's code does not compile

    def scenario_for(key: str) -> Scenario:
        if key not in local:
            local[key] = Scenario(key, data_dir)
        return local[key]

    for kind, path in present.items():
        try:
            entries, errors = index_file(path, kind)
        except OSError as exc:  # not a regular file when opened (a FIFO, a device), unreadable
            issues.append(LoadIssue("error", f"cannot read: {exc.strerror or exc}", path=str(path)))
            continue
        issues.extend(LoadIssue("error", e.message, path=e.path, line=e.line) for e in errors)
        for entry in entries:
            key = normalize_scenario_name(entry.raw_name)
            if not key:
                issues.append(LoadIssue("error", f"scenario name {entry.raw_name!r} normalizes to an empty key",
                                        path=str(path), line=entry.line))
                continue
            ref = RowRef(str(path), entry.line, entry.offset)
            scenario = scenario_for(key)
            if kind.startswith("verifier") or kind == "solutions":
                idx = entry.task_idx
                if not isinstance(idx, int) or isinstance(idx, bool):
                    issues.append(LoadIssue("warning", f"task_idx {idx!r} is not an integer; no task can match it",
                                            key, str(path), entry.line))
                    continue
                if kind == "solutions":
                    target, what = scenario.solution_refs, ""
                else:  # verifiers: first row per (task, mode) of this file; files are weighed in _resolve_verifiers
                    mode = entry.extra.get("mode")
                    mode = mode if mode in VERIFIER_MODES else _FILE_MODE[kind]
                    target, what = verifier_rows.setdefault((key, mode, kind), {}), f"{mode}-mode verifier; "
                if idx in target:
                    issues.append(LoadIssue("warning", f"duplicate row for task {idx} ({what}first at line "
                                            f"{target[idx].line}); using the first, as find_scenario_entry",
                                            key, str(path), entry.line))
                    continue
                target[idx] = ref
                if kind != "solutions":
                    verifier_code[ref.path, ref.line] = bool(entry.extra.get("has_code"))
                    if entry.extra.get("compile_error"):
                        verifier_errors[ref.path, ref.line] = str(entry.extra["compile_error"])
                continue
            previous = seen.get((kind, key))
            if previous is not None:
                keep_last = kind in LAST_WINS
                winner = entry if keep_last else previous
                issues.append(LoadIssue(
                    "warning", f"duplicate normalized name {key!r} in {path.name} (lines {previous.line} "
                    f"{previous.raw_name!r} and {entry.line} {entry.raw_name!r}); using line {winner.line} "
                    f"({_WINNER_NOTE[kind]})", key, str(path), entry.line))
                if not keep_last:
                    continue
            seen[(kind, key)] = entry
            scenario.refs[kind] = ref
            scenario.extras[kind] = entry.extra
            if kind == "scenario":
                scenario.name = entry.raw_name
                scenario.description = entry.extra.get("description", "")
            elif kind == "tasks":
                tasks = entry.extra.get("tasks")
                if tasks is None or not all(isinstance(t, str) for t in tasks):
                    issues.append(LoadIssue("error", "'tasks' is not a list of strings", key, str(path), entry.line))
                    tasks = [t for t in tasks or [] if isinstance(t, str)]
                scenario.tasks = list(tasks)
            if kind != "scenario" and "scenario" not in scenario.refs and scenario.name == key:
                scenario.name = entry.raw_name

    _resolve_verifiers(local, verifier_rows, verifier_code, issues, verifier_errors)
    for key, scenario in local.items():
        if key in scenarios:
            issues.append(LoadIssue("warning", f"also defined in {scenarios[key].data_dir}; keeping that one",
                                    key, str(data_dir)))
            continue
        _check_complete(scenario, present, issues)
        scenarios[key] = scenario


def _resolve_verifiers(local: dict[str, Scenario], rows: dict[tuple[str, str, str], dict[int, RowRef]],
                       has_code: dict[tuple[str, int], bool], issues: list[LoadIssue],
                       compile_errors: dict[tuple[str, int], str] | None = None) -> None:
    """Each scenario's verifier per (task, mode): when both files have one, the file named for that mode wins
    (the reference reads ``gen_verifier.jsonl`` in sql mode and ``gen_verifier.pure_code.jsonl`` in code mode)."""
    for key, scenario in local.items():
        for mode in VERIFIER_MODES:
            preferred = f"verifier_{mode}"
            other = next(k for k in _FILE_MODE if k != preferred)
            chosen = dict(rows.get((key, mode, other), {}))
            for idx, ref in rows.get((key, mode, preferred), {}).items():
                if idx in chosen:
                    issues.append(LoadIssue(
                        "warning", f"{mode}-mode verifier for task {idx} in both {FILES[preferred]} (line {ref.line}) "
                        f"and {FILES[other]} (line {chosen[idx].line}); using {FILES[preferred]}, the {mode}-mode "
                        "default", key, ref.path, ref.line))
                chosen[idx] = ref
            for idx in sorted(chosen):
                scenario.verifier_refs[mode][idx] = chosen[idx]
                scenario.verifier_has_code[mode][idx] = has_code.get((chosen[idx].path, chosen[idx].line), False)
                error = (compile_errors or {}).get((chosen[idx].path, chosen[idx].line))
                if error:
                    scenario.verifier_errors[mode][idx] = error
                    issue = LoadIssue("error", f"the {mode}-mode verifier of task {idx} does not compile ({error}); "
                                      "it counts as missing", key, chosen[idx].path, chosen[idx].line)
                    scenario.issues.append(issue)
                    issues.append(issue)


def _check_complete(scenario: Scenario, present: dict[str, Path], issues: list[LoadIssue]) -> None:
    required = {"tasks": "tasks", "db": "database schema", "sample": "sample data", "envs": "environment code"}
    for kind, what in required.items():
        if kind not in scenario.refs:
            where = FILES[kind] if kind in present else f"{FILES[kind]} (file absent)"
            issue = LoadIssue("error", f"no {what}: no row in {where}", scenario.key,
                              str(present.get(kind, scenario.data_dir)))
            scenario.issues.append(issue)
            issues.append(issue)
    if "envs" in scenario.refs and not scenario.extras["envs"].get("has_code"):
        issue = LoadIssue("error", "environment code is empty", scenario.key, scenario.refs["envs"].path,
                          scenario.refs["envs"].line)
        scenario.issues.append(issue)
        issues.append(issue)
    outside = [(f"{mode} verifiers", scenario.verifier_refs[mode]) for mode in VERIFIER_MODES]
    for what, refs in outside + [("reference solutions", scenario.solution_refs)]:
        extra = sorted(i for i in refs if not 0 <= i < len(scenario.tasks))  # a negative task_idx matches no task
        if extra and scenario.tasks:
            issues.append(LoadIssue("warning", f"{what} for tasks {extra} outside the {len(scenario.tasks)} tasks "
                                    f"(0–{len(scenario.tasks) - 1}); no task can match them", scenario.key))
