"""A generation run: scenarios stream through task → db → sample → spec → env → verifier, each on its own (no
barrier between stages), at most ``concurrency`` scenarios at a time; every finished stage is a row on disk, so
``resume`` redoes nothing that finished. Each scenario that reaches the end gets its Problems list (the
environment doctor) so the user sees at once which ones are clean."""
from __future__ import annotations

import asyncio
import os
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from awm_engine.data.names import normalize_scenario_name
from awm_engine.gen.attempts import GenContext, Outcome
from awm_engine.gen.diversity import DiversityFilter
from awm_engine.gen.llm import GenClient
from awm_engine.gen.records import SCENARIO_STAGES, GenConfig, StageEvent
from awm_engine.gen.stage_db import generate_schema
from awm_engine.gen.stage_env import generate_env
from awm_engine.gen.stage_sample import generate_sample
from awm_engine.gen.stage_scenario import generate_scenarios
from awm_engine.gen.stage_spec import generate_spec
from awm_engine.gen.stage_task import generate_tasks
from awm_engine.gen.stage_verifier import database_dump, generate_verifier, modes_of
from awm_engine.gen.store import STAGE_FILES, GenStore, GenStoreError

VERIFIER_FILE = {"sql": "verifier_sql", "code": "verifier_code"}


@dataclass
class GenSummary:
    out: str
    scenarios: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # every requested stage has a row
    failed: dict[str, str] = field(default_factory=dict)  # scenario -> the stage that failed, and why
    problems: dict[str, dict[str, Any]] = field(default_factory=dict)  # scenario -> doctor counts and summary
    new_scenarios: int = 0  # kept by this run
    wanted_new: int = 0  # asked for (-n)
    have_new: int = 0  # generated scenarios in the directory now (earlier runs included)
    scenario_errors: list[str] = field(default_factory=list)  # the last batch's rejections, when short


class StageFailed(Exception):
    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.stage = stage


def _finish(ctx: GenContext, name: str, stage: str, outcome: Outcome, row: dict[str, Any] | None, kind: str) -> None:
    if row is not None:
        ctx.store.append(kind, row)
    status = outcome.status if row is not None else "failed"
    ctx.report(StageEvent(name, stage, status, outcome.attempts, outcome.chosen, outcome.last_error,
                          time.time()).to_dict())
    if row is None:
        raise StageFailed(stage, outcome.last_error or "no usable attempt")


async def run_scenario(ctx: GenContext, scenario: dict[str, Any], stages: tuple[str, ...]) -> None:
    """The scenario's stages in order, skipping those that already have their row (resume)."""
    name = str(scenario["name"])
    store = ctx.store
    rows: dict[str, dict[str, Any]] = {"scenario": scenario}

    def have(stage: str, kind: str) -> dict[str, Any] | None:
        return store.row(kind, name)

    def need(kind: str, stage: str) -> dict[str, Any]:
        row = store.row(kind, name)
        if row is None:
            raise StageFailed(stage, f"needs the {kind} stage's output, which this scenario does not have")
        return row

    if "task" in stages and have("task", "task") is None:
        outcome, row = await generate_tasks(ctx, scenario)
        _finish(ctx, name, "task", outcome, row, "task")
    if "db" in stages and have("db", "db") is None:
        tasks = need("task", "db")["tasks"]
        outcome, row = await generate_schema(ctx, scenario, tasks)
        _finish(ctx, name, "db", outcome, row, "db")
    if "sample" in stages and have("sample", "sample") is None:
        tasks, schema = need("task", "sample")["tasks"], need("db", "sample")["db_schema"]
        outcome, row = await generate_sample(ctx, scenario, tasks, schema)
        _finish(ctx, name, "sample", outcome, row, "sample")
    if "spec" in stages and have("spec", "spec") is None:
        tasks, schema = need("task", "spec")["tasks"], need("db", "spec")["db_schema"]
        outcome, row = await generate_spec(ctx, scenario, tasks, schema)
        _finish(ctx, name, "spec", outcome, row, "spec")
    if "env" in stages and have("env", "env") is None:
        for kind in ("task", "db", "sample", "spec"):
            rows[{"task": "tasks"}.get(kind, kind)] = need(kind, "env")
        outcome, row = await generate_env(ctx, rows)
        _finish(ctx, name, "env", outcome, row, "env")
    if "verifier" in stages:
        await run_verifiers(ctx, scenario)


