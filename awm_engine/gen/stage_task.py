"""Stage ``task``: N one-sentence, API-solvable requests per scenario (fewer is retried, more is cut)."""
from __future__ import annotations

from typing import Any

from awm_engine.gen import prompts
from awm_engine.gen.attempts import Attempt, GenContext, Outcome, conversation, run_attempts
from awm_engine.gen.parse import BadReply, parse_object

TASK_LIMIT = 2000  # a task goes into every later prompt: a runaway one would cost every stage


async def generate_tasks(ctx: GenContext, scenario: dict[str, Any]) -> tuple[Outcome, dict[str, Any] | None]:
    name, description = str(scenario["name"]), str(scenario.get("description") or "")
    count = ctx.config.num_tasks

    messages = conversation(prompts.TASK_SYSTEM, "task", name, prompts.task_user(name, description, count))

    async def evaluate(reply) -> Attempt:
        tasks = parse_object(reply.text, reply.finish_reason, "tasks")["tasks"]
        if not isinstance(tasks, list):
            raise BadReply(f"'tasks' is a {type(tasks).__name__}, not a list of strings")
        usable = [t.strip() for t in tasks if isinstance(t, str) and 0 < len(t.strip()) <= TASK_LIMIT]
        errors = []
        if len(usable) < len(tasks):
            errors.append(f"{len(tasks) - len(usable)} of the tasks are not non-empty strings of at most "
                          f"{TASK_LIMIT} characters (one sentence each)")
        if len(usable) < count:
            errors.append(f"only {len(usable)} usable tasks; exactly {count} are needed")
            return Attempt(usable or None, errors, float(count - len(usable)))
        return Attempt(usable[:count], errors, 0.0, True)

    outcome = await run_attempts(ctx, "task", name, messages, evaluate, max_tokens=32000)
    if outcome.best is None:
        return outcome, None
    return outcome, {"scenario": name, "tasks": outcome.best.value}
