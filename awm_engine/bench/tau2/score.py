"""``awm bench tau2 score FILE``: re-score a results file written by τ²-bench's own runner (its simulations JSON,
``data/simulations/<run>/results.json``) with awm's evaluation, next to the rewards τ² recorded, so the numbers can
be compared.

The file is an object ``{"info": {..., "environment_info": {"domain_name": …}}, "tasks": [Task …],
"simulations": [{"id", "task_id", "trial", "termination_reason", "messages": [...], "reward_info": {"reward",
…}}, …]}``. Its tasks are used when present (the exact version that was run); otherwise the tasks of the data
directory. The domain's databases always come from the data directory (``--tau2-data``, ``--airline-db``).
Everything in the file may be malformed: a simulation that cannot be scored is reported with the reason and left
out of the metrics.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from awm_engine.bench.tau2.data import DOMAINS, Tau2Data
from awm_engine.bench.tau2.evaluation import TrajectoryError, evaluate_simulation
from awm_engine.bench.tau2.metrics import domain_metrics, is_success, paper_columns
from awm_engine.bench.tau2.tasks import Task


class ScoreFileError(ValueError):
    """The file is not a τ² results file."""


def read_results_file(path: Path | str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ScoreFileError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise ScoreFileError(f"{path} is not a τ² results file (an object with a 'simulations' list)")
    return data


def file_domain(data: dict[str, Any]) -> str | None:
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    env = info.get("environment_info") if isinstance(info.get("environment_info"), dict) else {}
    for value in (env.get("domain_name"), info.get("domain"), data.get("domain")):
        if isinstance(value, str) and value in DOMAINS:
            return value
    return None


def file_tasks(data: dict[str, Any], problems: list[str]) -> dict[str, Task]:
    tasks: dict[str, Task] = {}
    for i, item in enumerate(data.get("tasks") or [] if isinstance(data.get("tasks"), list) else []):
        try:
            task = Task.model_validate(item)
        except ValidationError as exc:
            problems.append(f"task #{i} in the file does not fit the schema ({exc.error_count()} errors); left out")
            continue
        tasks.setdefault(task.id, task)
    return tasks


def recorded_reward(simulation: dict[str, Any]) -> float | None:
    info = simulation.get("reward_info")
    value = info.get("reward") if isinstance(info, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def check_outcomes(info) -> dict[str, list[bool]]:
    """Each check's outcome in order: the environment assertions met, the gold actions matched, the
    communicate strings found (empty where the component was not evaluated)."""
    return {"env_assertions": [bool(a.get("met")) for a in info.env_assertions or []],
            "actions": [bool(c.get("action_match")) for c in info.action_checks or []],
            "communicate": [bool(c.get("met")) for c in info.communicate_checks or []]}


def simulation_problem(sim: dict[str, Any]) -> str | None:
    """Why a simulation of the file cannot be scored as τ² would read it (None when its shape is right): the
    messages a list of objects with a role, tool calls with a name and an object of arguments, a termination
    reason."""
    if not isinstance(sim.get("termination_reason"), str):
        return "no termination_reason" if sim.get("termination_reason") is None else \
            f"termination_reason is a {type(sim['termination_reason']).__name__}, not a string"
    messages = sim.get("messages")
    if not isinstance(messages, list):
        return "no messages" if messages is None else f"messages is a {type(messages).__name__}, not a list"
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"message #{i} is not an object"
        if isinstance(m.get("tool_messages"), list):
            continue
        if not isinstance(m.get("role"), str):
            return f"message #{i} has no role"
        if m.get("content") is not None and not isinstance(m.get("content"), str):
            return f"message #{i}: content is a {type(m['content']).__name__}, not a string"
        calls = m.get("tool_calls")
        if calls is None:
            continue
        if not isinstance(calls, list):
            return f"message #{i}: tool_calls is a {type(calls).__name__}, not a list"
        for j, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                return f"message #{i}: tool call #{j} has no name"
            if not isinstance(call.get("arguments"), dict):
                return f"message #{i}: tool call #{j} ({call['name']}): arguments are not an object"
    return None


async def score_file(path: Path | str, tau2_data: Tau2Data, domain: str | None = None, nl_judge=None,
                     k: int = 4) -> dict[str, Any]:
    """Every simulation of the file scored again: per simulation the recorded and awm's reward, and τ²'s
    metrics over awm's rewards."""
    data = read_results_file(path)
    domain = domain or file_domain(data)
    if domain not in DOMAINS:
        raise ScoreFileError(f"{path}: the file does not say its domain (info.environment_info.domain_name); "
                             "pass --domain airline|retail|telecom")
    domain_data = tau2_data.domain(domain)
    if (problem := domain_data.db_problem()) is not None:
        raise ScoreFileError(problem)
    problems: list[str] = []
    tasks = file_tasks(data, problems)
    rows: list[dict[str, Any]] = []
    for i, sim in enumerate(data["simulations"]):
        if not isinstance(sim, dict):
            problems.append(f"simulation #{i} is not an object; left out")
            continue
        task_id = sim.get("task_id")
        row: dict[str, Any] = {"id": sim.get("id"), "task_id": task_id, "trial": sim.get("trial"),
                               "termination_reason": sim.get("termination_reason"),
                               "recorded_reward": recorded_reward(sim), "reward": None, "status": "ok"}
        task = tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None and isinstance(task_id, str):
            try:
                task = domain_data.task(task_id)
            except KeyError:
                task = None
        reason = str(sim.get("termination_reason") or "").lower()
        if reason == "infrastructure_error":
            row.update(status="error", error="the simulation crashed (infrastructure_error): left out, as τ² does")
        elif (problem := simulation_problem(sim)) is not None:
            row.update(status="error", error=f"malformed simulation: {problem}")
        elif task is None:
            row.update(status="error", error=f"no task {task_id!r} in the file or in {domain_data.dir}")
        else:
            try:
                info = await evaluate_simulation(domain_data, task, sim.get("messages"), sim.get("termination_reason"),
                                                 nl_judge)
            except TrajectoryError as exc:
                row.update(status="error", error=f"the messages cannot be replayed: {exc}")
            else:
                row.update(reward=info.reward, reward_breakdown=info.reward_breakdown, not_scored=info.not_scored,
                           db_match=(info.db_check or {}).get("db_match"), checks=check_outcomes(info))
                if row["recorded_reward"] is not None and info.reward is not None:
                    row["agree"] = is_success(row["recorded_reward"]) == is_success(info.reward)
        rows.append(row)
    metrics = domain_metrics(rows)
    compared = [r for r in rows if "agree" in r]
    return {"file": str(path), "domain": domain, "simulations": rows, "problems": problems,
            "metrics": metrics, "paper": paper_columns(metrics, k),
            "recorded_metrics": domain_metrics([{**r, "reward": r["recorded_reward"]} for r in rows
                                                if r["recorded_reward"] is not None]),
            "agreement": {"compared": len(compared), "agree": sum(1 for r in compared if r["agree"]),
                          "disagree": [r["id"] for r in compared if not r["agree"]]}}