async def run_verifiers(ctx: GenContext, scenario: dict[str, Any]) -> None:
    name = str(scenario["name"])
    key = normalize_scenario_name(name)
    row = ctx.store.row("task", name)
    tasks = (row or {}).get("tasks")
    if row is None:
        raise StageFailed("verifier", "needs the task stage's output, which this scenario does not have")
    if not isinstance(tasks, list):
        raise StageFailed("verifier", f"its gen_tasks.jsonl row's 'tasks' is a {type(tasks).__name__}, not a list "
                                      "of task texts")
    db = ctx.store.database(name)
    if not db.is_file():
        sample, schema = ctx.store.row("sample", name), ctx.store.row("db", name)
        if sample is None or schema is None:
            raise StageFailed("verifier", "needs the db and sample stages' output (the initial database)")
        from awm_engine.gen.checks import build_sample

        await asyncio.to_thread(build_sample, name, schema["db_schema"], sample["sample_data"], db)
    dump = await asyncio.to_thread(database_dump, db)
    failures: list[str] = []
    for mode in modes_of(ctx.config.verifier_mode):
        kind = VERIFIER_FILE[mode]
        done = ctx.store.task_indices(kind, key)
        todo = [(i, t) for i, t in enumerate(tasks) if i not in done]

        async def one(index: int, text: str, mode: str = mode, kind: str = kind) -> None:
            outcome, row = await generate_verifier(ctx, name, index, str(text), mode, dump, db)
            ctx.store.append(kind, row)  # written even when no attempt passed, as the reference does
            ctx.report(StageEvent(name, f"verifier-{mode}", outcome.status, outcome.attempts, outcome.chosen,
                                  outcome.last_error, time.time()).to_dict() | {"task": index})
            if outcome.status != "done":
                failures.append(f"task {index} ({mode}): {outcome.last_error}")

        await asyncio.gather(*(one(i, t) for i, t in todo))
    ctx.report(StageEvent(name, "verifier", "done" if not failures else "kept", len(tasks), None,
                          "; ".join(failures)[:2000] or None, time.time()).to_dict())


async def problems_of(ctx: GenContext, name: str) -> dict[str, Any] | None:
    """The doctor's Problems list for a generated scenario (loaded from the output directory)."""
    from awm_engine.data.catalog import Catalog
    from awm_engine.gen.stage_env import environment_pool
    from awm_engine.verify.doctor import diagnose

    work = ctx.store.meta / "scratch" / f"doctor-{normalize_scenario_name(name)}"
    try:
        ctx.store.export_scenario(name, work)
        catalog = Catalog.load([work])
        try:
            scenario = catalog.get(name)
        except KeyError:
            return None
        pool = await environment_pool(ctx)
        diagnosis = await diagnose(scenario, pool, catalog)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = {"kind": "problems", "scenario": name, "counts": diagnosis.counts(), "summary": diagnosis.summary(),
              "problems": [p.to_dict() for p in diagnosis.problems][:100], "time": time.time()}
    ctx.report(record)
    return record


