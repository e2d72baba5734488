"""Every problem of an environment in one place: ``awm env doctor``, ``awm env test --json``, the TUI.

``diagnose`` builds the scenario's initial database (the template episodes copy), runs the health check (load,
list the tools, call every GET tool) and every verifier on the untouched initial database, and turns what it
finds into one typed list of ``Problem`` (kind, severity, where, message, detail). ``static_problems`` is the
part that needs nothing run (data issues, routes hidden over MCP, input schemas the source shows invalid): what a
front end shows before a scenario was diagnosed. Results are cached per scenario version, like the health check,
so front ends show them without running anything (``cached_diagnosis``).

Every input may be malformed: a check that fails is itself reported (``check_failed``), never raised.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.data.catalog import Catalog, Scenario
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.paths import cache_dir
from awm_engine.data.records import VERIFIER_MODES, LoadIssue, ToolParam
from awm_engine.db.build import MAX_FINDINGS, BuildReport
from awm_engine.runtime.health import HealthReport, check_scenario
from awm_engine.runtime.openapi_tools import schema_problem_note, static_schema_errors
from awm_engine.runtime.pool import EnvPool
from awm_engine.verify.verification import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    VerifierOutcome,
    _in_verifier_thread,
    run_verifier,
)

FORMAT_VERSION = 1  # of ``awm env doctor --json`` and of the cached diagnoses
SEVERITIES = ("error", "warning", "info")
SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}  # how front ends colour them

# kind -> (its usual severity, what it means): the README's table of problem kinds
KINDS: dict[str, tuple[str, str]] = {
    "data_issue": ("error", "a data row is missing or malformed, or duplicated (error or warning, as the catalog "
                            "reports it)"),
    "load_failure": ("error", "the environment's code does not load (syntax or import error, a loop or sleep at "
                              "import): every episode fails"),
    "build_failure": ("error", "the database build stopped as a whole (no schema or sample data, a crash)"),
    "failed_ddl": ("error", "a table's DDL, index or example failed: the table is missing or incomplete, and the "
                            "rows that needed it are lost"),
    "failed_insert": ("warning", "an INSERT failed: the initial database lacks its rows (as under the reference)"),
    "time_dependent": ("info", "the initial data depends on when the database is built (CURRENT_TIMESTAMP, "
                               "datetime('now'), …)"),
    "hidden_route": ("warning", "two routes with the same method and path: over MCP only the later name is listed, "
                                "and its calls reach the earlier handler"),
    "invalid_schema": ("error", "a tool's input schema is not valid JSON Schema: every call fails under the "
                                "reference"),
    "uncallable_tool": ("error", "a parameter the route requires (path, query or body field) is not in the tool's input "
                                 "schema, or the schema cannot carry it to the route (a path or query parameter of "
                                 "the same name takes it; GET and DELETE drop the body): every call fails"),
    "tool_5xx": ("warning", "a GET tool answered 5xx in the health check (with the handler's traceback; a "
                            "placeholder id answered 'not found' with a 500 is common)"),
    "no_verifier": ("warning", "a task has no verifier in a mode (error: in neither mode; info: only the sql "
                               "mode lacks one, which falls back to the code-mode verifier)"),
    "verifier_error": ("error", "a verifier fails to load or raises on the initial database"),
    "solved_at_start": ("error", "a code-mode verifier already says complete on the untouched initial database: "
                                 "the task is solved before the agent starts"),
    "check_failed": ("error", "awm could not run one of these checks (its traceback is the detail)"),
    # τ²-bench domains (awm env doctor --tau2-data DIR tau2_<domain>: bench/tau2/doctor.py)
    "task_setup": ("error", "a τ² task's initial state cannot be built (its initialization data or actions fail): "
                            "every episode of the task fails"),
    "gold_mismatch": ("error", "a τ² task's gold actions, played as a conversation, do not score 1 on its DB and "
                               "environment-assertion components: the task cannot be solved as written"),
    "gold_action_error": ("warning", "a τ² gold action fails when replayed (τ² ignores it: the gold end state lacks "
                                     "its effect)"),
}


@dataclass
class Problem:
    kind: str  # a key of KINDS
    severity: str  # error | warning | info
    scenario: str
    message: str
    detail: str | None = None  # the statement, traceback or error text behind the message, whole
    task: int | None = None
    mode: str | None = None  # verifier mode (sql | code)
    tool: str | None = None
    table: str | None = None
    rows: int | None = None  # rows of the initial database it costs

    @property
    def where(self) -> str:
        """``task 3 (code)``, ``tool get_note``, ``table notes`` or ``''``."""
        if self.task is not None:
            return f"task {self.task}" + (f" ({self.mode})" if self.mode else "")
        if self.tool is not None:
            return f"tool {self.tool}"
        if self.table is not None:
            return f"table {self.table}"
        return self.mode or ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Problem":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Diagnosis:
    """One scenario's problems, worst first."""

    scenario: str
    name: str
    problems: list[Problem] = field(default_factory=list)
    complete: bool = True  # False: only the static checks ran (nothing was built, loaded or run)
    health: str | None = None  # the health check's status (ok | errors | broken), when it ran
    seconds: float = 0.0
    diagnosed_at: float | None = None
    notes: list[str] = field(default_factory=list)  # checks that do not apply to this kind of environment, and why

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for p in self.problems if p.severity == s) for s in SEVERITIES}

    def summary(self) -> str:
        return summarize(self.counts())

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "scenario": self.scenario, "name": self.name,
                "complete": self.complete, "health": self.health, "counts": self.counts(),
                "problems": [p.to_dict() for p in self.problems], "seconds": round(self.seconds, 3),
                "diagnosed_at": self.diagnosed_at, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Diagnosis":
        problems = data.get("problems")
        return cls(str(data["scenario"]), str(data.get("name", data["scenario"])),
                   [Problem.from_dict(p) for p in problems if isinstance(p, dict)] if isinstance(problems, list)
                   else [], bool(data.get("complete", True)), data.get("health"), float(data.get("seconds") or 0),
                   data.get("diagnosed_at"),
                   [str(n) for n in data.get("notes") or [] if isinstance(n, str)] if isinstance(data.get("notes"), list)
                   else [])


