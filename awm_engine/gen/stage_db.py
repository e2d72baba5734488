"""Stage ``db``: a SQLite schema per scenario, built in the sandbox; an error ratio above the threshold
(failed tables / tables, spec §3.1, §3.3) is retried with the errors summarized."""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from awm_engine.gen import prompts
from awm_engine.gen.attempts import Attempt, GenContext, Outcome, conversation, run_attempts
from awm_engine.gen.checks import build_schema, scratch_dir
from awm_engine.gen.parse import BadReply, parse_object


def shape_errors(tables: Any) -> list[str]:
    """What is wrong with the shape of ``tables`` before any SQL runs (the build would count these as failed)."""
    if not isinstance(tables, list) or not tables:
        return ["'tables' must be a non-empty list of {name, ddl, indexes}"]
    errors = []
    for i, table in enumerate(tables):
        if not isinstance(table, dict):
            errors.append(f"table #{i + 1} is a {type(table).__name__}, not an object")
            continue
        name = table.get("name", f"#{i + 1}")
        if not isinstance(table.get("ddl"), str) or "create table" not in table["ddl"].lower():
            errors.append(f"table {name}: 'ddl' must be one CREATE TABLE statement")
        indexes = table.get("indexes", [])
        if not isinstance(indexes, list) or not all(isinstance(s, str) for s in indexes):
            errors.append(f"table {name}: 'indexes' must be a list of CREATE INDEX strings, got "
                          f"{type(indexes).__name__}")
    return errors


async def generate_schema(ctx: GenContext, scenario: dict[str, Any], tasks: list[str]
                          ) -> tuple[Outcome, dict[str, Any] | None]:
    name, description = str(scenario["name"]), str(scenario.get("description") or "")
    scratch = scratch_dir(ctx.store.meta / "scratch", "db")

    messages = conversation(prompts.DB_SYSTEM, "db", name, prompts.db_user(name, description, tasks))

    async def evaluate(reply) -> Attempt:
        schema = parse_object(reply.text, reply.finish_reason, "tables")
        shape = shape_errors(schema["tables"])
        if shape and not isinstance(schema["tables"], list):
            raise BadReply(shape[0])
        report = await asyncio.to_thread(build_schema, name, schema, Path(scratch) / "schema.db")
        errors = shape + [f.message for f in report.failures] + ([report.fatal] if report.fatal else [])
        ratio = 1.0 if report.fatal else report.schema_error_ratio
        ok = ratio <= ctx.config.error_threshold and not report.fatal
        return Attempt(schema, errors, ratio, ok, {"tables_ok": report.tables_ok,
                                                   "tables_failed": report.tables_failed})

    try:
        outcome = await run_attempts(ctx, "db", name, messages, evaluate, max_tokens=128000)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if outcome.best is None:
        return outcome, None
    return outcome, {"scenario": name, "db_schema": outcome.best.value, "db_path": ctx.store.db_path_field(name)}