async def run_generation(out: Path | str, config: GenConfig, *, seeds: list[dict[str, Any]] | None = None,
                         new_scenarios: int = 0, include_seeds: bool = False,
                         stages: tuple[str, ...] = ("scenario", *SCENARIO_STAGES), resume: bool = False,
                         api_key: str | None = None, on_event: Callable[[dict], None] | None = None,
                         only: list[str] | None = None, doctor: bool = True, summarize: bool = True) -> GenSummary:
    from awm_engine.eval.batch import RunLocked, lock_run_dir

    store = GenStore(out)
    if "scenario" not in stages and not any(isinstance(r.get("name"), str) and r["name"].strip()
                                            for r in store.rows("scenario")):
        raise GenStoreError(f"no scenarios in {store.out} (no rows in {STAGE_FILES['scenario']}): run awm gen all or "
                            "awm gen scenario first")
    store.out.mkdir(parents=True, exist_ok=True)
    try:
        handle = lock_run_dir(store.out)  # before anything in the directory is touched
    except RunLocked:
        raise GenStoreError(f"{store.out} is being written by another awm process (a generation or evaluation "
                            "run); wait for it, or use another --out") from None
    try:
        config = store.prepare(config, resume)
    except BaseException:
        handle.close()
        raise
    llm = GenClient(config.base_url, config.model, api_key=api_key or "EMPTY", temperature=config.temperature,
                    max_requests=config.max_requests, waits=config.endpoint_waits)
    ctx = GenContext(config, llm, store, on_event, summarize)
    summary = GenSummary(str(store.out))
    limit = asyncio.Semaphore(max(1, config.concurrency))
    running: list[asyncio.Task] = []
    wanted_only = {normalize_scenario_name(s) for s in only or []}
    per_scenario = tuple(s for s in stages if s != "scenario")

    async def one(scenario: dict[str, Any]) -> None:
        name = str(scenario["name"])
        summary.scenarios.append(name)
        async with limit:
            try:
                await run_scenario(ctx, scenario, per_scenario)
                summary.finished.append(name)
            except StageFailed as exc:
                summary.failed[name] = str(exc)
            except Exception as exc:  # noqa: BLE001 - one scenario's crash never stops the others
                summary.failed[name] = f"internal error: {type(exc).__name__}: {exc}"
                ctx.report({"kind": "internal_error", "scenario": name, "error": str(exc),
                            "traceback": traceback.format_exc(), "time": time.time()})
            if doctor and "env" in per_scenario and store.row("env", name) is not None:
                try:
                    record = await problems_of(ctx, name)
                    if record is not None:
                        summary.problems[name] = record
                except Exception as exc:  # noqa: BLE001
                    ctx.report({"kind": "internal_error", "scenario": name, "error": f"doctor: {exc}",
                                "traceback": traceback.format_exc(), "time": time.time()})

    def start(scenario: dict[str, Any]) -> None:
        if wanted_only and normalize_scenario_name(str(scenario.get("name", ""))) not in wanted_only:
            return
        if per_scenario:
            running.append(asyncio.create_task(one(scenario)))

    try:
        existing = store.rows("scenario")
        keys = {normalize_scenario_name(str(r.get("name", ""))) for r in existing}
        if include_seeds and seeds:
            for seed in seeds:
                if normalize_scenario_name(seed["name"]) not in keys:
                    store.append("scenario", seed)
                    existing.append(seed)
                    keys.add(normalize_scenario_name(seed["name"]))
        if wanted_only and not ("scenario" in stages and new_scenarios > 0):
            unknown = wanted_only - {normalize_scenario_name(str(r.get("name", ""))) for r in existing}
            if unknown:
                raise GenStoreError(f"no scenario {', '.join(sorted(unknown))} in {store.out / STAGE_FILES['scenario']}"
                                    " (--scenario takes a name there, or its normalized key)")
        for row in existing:
            if isinstance(row.get("name"), str) and row["name"].strip():
                start(row)
        if "scenario" in stages and new_scenarios > 0:
            seed_keys = {normalize_scenario_name(s["name"]) for s in seeds or []}
            generated = [r for r in existing if normalize_scenario_name(str(r.get("name", ""))) not in seed_keys]
            diversity = await _diversity(config, llm, api_key)
            summary.new_scenarios = await generate_scenarios(ctx, seeds or existing, new_scenarios, generated, start,
                                                             diversity)
            summary.wanted_new, summary.have_new = new_scenarios, len(generated) + summary.new_scenarios
            if summary.have_new < new_scenarios:
                batches = [e for e in store.events() if e.get("kind") == "attempt" and e.get("stage") == "scenario"]
                summary.scenario_errors = [str(x) for x in (batches[-1].get("errors") or [])[-5:]] if batches else []
        await asyncio.gather(*running)
    finally:
        for task in running:
            task.cancel()
        if ctx.pool is not None:
            await ctx.pool.close()
        for scratch in ("pool", "scratch", "templates"):
            shutil.rmtree(store.meta / scratch, ignore_errors=True)
        await llm.close()
        handle.close()
    return summary


async def _diversity(config: GenConfig, llm: GenClient, api_key: str | None) -> DiversityFilter:
    if not config.embedding_model:
        return DiversityFilter(threshold=config.similarity)
    if config.embedding_base_url and config.embedding_base_url != config.base_url:
        key = os.environ.get("EMBEDDING_OPENAI_API_KEY") or api_key or "EMPTY"  # the reference's variable
        client = GenClient(config.embedding_base_url, config.model, api_key=key)

        async def embed(texts):
            return await client.embed(texts, config.embedding_model)
    else:
        async def embed(texts):
            return await llm.embed(texts, config.embedding_model)
    return DiversityFilter(embed, config.similarity)
