"""Stage ``sample``: INSERT statements per scenario, run in the sandbox on the chosen schema with foreign keys
on; an error ratio above the threshold (failed / all statements, spec §3.2, §3.3) is retried. The database left
in ``databases/`` is the chosen attempt's (the reference leaves the last attempt's, spec §11.19)."""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from awm_engine.gen import prompts
from awm_engine.gen.attempts import Attempt, GenContext, Outcome, conversation, run_attempts
from awm_engine.gen.checks import build_sample, scratch_dir
from awm_engine.gen.parse import BadReply, parse_object


def statement_count(tables: list[Any]) -> int:
    return sum(len(t.get("insert_statements") or []) for t in tables
               if isinstance(t, dict) and isinstance(t.get("insert_statements"), list))


async def generate_sample(ctx: GenContext, scenario: dict[str, Any], tasks: list[str], db_schema: dict[str, Any]
                          ) -> tuple[Outcome, dict[str, Any] | None]:
    name = str(scenario["name"])
    tables_ddl = db_schema.get("tables") if isinstance(db_schema.get("tables"), list) else []
    scratch = scratch_dir(ctx.store.meta / "scratch", "sample")

    messages = conversation(prompts.SAMPLE_SYSTEM, "sample", name, prompts.sample_user(name, tables_ddl, tasks))

    async def evaluate(reply) -> Attempt:
        data = parse_object(reply.text, reply.finish_reason, "tables")
        tables = data["tables"]
        if not isinstance(tables, list) or not tables:
            raise BadReply("'tables' must be a non-empty list of {table_name, reasoning, insert_statements}")
        shape = []
        for i, table in enumerate(tables):
            if not isinstance(table, dict) or not isinstance(table.get("insert_statements"), list) \
                    or not isinstance(table.get("table_name"), str):
                shape.append(f"entry #{i + 1} needs 'table_name' (a string) and 'insert_statements' (a list of "
                             "strings)")
            elif not all(isinstance(s, str) for s in table["insert_statements"]):
                shape.append(f"table {table['table_name']}: every insert statement must be a string")
        if shape:  # the reference's build aborts on such input and keeps the schema only
            return Attempt({"tables": tables}, shape, 1.0)
        report = await asyncio.to_thread(build_sample, name, db_schema, {"tables": tables},
                                         Path(scratch) / "sample.db")
        errors = [f.message for f in report.failures if f.phase == "sample"] + \
            ([report.fatal] if report.fatal else [])
        ratio = 1.0 if report.fatal else report.sample_error_ratio
        return Attempt({"tables": tables}, errors, ratio, ratio <= ctx.config.error_threshold and not report.fatal,
                       {"inserts_ok": report.inserts_ok, "inserts_failed": report.inserts_failed})

    try:
        outcome = await run_attempts(ctx, "sample", name, messages, evaluate, max_tokens=128000)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if outcome.best is None:
        return outcome, None
    sample = outcome.best.value
    await asyncio.to_thread(build_sample, name, db_schema, sample, ctx.store.database(name))
    return outcome, {"scenario": name, "tables_count": len(sample["tables"]),
                     "inserts_count": statement_count(sample["tables"]), "sample_data": sample}
