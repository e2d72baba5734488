"""Stage ``verifier``: one verifier per task and mode (spec §6.1), each run in the sandboxed verifier host on the
scenario's initial database as both states; code that does not run, returns the wrong shape, or (code mode) says
``complete`` where the task is not yet done is retried with the errors summarized."""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from awm_engine.data.names import normalize_scenario_name
from awm_engine.data.sql_guard import Deadline, open_untrusted
from awm_engine.data.records import verifier_function
from awm_engine.gen import prompts
from awm_engine.gen.attempts import Attempt, GenContext, Outcome, conversation, run_attempts
from awm_engine.gen.checks import run_verifier_on_initial
from awm_engine.gen.parse import BadReply, parse_object

FUNCTION = {"sql": "verify_task", "code": "verify_task_completion"}
DUMP_LIMIT = 40_000  # characters of the initial database shown to the model (the reference sends it whole)


def database_dump(path: Path, limit: int = DUMP_LIMIT, seconds: float = 30.0) -> str:
    """The SQL dump of ``path`` (read-only), cut to ``limit`` characters with a note. The database was built from
    generated SQL: only as much of it is read as is shown (a dump of a whole large database, or of a generated column
    that computes a huge value at every read, took gigabytes), for at most ``seconds``."""
    lines, size = [], 0
    try:
        conn = open_untrusted(path, deadline=Deadline(seconds))
        try:
            for line in conn.iterdump():
                lines.append(line)
                size += len(line) + 1
                if size > limit:
                    break
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"(the database could not be dumped: {exc})"
    text = "\n".join(lines)
    if len(text) > limit:
        text = text[:limit] + f"\n-- … cut: the dump has more than {limit} characters, the first {limit} are shown"
    return text


def modes_of(setting: str) -> list[str]:
    return ["sql", "code"] if setting == "both" else [setting]


async def generate_verifier(ctx: GenContext, scenario: str, task_idx: int, task: str, mode: str, dump: str,
                            db: Path) -> tuple[Outcome, dict[str, Any]]:
    key = normalize_scenario_name(scenario)
    wanted = FUNCTION[mode]
    last_text: list[str] = [""]

    messages = conversation(prompts.VERIFIER_SYSTEM[mode], f"verifier-{mode}", scenario,
                            prompts.verifier_user(mode, scenario, task, dump), task=task_idx)

    async def evaluate(reply) -> Attempt:
        last_text[0] = reply.text
        data = parse_object(reply.text, reply.finish_reason, "python_code")
        code = data["python_code"]
        if not isinstance(code, str) or len(code.strip()) < 10:
            raise BadReply("'python_code' must hold the function's source")
        if verifier_function(code) != wanted:
            return Attempt(None, [f"the code must define `def {wanted}(...)` as its first `def verify_` function "
                                  f"(found {verifier_function(code) or 'none'})"])
        outcome = await asyncio.to_thread(run_verifier_on_initial, key, task_idx, mode, code, db)
        value = {"code": code, "raw_response": reply.text}
        if outcome.label == "judge_error":
            return Attempt(value, [f"running {wanted} on the initial database failed ({outcome.error_kind}): "
                                   f"{outcome.error}"], 2.0)
        if mode == "code" and outcome.label == "complete":
            return Attempt(value, [f"{wanted} returns complete on the initial database, before anything was done: "
                                   "its checks do not depend on the agent's changes"], 1.0)
        return Attempt(value, [], 0.0, True)

    outcome = await run_attempts(ctx, f"verifier-{mode}", scenario, messages, evaluate, max_tokens=32000,
                                 task=task_idx)
    verification = outcome.best.value if outcome.best is not None else {"code": None, "raw_response": last_text[0]}
    # rows carry the normalized name, as the reference writes them (spec §2.8)
    return outcome, {"scenario": key, "task_idx": task_idx, "task": task, "verification": verification}
