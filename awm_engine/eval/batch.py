"""Batch evaluation: tasks × samples with one policy, resumable, streaming one JSONL line per rollout.

A run directory holds ``config.json`` (the resolved configuration, no secrets), ``results.jsonl``
(one line per finished rollout, fsync'd as it is written), ``metadata.json`` (aggregates, rewritten
as the run goes) and ``rollouts/<scenario>/<task>_<sample>/`` (each rollout's run directory). A
killed run loses nothing that finished; ``resume`` drops errored and torn lines and runs only what
is missing or errored, so every rollout ends up in the file exactly once. The loop is ``eval.runner``'s (the one
every benchmark runs through); ``EvalRun`` is this evaluation's adapter.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import LLMPolicy, PolicyError
from awm_engine.agent.rollout import AgentConfig
from awm_engine.data.catalog import Catalog
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.run_formats import (  # EvalConfig is defined with the run formats
    METADATA,
    EvalConfig,
)
from awm_engine.eval.episode import (
    environment_warnings,
    make_policy,
    missing_solutions,
    run_episode,
    verification_warnings,
)
from awm_engine.eval.metrics import summarize
from awm_engine.eval.results import ResultsIndex, rollout_id
from awm_engine.eval.runner import Adapter, run_items
from awm_engine.eval.runner import Progress as Progress  # re-exported: where callers have found them
from awm_engine.eval.runner import RunLocked as RunLocked
from awm_engine.eval.runner import lock_run_dir as lock_run_dir
from awm_engine.runtime.pool import EnvPool
from awm_engine.sandbox.host import protections
from awm_engine.verify.judge import DEFAULT_PROFILE
from awm_engine.verify.rewards import RewardConfig


def work_items(catalog: Catalog, config: EvalConfig) -> list[tuple[str, int, int]]:
    scenarios = [catalog.get(s) for s in config.scenarios] if config.scenarios else list(catalog)
    items = []
    for s in scenarios:
        tasks = config.tasks if config.tasks is not None else range(len(s.tasks))
        for t in tasks:
            if 0 <= t < len(s.tasks):
                items.extend((s.key, t, i) for i in range(config.k))
    return items


def _tool_calls(rollout) -> list[dict[str, Any]]:

    calls = []
    for entry in rollout.trajectory:
        for call in entry.get("tool_calls") or []:
            calls.append({"name": call.get("name"), "arguments": call.get("arguments"),
                          "response": (entry.get("tool_response") or {}).get("content", "")[:2000]})
    return calls


def build_record(scenario: str, task_id: int, sample: int, task: str, config: EvalConfig, outcome=None,
                 error: str | None = None, error_kind: str | None = None, timing: dict | None = None) -> dict:
    record: dict[str, Any] = {
        "id": rollout_id(scenario, task_id, sample), "scenario": scenario, "task_id": task_id, "sample": sample,
        "task": task, "model": config.model, "policy": config.policy, "time": time.time(), "timing": timing or {},
    }
    if outcome is None:
        record.update(status="error", error=error, error_kind=error_kind, label=None, reward=None, has_verdict=False,
                      stop_reason=None)
        return record
    finished, report, rollout = outcome.finished, outcome.verification, outcome.rollout
    status = "error" if finished.stop_reason == "llm_error" else "ok"
    record.update({
        "status": status, "error": finished.error if status == "error" else None,
        "error_kind": "llm_error" if status == "error" else None,
        "stop_reason": finished.stop_reason, "final_answer": finished.final_answer,
        "turns": finished.iterations, "tool_call_count": finished.tool_calls,
        "format_errors": finished.format_errors, "env_errors": finished.env_errors,
        "env_error": rollout.first_env_error if rollout else None,  # the first one's "tool: Type: message"
        "label": report.label if report else None, "reward": report.reward if report else None,
        "has_verdict": report.has_verdict if report else False,
        "reward_breakdown": {"label": report.label, "reward": report.reward, "rewards": report.rewards,
                             "format_error_stop": finished.stop_reason == "format_error"} if report else None,
        "verifier": (report.code or report.sql).to_dict() if report and (report.code or report.sql) else None,
        "judge": report.judge if report else None,
        "usage": finished.usage, "messages": rollout.stored_messages() if rollout else [],  # the trajectory cap
        "tool_calls": _tool_calls(rollout) if rollout else [],
        "run_dir": str(outcome.run_dir), "initial_db": str(outcome.run_dir / "initial.db"),
        "final_db": str(outcome.run_dir / "final.db"),
    })
    return record


def run_outcome(overall: dict[str, Any], verified: bool = True) -> dict[str, Any]:
    """Whether a run's results mean anything, from its overall aggregate: ``{"exit_code", "reason"}``. Exit code 1
    when nothing was scored (no rollout, every rollout errored, or none that ran got a verdict: no verifier of the
    chosen mode, no environment code...), else 0; ``reason`` says which (None for 0). ``awm eval run``'s exit code.
    A run that asked for no verification (``verified`` False, ``--verify none``) needs no verdict, only rollouts
    that did not error."""
    rollouts, scored = overall.get("rollouts") or 0, overall.get("scored") or 0
    errored, no_verdict = overall.get("errored") or 0, overall.get("no_verdict") or 0
    if not rollouts:
        return {"exit_code": 1, "reason": "nothing to run: no rollout was selected"}
    if errored >= rollouts:
        return {"exit_code": 1, "reason": f"every rollout errored ({errored} of {rollouts})"}
    if verified and not scored:
        return {"exit_code": 1, "reason": f"nothing was scored: of {rollouts} rollouts, {errored} errored and "
                                          f"{no_verdict} got no verdict"}
    return {"exit_code": 0, "reason": None}


def write_metadata(out: Path, config: EvalConfig, extra: dict[str, Any] | None = None,
                   index: ResultsIndex | None = None) -> dict[str, Any]:
    """Aggregate the results (from the lazy index's summaries: messages are never loaded) into metadata.json."""
    index = index or ResultsIndex(out / "results.jsonl")
    index.refresh()
    records = list(index.summaries())
    summary = summarize(records, config.pass_threshold)
    data = METADATA.stamp({"model": config.model, "policy": config.policy, "k": config.k, "rollouts": len(records),
                           "updated": time.strftime("%Y-%m-%dT%H:%M:%S"), **summary,
                           "outcome": run_outcome(summary["overall"], config.verify != "none"), **(extra or {})})
    tmp = out / (METADATA.file + ".tmp")
    tmp.write_text(dumps_text(data, indent=2), encoding="utf-8")
    tmp.replace(out / METADATA.file)
    return data


@dataclass
class Preflight:
    """What an evaluation will run, known before anything is written."""

    catalog: Catalog
    items: list[tuple[str, int, int]]  # (scenario key, task, sample)
    warnings: list[str]  # selected tasks the chosen verification cannot verify as asked


def absent_tasks(catalog: Catalog, config: EvalConfig) -> str | None:
    """Why the ``--task`` numbers that no selected scenario has are refused, or None when each is some scenario's."""
    chosen = [catalog.get(name) for name in config.scenarios] if config.scenarios else list(catalog)
    absent = sorted({t for t in config.tasks or () if not any(0 <= t < len(s.tasks) for s in chosen)})
    if not absent or not chosen:
        return None
    counts = "; ".join(f"{s.key} has {len(s.tasks)}" for s in chosen[:3]) + ("; …" if len(chosen) > 3 else "")
    return (f"no selected scenario has task {', '.join(map(str, absent))} (tasks count from 0; {counts})")


def preflight(config: EvalConfig, judge: Endpoint | None = None) -> Preflight:
    """The work of ``config`` and its warnings; ``PolicyError`` (a refusal) for an unknown scenario or when
    ``--policy oracle`` has no reference solution for some selected task."""
    catalog = Catalog.load(config.data_dirs)
    if not len(catalog):  # as every other verb: nothing to evaluate is unusable input, and no run is created
        why = "; ".join(str(issue).removeprefix("error: ") for issue in catalog.issues[:3])
        raise PolicyError("no scenarios found in " + ", ".join(map(str, catalog.dirs)) + (f" ({why})" if why else ""),
                          "config")
    try:
        items = work_items(catalog, config)
    except KeyError as exc:
        raise PolicyError(str(exc.args[0]), "config") from None
    tasks = [(key, task) for key, task, _ in items]
    if config.tasks and (problem := absent_tasks(catalog, config)):
        raise PolicyError(problem, "config")
    if config.policy == "oracle" and (problem := missing_solutions(catalog, tasks)):
        raise PolicyError(problem, "config")
    warnings = data_warnings(catalog, config) + environment_warnings(catalog, tasks) + verification_warnings(
        catalog, tasks, None if config.verify == "none" else config.verify, judge is not None)
    if not items:
        warnings.append("no rollout selected: the chosen scenarios and tasks hold no task")
    return Preflight(catalog, items, warnings)


def data_warnings(catalog: Catalog, config: EvalConfig) -> list[str]:
    """Before a run: the parts of the data that could not be read (a JSONL line that does not parse, a file or a
    ``--data`` directory that cannot be read: errors of no scenario, so what they held may be missing from any), and
    selected scenarios with no task (none of their rollouts is run). Without these a truncated download was evaluated
    in part, and the run said nothing. A scenario's own errors are warned about where they matter (no environment
    code, no database, a verifier that does not compile: ``environment_warnings``, ``verification_warnings``)."""
    selected = [catalog.get(s) for s in config.scenarios] if config.scenarios else list(catalog)
    unread = [issue for issue in catalog.issues if issue.level == "error" and issue.scenario is None]
    warnings = []
    if unread:
        first = str(unread[0]).removeprefix("error: ")
        warnings.append(f"{len(unread)} {'part' if len(unread) == 1 else 'parts'} of the data could not be read "
                        f"(awm catalog list shows them): scenarios may be missing or incomplete; the first: {first}")
    taskless = [s.key for s in selected if not s.tasks]
    if taskless:
        warnings.append(f"{len(taskless)} of {len(selected)} selected scenarios have no task "
                        f"({', '.join(taskless[:5])}{' …' if len(taskless) > 5 else ''}): none of their rollouts is run")
    return warnings


async def run_evaluation(config: EvalConfig, out: Path | str, endpoint: Endpoint | None = None,
                         judge: Endpoint | None = None, resume: bool = False,
                         on_progress: Callable[[Progress, dict | None], None] | None = None) -> dict[str, Any]:
    """Run (or resume) an evaluation into ``out``; returns the final metadata (the preflight's warnings under
    ``warnings``). A refusal of the preflight (``PolicyError``) leaves ``out`` untouched."""
    out = Path(out).resolve()
    checked = preflight(config, judge)
    agent, rewards = AgentConfig.from_dict(config.agent), RewardConfig(**config.rewards)
    config = replace(config, agent=agent.to_dict(), rewards=rewards.to_dict())  # resolved: what --resume reuses
    run = EvalRun(config, out, endpoint, judge, checked, agent, rewards)
    await run_items(run, out, config.to_dict(), resume, on_progress)
    return json.loads((out / "metadata.json").read_text())


EXECUTORS = ("local", "ray")


def make_pool(config: EvalConfig):
    """Where the run's environments live: worker processes on this machine, or Ray actors on a cluster."""
    if config.executor == "ray":
        from awm_engine.runtime.ray_pool import RayEnvPool

        return RayEnvPool(config.data_dirs, actors=config.workers, address=config.ray_address)
    if config.executor not in EXECUTORS:
        raise PolicyError(f"unknown executor {config.executor!r} (choose from {', '.join(EXECUTORS)})", "config")
    return EnvPool(workers=config.workers)


class EvalRun(Adapter):
    """``awm eval run`` as the shared loop's adapter: one item per (scenario, task, sample)."""

    def __init__(self, config: EvalConfig, out: Path, endpoint: Endpoint | None, judge: Endpoint | None,
                 checked: Preflight, agent: AgentConfig, rewards: RewardConfig):
        self.config, self.out, self.endpoint, self.judge = config, out, endpoint, judge
        self.catalog, self.work = checked.catalog, checked.items
        self.agent, self.rewards, self.concurrency = agent, rewards, config.concurrency
        self.verify_mode = None if config.verify == "none" else config.verify
        self.run_facts = {"warnings": checked.warnings,
                          "verification_profile": getattr(agent, "protocol", DEFAULT_PROFILE),
                          "sandbox": protections().to_dict()}
        self.shared_policy: LLMPolicy | None = None
        self.pool = None

    def items(self) -> list[tuple[str, int, int]]:
        return self.work

    def item_id(self, item: tuple[str, int, int]) -> str:
        return rollout_id(*item)

    async def start(self) -> None:
        config = self.config
        self.shared_policy = LLMPolicy(self.endpoint) if config.policy == "llm" and self.endpoint is not None else None
        if config.policy == "llm" and self.shared_policy is None:
            raise PolicyError("an llm evaluation needs a model endpoint", "config")
        self.pool = make_pool(config)
        await self.pool.start()

    async def close(self) -> None:
        if self.shared_policy is not None:
            await self.shared_policy.aclose()
        await self.pool.close()

    async def run_one(self, item: tuple[str, int, int]) -> dict[str, Any]:
        config, (scenario_key, task_id, sample) = self.config, item
        scenario = self.catalog.get(scenario_key)
        run_dir = self.out / "rollouts" / scenario_key / f"{task_id}_{sample}"
        shutil.rmtree(run_dir, ignore_errors=True)
        started = time.perf_counter()
        meta = {"model": config.model, "api_url": (config.endpoint or {}).get("base_url", ""),
                "temperature": (config.endpoint or {}).get("temperature", 1.0), "sample": sample}
        try:
            policy = self.shared_policy or make_policy(config.policy, scenario, task_id, self.agent.mode,
                                                       style=self.agent.tool_name_style)
            outcome = await run_episode(self.catalog, scenario, task_id, policy, self.agent, run_dir, pool=self.pool,
                                        verify_mode=self.verify_mode, judge=self.judge, rewards=self.rewards,
                                        meta=meta)
        except PolicyError as exc:
            return build_record(scenario_key, task_id, sample, scenario.tasks[task_id], config, None,
                                str(exc), "agent_error", {"total_s": time.perf_counter() - started})
        if outcome.failure is not None:
            return build_record(scenario_key, task_id, sample, scenario.tasks[task_id], config, None,
                                str(outcome.failure), "environment_error", {"total_s": time.perf_counter() - started})
        return build_record(scenario_key, task_id, sample, scenario.tasks[task_id], config, outcome,
                            timing={"total_s": time.perf_counter() - started, "rollout_s": outcome.finished.elapsed_s})

    def error_record(self, item: tuple[str, int, int], error: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
        scenario_key, task_id, sample = item
        record = build_record(scenario_key, task_id, sample, self.catalog.get(scenario_key).tasks[task_id],
                              self.config, None, error["error"], "internal_error", {"total_s": elapsed_s})
        record["traceback"] = error["traceback"]
        return record

    def metadata(self, progress: Progress, index: ResultsIndex, running: bool) -> dict[str, Any]:
        extra = {"running": running, "elapsed_s": time.time() - progress.started}
        if not running:
            extra["complete"] = progress.done == progress.total
        return write_metadata(self.out, self.config, {**extra, **self.run_facts}, index)
