"""Stage ``env``: the FastAPI + SQLAlchemy server (spec §4.1), loaded in a sandboxed pool worker on the
scenario's database with every tool called; a server that does not start, exposes no tools, leaves out
operations of the spec, or whose tools fail with a code defect is retried with the errors summarized."""
from __future__ import annotations

from typing import Any

from awm_engine.gen import prompts
from awm_engine.gen.attempts import Attempt, GenContext, Outcome, conversation, run_attempts
from awm_engine.gen.checks import check_environment
from awm_engine.gen.parse import parse_code
from awm_engine.gen.stage_spec import operation_ids


async def environment_pool(ctx: GenContext):
    async with ctx.pool_lock:
        if ctx.pool is None:
            from awm_engine.db.templates import TemplateCache
            from awm_engine.runtime.pool import EnvPool

            # the attempts' templates live with the run (removed at its end), not in the user's cache
            pool = EnvPool(workers=min(2, ctx.config.concurrency), workdir=ctx.store.meta / "pool",
                           templates=TemplateCache(ctx.store.meta / "templates"), load_timeout=60)
            await pool.start()
            ctx.pool = pool
    return ctx.pool


async def generate_env(ctx: GenContext, rows: dict[str, dict[str, Any]]) -> tuple[Outcome, dict[str, Any] | None]:
    """``rows``: the scenario's scenario/tasks/db/sample/spec rows."""
    name = str(rows["scenario"]["name"])
    tables = rows["db"]["db_schema"].get("tables") or []
    spec = rows["spec"]["api_spec"]
    wanted = operation_ids(spec)
    db_path = ctx.store.db_path_field(name)  # relative, as AWM-1K writes it (GenStore.db_path_field)

    messages = conversation(prompts.ENV_SYSTEM, "env", name, prompts.env_user(name, tables, spec))

    async def evaluate(reply) -> Attempt:
        code = parse_code(reply.text, reply.finish_reason)
        pool = await environment_pool(ctx)
        candidate = {"scenario": rows["scenario"], "tasks": rows["tasks"], "db": rows["db"],
                     "sample": rows["sample"], "envs": {"scenario": name, "db_path": db_path, "full_code": code}}
        check = await check_environment(pool, candidate, ctx.store.meta / "scratch")
        errors = list(check.errors)
        if check.loads:
            missing = [op for op in wanted if op not in check.tools]
            if missing:
                errors.append(f"operations of the API specification not implemented (no route with that "
                              f"operation_id): {', '.join(missing)}")
        score = 1000.0 if not check.loads else float(len(errors))
        return Attempt(code, errors, score, check.loads and not errors,
                       {"tools": len(check.tools), "calls": check.calls, "notes": check.notes[:20]})

    outcome = await run_attempts(ctx, "env", name, messages, evaluate, max_tokens=128000)
    if outcome.best is None:
        return outcome, None
    return outcome, {"scenario": name, "db_path": db_path, "full_code": outcome.best.value}
