"""Batch evaluation: tasks × samples with one policy, resumable, streaming one JSONL line per rollout.

A run directory holds ``config.json`` (the resolved configuration, no secrets), ``results.jsonl``
(one line per finished rollout, fsync'd as it is written), ``metadata.json`` (aggregates, rewritten
as the run goes) and ``rollouts/<scenario>/<task>_<sample>/`` (each rollout's run directory). A
killed run loses nothing that finished; ``resume`` drops errored and torn lines and runs only what
is missing or errored, so every rollout ends up in the file exactly once.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import LLMPolicy, PolicyError
from awm_engine.agent.rollout import AgentConfig
from awm_engine.data.catalog import Catalog
from awm_engine.data.run_formats import (  # EvalConfig is defined with the run formats
    METADATA,
    EvalConfig,
)
from awm_engine.eval.episode import (
    make_policy,
    missing_solutions,
    run_episode,
    verification_warnings,
)
from awm_engine.eval.metrics import summarize
from awm_engine.eval.results import ResultsIndex, ResultsWriter, compact, rollout_id
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


@dataclass
class Progress:
    total: int
    done: int = 0
    skipped: int = 0
    errors: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    started: float = field(default_factory=time.time)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.scored if self.scored else None


def write_metadata(out: Path, config: EvalConfig, extra: dict[str, Any] | None = None,
                   index: ResultsIndex | None = None) -> dict[str, Any]:
    """Aggregate the results (from the lazy index's summaries: messages are never loaded) into metadata.json."""
    index = index or ResultsIndex(out / "results.jsonl")
    index.refresh()
    records = list(index.summaries())
    summary = summarize(records, config.pass_threshold)
    data = METADATA.stamp({"model": config.model, "policy": config.policy, "k": config.k, "rollouts": len(records),
                           "updated": time.strftime("%Y-%m-%dT%H:%M:%S"), **summary, **(extra or {})})
    tmp = out / (METADATA.file + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    tmp.replace(out / METADATA.file)
    return data


@dataclass
class Preflight:
    """What an evaluation will run, known before anything is written."""

    catalog: Catalog
    items: list[tuple[str, int, int]]  # (scenario key, task, sample)
    warnings: list[str]  # selected tasks the chosen verification cannot verify as asked


def preflight(config: EvalConfig, judge: Endpoint | None = None) -> Preflight:
    """The work of ``config`` and its warnings; ``PolicyError`` (a refusal) for an unknown scenario or when
    ``--policy oracle`` has no reference solution for some selected task."""
    catalog = Catalog.load(config.data_dirs)
    try:
        items = work_items(catalog, config)
    except KeyError as exc:
        raise PolicyError(str(exc.args[0]), "config") from None
    tasks = [(key, task) for key, task, _ in items]
    if config.policy == "oracle" and (problem := missing_solutions(catalog, tasks)):
        raise PolicyError(problem, "config")
    return Preflight(catalog, items, verification_warnings(
        catalog, tasks, None if config.verify == "none" else config.verify, judge is not None))


async def run_evaluation(config: EvalConfig, out: Path | str, endpoint: Endpoint | None = None,
                         judge: Endpoint | None = None, resume: bool = False,
                         on_progress: Callable[[Progress, dict | None], None] | None = None) -> dict[str, Any]:
    """Run (or resume) an evaluation into ``out``; returns the final metadata (the preflight's warnings under
    ``warnings``). A refusal of the preflight (``PolicyError``) leaves ``out`` untouched."""
    out = Path(out).resolve()
    checked = preflight(config, judge)
    catalog, items, warnings = checked.catalog, checked.items, checked.warnings
    out.mkdir(parents=True, exist_ok=True)
    lock = lock_run_dir(out)  # one writer per run directory, for the whole run
    try:
        return await _run_locked(config, out, endpoint, judge, resume, on_progress, catalog, items, warnings)
    finally:
        lock.close()


EXECUTORS = ("local", "ray")


def make_pool(config: EvalConfig):
    """Where the run's environments live: worker processes on this machine, or Ray actors on a cluster."""
    if config.executor == "ray":
        from awm_engine.runtime.ray_pool import RayEnvPool

        return RayEnvPool(config.data_dirs, actors=config.workers, address=config.ray_address)
    if config.executor not in EXECUTORS:
        raise PolicyError(f"unknown executor {config.executor!r} (choose from {', '.join(EXECUTORS)})", "config")
    return EnvPool(workers=config.workers)


class RunLocked(Exception):
    """Another process is writing this run directory."""


def lock_run_dir(out: Path):
    """An exclusive lock on ``out/.lock`` (released when the process ends, however it ends)."""
    import fcntl

    handle = open(out / ".lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise RunLocked(f"{out} is being written by another awm process (an evaluation is running there); "
                        "wait for it, or use another --out") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


async def _run_locked(config: EvalConfig, out: Path, endpoint, judge, resume, on_progress, catalog, items,
                      warnings) -> dict[str, Any]:
    results = out / "results.jsonl"
    if resume:
        compact(results, lambda s: s.get("status") == "ok")
    agent, rewards = AgentConfig.from_dict(config.agent), RewardConfig(**config.rewards)
    config = replace(config, agent=agent.to_dict(), rewards=rewards.to_dict())  # resolved: what --resume reuses
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    run_facts = {"warnings": warnings, "verification_profile": getattr(agent, "protocol", DEFAULT_PROFILE),
                 "sandbox": protections().to_dict()}
    index = ResultsIndex(results)
    index.refresh()
    done_ids = {rid for rid, e in index.entries.items() if e.summary.get("status") == "ok"}
    todo = [it for it in items if rollout_id(*it) not in done_ids]
    progress = Progress(total=len(items), done=len(items) - len(todo), skipped=len(items) - len(todo))
    for e in index.entries.values():
        if e.summary.get("status") == "ok" and e.summary.get("has_verdict") and e.summary.get("reward") is not None:
            progress.reward_sum += e.summary["reward"]
            progress.scored += 1
    if on_progress:
        on_progress(progress, None)
    verify_mode = None if config.verify == "none" else config.verify
    shared_policy = LLMPolicy(endpoint) if config.policy == "llm" and endpoint is not None else None
    if config.policy == "llm" and shared_policy is None:
        raise PolicyError("an llm evaluation needs a model endpoint", "config")
    writer = ResultsWriter(results)
    semaphore = asyncio.Semaphore(max(1, config.concurrency))
    last_meta = 0.0
    pool = make_pool(config)
    await pool.start()

    async def one(scenario_key: str, task_id: int, sample: int) -> None:
        nonlocal last_meta
        async with semaphore:
            scenario = catalog.get(scenario_key)
            run_dir = out / "rollouts" / scenario_key / f"{task_id}_{sample}"
            shutil.rmtree(run_dir, ignore_errors=True)
            started = time.perf_counter()
            meta = {"model": config.model, "api_url": (config.endpoint or {}).get("base_url", ""),
                    "temperature": (config.endpoint or {}).get("temperature", 1.0), "sample": sample}
            try:
                policy = shared_policy or make_policy(config.policy, scenario, task_id, agent.mode,
                                                      style=agent.tool_name_style)
                outcome = await run_episode(catalog, scenario, task_id, policy, agent, run_dir, pool=pool,
                                            verify_mode=verify_mode, judge=judge, rewards=rewards, meta=meta)
                if outcome.failure is not None:
                    record = build_record(scenario_key, task_id, sample, scenario.tasks[task_id], config, None,
                                          str(outcome.failure), "environment_error",
                                          {"total_s": time.perf_counter() - started})
                else:
                    record = build_record(scenario_key, task_id, sample, scenario.tasks[task_id], config, outcome,
                                          timing={"total_s": time.perf_counter() - started,
                                                  "rollout_s": outcome.finished.elapsed_s})
            except PolicyError as exc:
                record = build_record(scenario_key, task_id, sample, scenario.tasks[task_id], config, None,
                                      str(exc), "agent_error", {"total_s": time.perf_counter() - started})
            except Exception as exc:  # noqa: BLE001 - awm's own failure: recorded with its traceback, the run goes on
                record = build_record(scenario_key, task_id, sample, scenario.tasks[task_id], config, None,
                                      f"{type(exc).__name__}: {exc}", "internal_error",
                                      {"total_s": time.perf_counter() - started})
                record["traceback"] = traceback.format_exc()
            await writer.awrite(record)
            progress.done += 1
            if record["status"] == "error":
                progress.errors += 1
            elif record.get("has_verdict") and record.get("reward") is not None:
                progress.reward_sum += record["reward"]
                progress.scored += 1
            if on_progress:
                on_progress(progress, record)
            if time.time() - last_meta > 5:
                last_meta = time.time()
                write_metadata(out, config, {"running": True, "elapsed_s": time.time() - progress.started,
                                             **run_facts}, index)

    try:
        await asyncio.gather(*(one(*item) for item in todo))
    finally:
        writer.close()
        if shared_policy is not None:
            await shared_policy.aclose()
        await pool.close()
        write_metadata(out, config, {"running": False, "elapsed_s": time.time() - progress.started,
                                     "complete": progress.done == progress.total, **run_facts}, index)
    return json.loads((out / "metadata.json").read_text())