def summarize(counts: dict[str, int]) -> str:
    """``1 error · 22 warnings · 1 info``, or ``no problems``."""
    parts = [f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in counts.items() if n]
    return " · ".join(parts) or "no problems"


def _sorted(problems: list[Problem]) -> list[Problem]:
    order = {s: i for i, s in enumerate(SEVERITIES)}
    kinds = {k: i for i, k in enumerate(KINDS)}
    return sorted(problems, key=lambda p: (order.get(p.severity, 9), kinds.get(p.kind, 99)))


def _ranges(numbers: list[int]) -> str:
    """``0–9``, ``1, 3, 5–7``."""
    spans: list[list[int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in spans)


def grouped(problems: list[Problem]) -> list[tuple[str, Problem]]:
    """For display, as (where, problem): problems that differ only in their task collapse into one line
    (``tasks 0–9 (sql)``); the others keep their own ``where``."""
    groups: dict[tuple, list[Problem]] = {}
    for p in problems:
        same = (p.kind, p.severity, p.message, p.mode, p.detail, p.tool, p.table) if p.task is not None else (id(p),)
        groups.setdefault(same, []).append(p)
    out = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            out.append((first.where, first))
        else:
            out.append((f"tasks {_ranges([m.task for m in members])}" + (f" ({first.mode})" if first.mode else ""),
                        first))
    return out


def shown_detail(detail: str, limit: int = 8) -> list[str]:
    """A problem's detail for a listing: tracebacks whole, anything else cut after ``limit`` lines."""
    lines = detail.rstrip().splitlines()
    if len(lines) > limit and not lines[0].startswith("Traceback"):
        lines = lines[:limit] + [f"… {len(lines) - limit} more (awm env doctor --json has them all)"]
    return lines


# -- the cache ----------------------------------------------------------------------------------------------

def diagnosis_version(scenario: Scenario) -> str:
    """What a diagnosis depends on: the scenario's code and data (``version_key``), its tasks and verifier rows."""
    parts = [str(FORMAT_VERSION)]
    try:
        parts.append(scenario.version_key())
    except OSError:
        parts.append("?")
    refs = [scenario.refs.get("tasks")] + [ref for mode in VERIFIER_MODES
                                           for _, ref in sorted(scenario.verifier_refs[mode].items())]
    for ref in refs:
        if ref is None:
            continue
        try:
            st = os.stat(ref.path)
            parts.append(f"{ref.path}:{ref.offset}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{ref.path}:?")
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def _cache_path(scenario: Scenario) -> Path:
    return cache_dir() / "doctor" / f"{scenario.key}-{diagnosis_version(scenario)}.json"


def cached_diagnosis(scenario: Scenario) -> Diagnosis | None:
    """The last full diagnosis of this version of the scenario, or None (never diagnosed, or changed since)."""
    return read_diagnosis(_cache_path(scenario))


def read_diagnosis(path: Path) -> Diagnosis | None:
    """A cached diagnosis file (None when absent, unreadable or of another format version)."""
    try:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
            return None
        return Diagnosis.from_dict(data)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_diagnosis(path: Path, diagnosis: Diagnosis) -> None:
    """Cache a diagnosis (atomically; a cache that cannot be written is no error)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(dumps_text(diagnosis.to_dict(), default=str), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def _store(scenario: Scenario, diagnosis: Diagnosis) -> None:
    write_diagnosis(_cache_path(scenario), diagnosis)


# -- the checks -----------------------------------------------------------------------------------------------

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_VALUES = re.compile(r"\bvalues\b", re.IGNORECASE)
_NO_SUCH_TABLE = re.compile(r"no such table: (?:main\.)?(.+)$")


def statement_rows(statement: Any) -> int:
    """Rows an INSERT adds: the value tuples of ``VALUES (…), (…)`` (1 when it cannot tell)."""
    if not isinstance(statement, str):
        return 1
    sql = _QUOTED.sub("''", statement)
    match = _VALUES.search(sql)
    if match is None:
        return 1
    depth = groups = 0
    for char in sql[match.end():]:
        if char == "(":
            groups += depth == 0
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == ";" and depth == 0:
            break
    return max(1, groups)


def build_problems(key: str, report: BuildReport) -> list[Problem]:
    """Failed DDL (with the rows its missing table costs), failed INSERTs (with their rows), a build that
    stopped, and time-dependent initial data."""
    problems: list[Problem] = []
    failed_tables = {f.table for f in report.failures if f.phase == "schema"}
    lost: dict[str, dict[str, int]] = {}  # failed table -> table whose INSERTs failed for want of it -> rows
    inserts: list[Problem] = []
    for f in report.failures:
        if f.phase != "sample":
            continue
        rows = statement_rows(f.statement)
        missing = _NO_SUCH_TABLE.search(str(f.error))
        cause = missing.group(1).strip() if missing else None
        because = ""
        if cause in failed_tables:
            lost.setdefault(cause, {}).setdefault(f.table, 0)
            lost[cause][f.table] += rows
            because = f" (the DDL of {cause} failed)"
        inserts.append(Problem("failed_insert", "warning", key, f"INSERT into {f.table} failed: {f.error}{because}; "
                               f"{rows} row{'s' if rows != 1 else ''} lost", f.statement, table=f.table, rows=rows))
    for f in report.failures:
        if f.phase != "schema":
            continue
        cost = lost.get(f.table, {})
        rows = sum(cost.values())
        spread = ", ".join(f"{n} in {t}" for t, n in cost.items())
        message = f"DDL of {f.table} failed: {f.error}; " + (
            f"costs {rows} row{'s' if rows != 1 else ''} ({spread})" if rows else "no INSERT needed the table")
        problems.append(Problem("failed_ddl", "error", key, message, f.statement, table=f.table, rows=rows))
    problems += inserts
    if report.fatal:
        problems.append(Problem("build_failure", "error", key, f"database build: {report.fatal}"))
    if report.time_dependent:
        n = len(report.time_dependent)
        uses = f"{n}{'+' if n >= MAX_FINDINGS else ''} use{'s' if n != 1 else ''} of the clock"
        problems.append(Problem("time_dependent", "info", key,
                                f"the initial data depends on when the database is built ({uses}); "
                                "episodes copy a template that expires after a while",
                                "\n".join(report.time_dependent)))
    return problems


def static_problems(scenario: Scenario, catalog: Catalog | None = None) -> list[Problem]:
    """What shows without running anything: data issues (the catalog's errors and warnings for this scenario),
    routes hidden over MCP, tools whose input schema the source shows invalid, tasks without a verifier."""
    key = scenario.key
    issues: list[LoadIssue] = list(scenario.issues)
    if catalog is not None:
        issues += [i for i in catalog.issues if i.scenario == key and i not in issues]
    # a verifier that does not compile is a verifier_error (missing_verifiers), not also a data issue
    uncompiled = {(ref.path, ref.line) for mode in VERIFIER_MODES for task, ref in scenario.verifier_refs[mode].items()
                  if getattr(scenario, "verifier_errors", {}).get(mode, {}).get(task)}
    problems = [Problem("data_issue", "error" if i.level == "error" else "warning", key, i.message,
                        f"{i.path}:{i.line}" if i.path and i.line else i.path) for i in issues
                if (i.path, i.line) not in uncompiled]
    problems += _checked(key, "routes", lambda: hidden_routes(scenario))
    problems += _checked(key, "tool schemas", lambda: [
        Problem("invalid_schema", "error", key, schema_problem_note(error), error, tool=tool)
        for tool, error in static_schema_errors(scenario.code).items()])
    problems += _checked(key, "verifiers", lambda: missing_verifiers(scenario))
    return problems


def hidden_routes(scenario: Scenario) -> list[Problem]:
    return [Problem("hidden_route", "warning", scenario.key,
                    f"{t.method} {t.path} is also the route of {t.shadowed_by}: over MCP only {t.shadowed_by} is "
                    f"listed, and its calls run this route's handler ({t.handler or t.name})", tool=t.name)
            for t in scenario.tools() if t.shadowed_by]


def missing_verifiers(scenario: Scenario) -> list[Problem]:
    """Per task, each mode without a usable verifier (one error when it has none in any mode)."""
    problems = []
    errors = getattr(scenario, "verifier_errors", {m: {} for m in VERIFIER_MODES})
    for task in range(len(scenario.tasks)):
        for mode in VERIFIER_MODES:
            if error := errors.get(mode, {}).get(task):  # counts as missing everywhere; named here
                problems.append(Problem("verifier_error", "error", scenario.key,
                                        f"the {mode}-mode verifier fails to load (does not compile): it counts as "
                                        "missing", error, task=task, mode=mode))
        missing = [m for m in VERIFIER_MODES if not scenario.verifier_has_code[m].get(task)
                   and not errors.get(m, {}).get(task)]
        if len(missing) == len(VERIFIER_MODES):
            problems.append(Problem("no_verifier", "error", scenario.key,
                                    "no verifier in any mode: the task can never be verified", task=task))
            continue
        for mode in missing:
            severity, effect = (("warning", "code-mode verification gives no verdict (judge_error)") if mode == "code"
                                else ("info", "sql-mode verification uses the code-mode verifier"))
            problems.append(Problem("no_verifier", severity, scenario.key, f"no {mode}-mode verifier; {effect}",
                                    task=task, mode=mode))
    return problems


def uncallable_tools(scenario: Scenario, loaded: list[dict[str, Any]]) -> list[Problem]:
    """Tools no call can succeed with: what each route requires (its path parameters, required query parameters and
    required body fields, read from the code) against the loaded tool's input schema (``loaded``: the MCP tool list)
    and how a call's arguments reach the route (fastapi-mcp's rule: a name that is a path or query parameter goes
    there, the rest is the JSON body, dropped for GET and DELETE)."""
    import re

    schemas = {t.get("name"): t.get("inputSchema") or {} for t in loaded if isinstance(t, dict)}
    problems = []
    for tool in scenario.tools():
        if tool.shadowed_by or tool.name not in schemas:  # hidden over MCP: reported as hidden_route
            continue
        properties = schemas[tool.name].get("properties")
        exposed = set(properties) if isinstance(properties, dict) else set()
        routed = {p.name for p in tool.params if p.location in ("path", "query", "header")}
        needs = [p for p in tool.params if p.required or p.location == "path"]
        needs += [ToolParam(n, "path", "str", True) for n in re.findall(r"{(\w+)}", str(tool.path))
                  if n not in {p.name for p in tool.params if p.location == "path"}]  # in the URL, not declared
        why = []
        for param in needs:
            if param.name not in exposed and _alias(scenario.code or "", param.name) in exposed:
                continue  # declared as Query(..., alias="date"): the schema shows the alias
            if param.name not in exposed:
                why.append(f"the route requires {param.location} {'field' if param.location == 'body' else 'parameter'}"
                           f" '{param.name}', which its input schema does not expose")
            elif param.location == "body" and param.name in routed:
                why.append(f"the route requires body field '{param.name}', but a path or query parameter of the same "
                           "name takes that argument: it never reaches the body")
            elif param.location == "body" and str(tool.method).lower() in ("get", "delete"):
                why.append(f"the route requires body field '{param.name}', but {str(tool.method).upper()} calls "
                           "carry no body")
        if why:
            problems.append(Problem("uncallable_tool", "error", scenario.key,
                                    f"uncallable: {why[0]}" + (f" (and {len(why) - 1} more)" if len(why) > 1 else ""),
                                    "\n".join(why), tool=tool.name))
    return problems


def health_problems(key: str, health: HealthReport) -> list[Problem]:
    """A load failure, tools uncallable under the reference (from the loaded schemas), GET tools answering 5xx."""
    if not health.loads:
        return [Problem("load_failure", "error", key, "the environment does not load", health.error)]
    problems = [Problem("invalid_schema", "error", key, schema_problem_note(error), error, tool=tool)
                for tool, error in health.invalid_schemas.items()]
    for call in health.calls:
        if call.error_kind == "http_5xx":
            problems.append(Problem("tool_5xx", "warning", key,
                                    f"answered {call.status} to {json.dumps(call.arguments, ensure_ascii=False)}",
                                    call.traceback or call.text, tool=call.tool))
    return problems


def verifier_problem(key: str, task: int, mode: str, outcome: VerifierOutcome) -> Problem | None:
    """What a verifier run on the untouched initial database says about the task, if anything is wrong."""
    if outcome.label == "judge_error":
        loads = outcome.error_kind in ("syntax_error", "function_not_found", "no_code")
        what = "fails to load" if loads else f"fails on the initial database ({outcome.error_kind})"
        return Problem("verifier_error", "error", key, f"the {mode}-mode verifier {what}", outcome.error,
                       task=task, mode=mode)
    if mode == "code" and outcome.label == "complete":
        return Problem("solved_at_start", "error", key,
                       "the code-mode verifier says complete on the untouched initial database: solved before the "
                       "agent starts", json.dumps(outcome.result, ensure_ascii=False, default=str)[:2000],
                       task=task, mode=mode)
    return None


async def verifier_problems(scenario: Scenario, initial_db: Path, timeout: float = DEFAULT_TIMEOUT) -> list[Problem]:
    """Every usable verifier of every task, with the initial database as both its initial and final state."""
    jobs = []
    for task in range(len(scenario.tasks)):
        for mode in VERIFIER_MODES:
            if scenario.verifier_has_code[mode].get(task):
                jobs.append((task, mode))

    async def one(task: int, mode: str) -> Problem | None:
        try:
            verifier = scenario.verifier(task, mode)
            outcome = await _in_verifier_thread(run_verifier, verifier, initial_db, initial_db, "", timeout,
                                                DEFAULT_MEMORY_MB, mode)
            return verifier_problem(scenario.key, task, mode, outcome)
        except Exception:  # noqa: BLE001 - one verifier never stops the others
            return _failed_check(scenario.key, f"the {mode}-mode verifier of task {task}")

    found = await asyncio.gather(*(one(t, m) for t, m in jobs))
    return [p for p in found if p is not None]


def _failed_check(key: str, what: str) -> Problem:
    return Problem("check_failed", "error", key, f"awm could not check {what}", traceback.format_exc())


def _checked(key: str, what: str, check) -> list[Problem]:
    try:
        return list(check())
    except Exception:  # noqa: BLE001 - malformed input: report it, go on with the other checks
        return [_failed_check(key, what)]


async def diagnose(scenario: Scenario, pool: EnvPool, catalog: Catalog | None = None,
                   health: HealthReport | None = None, verifier_timeout: float = DEFAULT_TIMEOUT) -> Diagnosis:
    """Every problem of ``scenario`` (``health``: a health check just run, else one is run on ``pool``); the
    result is cached for ``cached_diagnosis``. Never raises for a bad scenario."""
    started = time.perf_counter()
    key = scenario.key
    problems = static_problems(scenario, catalog)
    initial_db: Path | None = None
    try:
        initial_db, report = await asyncio.to_thread(pool.templates.get, scenario)
        problems += _checked(key, "the database build", lambda: build_problems(key, report))
    except Exception:  # noqa: BLE001
        problems.append(_failed_check(key, "the database build"))
    if health is None:
        try:
            health = await check_scenario(pool, scenario)
        except Exception:  # noqa: BLE001
            problems.append(_failed_check(key, "the health check"))
    if health is not None:
        found = _checked(key, "the health check", lambda: health_problems(key, health))
        if health.loads:  # the loaded schemas are the exact answer: drop what the source suggested
            problems = [p for p in problems if p.kind != "invalid_schema"]
        problems += found
    if health is not None and health.loads:
        try:
            loaded = await _loaded_tools(pool, scenario)
            problems += _checked(key, "tool parameters", lambda: uncallable_tools(scenario, loaded))
        except Exception:  # noqa: BLE001
            problems.append(_failed_check(key, "the tools' parameters"))
    if initial_db is not None and Path(initial_db).is_file():
        problems += await verifier_problems(scenario, Path(initial_db), verifier_timeout)
    diagnosis = Diagnosis(key, scenario.name, _sorted(problems), True, health.status if health else None,
                          time.perf_counter() - started, time.time())
    _store(scenario, diagnosis)
    return diagnosis


def _alias(code: str, name: str) -> str | None:
    """The ``alias=`` a parameter or field named ``name`` is declared with in ``code`` (``date_: str = Query(...,
    alias="date")``), if any: the name its schema shows."""
    import re

    match = re.search(rf"\b{re.escape(name)}\s*:[^=\n]*=\s*\w+\([^)]*?\balias\s*=\s*[\"']([^\"']+)[\"']", code)
    return match.group(1) if match else None


async def _loaded_tools(pool: EnvPool, scenario: Scenario) -> list[dict[str, Any]]:
    """The tools a loaded episode of ``scenario`` lists (name, description, inputSchema), as an MCP client sees."""
    episode = await pool.open_episode(scenario)
    try:
        return list(episode.list_tools())
    finally:
        await episode.close()


def quick_diagnosis(scenario: Scenario, catalog: Catalog | None = None) -> Diagnosis:
    """The cached full diagnosis, else the static problems alone (``complete`` False)."""
    cached = cached_diagnosis(scenario)
    if cached is not None:
        return cached
    return Diagnosis(scenario.key, scenario.name, _sorted(static_problems(scenario, catalog)), complete=False)
