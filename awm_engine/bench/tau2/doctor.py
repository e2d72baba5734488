"""``awm env doctor`` on a τ²-bench domain (``tau2_airline``, ``tau2_retail``, ``tau2_telecom``): every problem of the
domain in ``verify.doctor``'s typed list, so the CLI, ``--json`` and the TUI's Problems list show it like an AWM
environment's.

The checks that apply: the data (task files, splits, policy, user-simulator guidelines: ``data_issue``), the
database (``build_failure``), the domain loading in a pool worker and listing its tools (``load_failure``), each
tool's input schema (``invalid_schema``), and per task of the split: its initial state builds (``task_setup``), its
gold actions run (``gold_action_error``), played as a conversation they score 1 on the DB and environment-assertion
components with τ²'s own evaluator (``gold_mismatch``), and an empty conversation does not already earn the full
reward (``solved_at_start``). AWM's health check (GET tools over HTTP) and verifiers do not exist for τ² domains;
the diagnosis says so in its ``notes``. Results are cached per version of the domain's files, like AWM diagnoses.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from awm_engine.bench.tau2.data import domains_dir
from awm_engine.bench.tau2.environment import build_env
from awm_engine.bench.tau2.episode import DomainScenario
from awm_engine.bench.tau2.evaluation import (
    evaluate_environment,
    evaluate_simulation,
    gold_messages,
    gold_state,
)
from awm_engine.data.paths import cache_dir
from awm_engine.runtime.episode import EnvLoadError
from awm_engine.runtime.openapi_tools import input_schema_error
from awm_engine.verify.doctor import (
    FORMAT_VERSION,
    Diagnosis,
    Problem,
    _sorted,
    read_diagnosis,
    write_diagnosis,
)

NOTES = (
    "health check: does not apply (τ² tools are Python functions, not HTTP routes); opening the domain in a worker "
    "and listing its tools stands in",
    "verifiers: do not apply (τ²'s evaluator scores the tasks); checking each task's gold actions stands in",
)
CHECKS = 2  # the version of the checks below: a cached diagnosis made by other checks is not reused


def _problem(kind: str, severity: str, key: str, message: str, detail: str | None = None, **where) -> Problem:
    return Problem(kind, severity, key, message, detail, **where)


def static_problems(scenario: DomainScenario) -> list[Problem]:
    """What shows without running anything: the data's problems and the database's (``awm bench tau2 check``)."""
    key, domain = scenario.key, scenario.domain_data
    if not domain.dir.is_dir():
        return [_problem("data_issue", "error", key, f"no {domain.name} directory in {domain.root}", str(domain.dir))]
    _ = domain.splits, domain.policy, domain.guidelines()  # loading them records their issues
    problems = [_problem("data_issue", "error" if i.level == "error" else "warning", key, i.message, i.path)
                for i in domain.issues]
    if scenario.split not in domain.splits:
        problems.append(_problem("data_issue", "error", key, f"no usable split {scenario.split!r} (usable: "
                                 f"{', '.join(sorted(domain.splits)) or 'none'}): no task can run"))
    db = domain.db_problem()
    if db is not None:
        problems.append(_problem("build_failure", "error", key, db, str(domain.db_path)))
    return problems


def task_problems(scenario: DomainScenario, index: int, mutating=lambda name: True) -> list[Problem]:
    """A task's initial state, gold actions and whether doing nothing already earns the full reward
    (``mutating(name)``: whether a tool writes, for the severity of a failing gold action)."""
    key, domain, task = scenario.key, scenario.domain_data, scenario.tau2_tasks[index]
    where = {"task": index}
    try:
        messages = gold_messages(domain, task)
    except Exception as exc:  # noqa: BLE001 - the task's initialization data or actions fail
        return [_problem("task_setup", "error", key, f"task id {task.id!r}: the initial state cannot be built: "
                         f"{type(exc).__name__}: {exc}", traceback.format_exc(), **where)]
    problems = []
    _, _, errors = gold_state(domain, task)
    for error in errors:
        writes = mutating(error.get("name"))
        problems.append(_problem("gold_action_error", "warning" if writes else "info", key,
                                 f"task id {task.id!r}: gold action {error.get('name')} fails: {error.get('error')}"
                                 + ("" if writes else " (a read: the end state does not change)"),
                                 json.dumps(error), **where))
    criteria = task.evaluation_criteria
    basis = set(task.basis)
    if criteria is not None and basis & {"DB", "ENV_ASSERTION"} and (criteria.actions or criteria.env_assertions):
        env = evaluate_environment(domain, task, messages)
        failed = []
        if "DB" in basis and not env["db_check"]["db_match"]:
            failed.append("DB (the replayed conversation's database hash differs from the gold one)")
        if "ENV_ASSERTION" in basis and not all(a["met"] for a in env["env_assertions"]):
            failed += [f"ENV_ASSERTION {a['env_assertion'].get('func_name')}" for a in env["env_assertions"]
                       if not a["met"]]
        if failed:
            problems.append(_problem("gold_mismatch", "error", key, f"task id {task.id!r}: its gold actions score 0 "
                                     "on " + "; ".join(failed), json.dumps(env["db_check"], default=str), **where))
    # τ²'s own evaluator on the agent's greeting and the user's stop, for every task: no rule of awm's decides which
    # could score (a task whose criteria are all empty lists — retail 57 — earns 1 as much as one whose gold
    # actions only read; a task without criteria scores 1 on any conversation that stops)
    empty = [messages[0], messages[-1]]  # the gold conversation's greeting and stop, nothing between
    info = asyncio.run(evaluate_simulation(domain, task, empty, "user_stop"))
    if info.reward == 1.0:
        why = ("it has no evaluation criteria" if criteria is None
               else "the task rewards leaving the state as it is")
        problems.append(_problem("solved_at_start", "info", key, f"task id {task.id!r}: a conversation with no "
                                 f"action already scores 1 ({why})", json.dumps(info.reward_breakdown), **where))
    return problems


def _tool_problems(key: str, tools: list[dict[str, Any]], who: str) -> list[Problem]:
    out = []
    for tool in tools:
        error = input_schema_error(tool.get("inputSchema") or {})
        if error:
            out.append(_problem("invalid_schema", "error", key, f"the {who} tool's input schema is not valid JSON "
                                "Schema", error, tool=tool.get("name")))
    return out


async def _load_problems(scenario: DomainScenario, pool, run_dir: Path) -> tuple[list[Problem], str]:
    """Open the domain (no task) in a pool worker and list its tools: (problems, health status)."""
    key = scenario.key
    try:
        episode = await pool.open_episode(scenario, run_dir=run_dir)
    except EnvLoadError as exc:
        return [_problem("load_failure", "error", key, "the domain does not open in a worker", str(exc))], "broken"
    try:
        tools = episode.list_tools()
        tools = await tools if asyncio.iscoroutine(tools) else tools
    finally:
        await episode.close()
    return _tool_problems(key, tools, "agent") + _tool_problems(key, scenario.user_tools(), "user"), "ok"


def _checked(key: str, what: str, check) -> list[Problem]:
    try:
        return list(check())
    except Exception:  # noqa: BLE001 - report it, go on with the other checks
        return [_problem("check_failed", "error", key, f"awm could not check {what}", traceback.format_exc())]


async def diagnose(scenario: DomainScenario, pool, workdir: Path | None = None) -> Diagnosis:
    """Every problem of a τ² domain (see the module docstring), cached for ``cached_diagnosis``. Never raises for
    bad data."""
    started = time.perf_counter()
    key = scenario.key
    problems = _checked(key, "the data", lambda: static_problems(scenario))
    health = None
    domain = scenario.domain_data
    if domain.dir.is_dir() and domain.db_problem() is None:  # else nothing can open: the problem is listed
        run_dir = Path(tempfile.mkdtemp(prefix=f"awm-doctor-{key}-", dir=workdir))
        try:
            found, health = await _load_problems(scenario, pool, run_dir)
            problems += found
        except Exception:  # noqa: BLE001
            problems.append(_problem("check_failed", "error", key, "awm could not open the domain",
                                     traceback.format_exc()))
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        tools = await asyncio.to_thread(build_env, domain)  # which tools write
        for index in range(len(scenario.tau2_tasks)):
            problems += await asyncio.to_thread(_checked, key, f"task {index}", lambda i=index: task_problems(
                scenario, i, tools.is_mutating_tool))
    diagnosis = Diagnosis(key, scenario.name, _sorted(problems), True, health, time.perf_counter() - started,
                          time.time(), list(NOTES))
    _store(scenario, diagnosis)
    return diagnosis


def quick_diagnosis(scenario: DomainScenario) -> Diagnosis:
    """The cached full diagnosis, else the static problems alone (``complete`` False)."""
    cached = cached_diagnosis(scenario)
    if cached is not None:
        return cached
    problems = _checked(scenario.key, "the data", lambda: static_problems(scenario))
    return Diagnosis(scenario.key, scenario.name, _sorted(problems), complete=False, notes=list(NOTES))


# -- the cache ----------------------------------------------------------------------------------------------

def diagnosis_version(scenario: DomainScenario) -> str:
    """What a diagnosis depends on: every file of the domain's directory, the user-simulator guidelines, the
    airline database given apart, and the split."""
    domain = scenario.domain_data
    parts = [str(FORMAT_VERSION), f"tau2-checks-{CHECKS}", scenario.split]
    paths = sorted(domain.dir.glob("*")) if domain.dir.is_dir() else []
    paths += sorted((domains_dir(domain.root).parent / "user_simulator").glob("*.md"))
    paths += sorted((domain.root / "user_simulator").glob("*.md"))
    if domain.airline_db is not None:
        paths.append(domain.airline_db)
    for path in paths:
        try:
            st = os.stat(path)
            parts.append(f"{Path(path).resolve()}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{path}:?")
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def _cache_path(scenario: DomainScenario) -> Path:
    return cache_dir() / "doctor" / f"{scenario.key}-{diagnosis_version(scenario)}.json"


def cached_diagnosis(scenario: DomainScenario) -> Diagnosis | None:
    return read_diagnosis(_cache_path(scenario))


def _store(scenario: DomainScenario, diagnosis: Diagnosis) -> None:
    write_diagnosis(_cache_path(scenario), diagnosis)
