"""Stage ``scenario``: new scenarios from seed examples, in batches, each kept only if the diversity filter
admits it; every kept scenario is handed on at once (``on_accept``) so its own stages start without waiting for
the rest."""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from awm_engine.gen import prompts
from awm_engine.gen.attempts import GenContext
from awm_engine.gen.diversity import DiversityFilter
from awm_engine.gen.parse import BadReply, parse_object
from awm_engine.gen.records import AttemptEvent, StageEvent

BATCH = 10
EXAMPLES = 8


class SeedError(ValueError):
    pass


NAME_LIMIT = 200
DESCRIPTION_LIMIT = 5000


def read_seeds(path: Path | str, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """Seeds: JSONL rows with ``name`` (and ``description``), or plain text with one name per line. A name that
    normalizes to nothing, or a row that is no object, is an error; a repeated name (same key) is left out, said
    in ``warnings``."""
    import json

    from awm_engine.data.names import normalize_scenario_name

    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark is not part of the first name
    except (OSError, UnicodeDecodeError) as exc:
        raise SeedError(f"cannot read seeds {path}: {exc}") from None
    seeds: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line[0] in "{[\"" or line in ("null", "true", "false") or line.lstrip("-").replace(".", "").isdigit():
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise SeedError(f"{path}:{number}: invalid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise SeedError(f"{path}:{number}: a seed row is a JSON object, not {type(row).__name__}")
            if not isinstance(row.get("name"), str) or not row["name"].strip():
                raise SeedError(f"{path}:{number}: a seed row needs a 'name' string")
            if row.get("description") is not None and not isinstance(row["description"], str):
                raise SeedError(f"{path}:{number}: 'description' must be a string")
            seed = {"name": row["name"].strip(), "description": (row.get("description") or "").strip()}
        else:
            seed = {"name": line, "description": ""}
        key = normalize_scenario_name(seed["name"])
        if not key:
            raise SeedError(f"{path}:{number}: the name {seed['name']!r} normalizes to an empty key (AWM keys keep "
                            "only a-z, 0-9 and _): add Latin letters or digits to it")
        if len(seed["name"]) > NAME_LIMIT or len(seed["description"]) > DESCRIPTION_LIMIT:
            raise SeedError(f"{path}:{number}: a name is at most {NAME_LIMIT} characters and a description at most "
                            f"{DESCRIPTION_LIMIT}")
        if key in seen:
            if warnings is not None:
                warnings.append(f"{path}:{number}: {seed['name']!r} has the same key ({key}) as line {seen[key]}: "
                                "left out")
            continue
        seen[key] = number
        seeds.append(seed)
    if not seeds:
        raise SeedError(f"{path} holds no seeds (JSONL rows with 'name', or one name per line)")
    return seeds


def candidates_of(value: Any) -> list[dict[str, Any]]:
    items = value.get("scenarios") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise BadReply("expected {\"scenarios\": [{\"name\", \"description\"}, …]}")
    found = [{"name": i["name"].strip(), "description": i["description"].strip()}
             for i in items if isinstance(i, dict) and isinstance(i.get("name"), str) and i["name"].strip()
             and isinstance(i.get("description"), str) and i["description"].strip()
             and len(i["name"].strip()) <= NAME_LIMIT and len(i["description"].strip()) <= DESCRIPTION_LIMIT]
    if not found:
        raise BadReply("no entry has both a non-empty 'name' and 'description'")
    return found


async def generate_scenarios(ctx: GenContext, seeds: list[dict[str, Any]], wanted: int, kept: list[dict[str, Any]],
                             on_accept: Callable[[dict[str, Any]], Awaitable[None] | None],
                             diversity: DiversityFilter, rng: random.Random | None = None) -> int:
    """Generate until ``wanted`` new scenarios are kept (``kept``: those of an earlier run, already counted).
    Gives up after ``retries + 1`` batches in a row that keep nothing; returns how many were kept now."""
    rng = rng or random.Random(0)
    for row in [*seeds, *kept]:
        await diversity.admit(row)
    made, stalled, batch = 0, 0, 0
    total_attempts = ctx.config.retries + 1
    while len(kept) + made < wanted and stalled < total_attempts:
        batch += 1
        count = min(BATCH, wanted - len(kept) - made)
        pool = [*seeds, *kept]
        examples = rng.sample(pool, min(EXAMPLES, len(pool)))
        taken = sorted(diversity.names)
        started = time.perf_counter()
        body = prompts.scenario_user(examples, count, taken)
        header = prompts.header("scenario", f"batch {batch}", stalled + 1, total_attempts)
        reply = await ctx.llm.chat([{"role": "system", "content": prompts.SCENARIO_SYSTEM},
                                    {"role": "user", "content": header + "\n" + body}],
                                   stage="scenario", scenario="*", max_tokens=16000)
        errors: list[str] = []
        accepted_now = 0
        if reply.error:
            errors.append(reply.error)
        else:
            try:
                for candidate in candidates_of(parse_object(reply.text, reply.finish_reason, "scenarios")):
                    if len(kept) + made >= wanted:
                        break
                    verdict, vector = await diversity.check(candidate)
                    if not verdict.keep:
                        errors.append(f"rejected {candidate['name']!r}: {verdict.reason}")
                        continue
                    diversity.add(candidate, vector)
                    ctx.store.append("scenario", candidate)
                    ctx.report(StageEvent(candidate["name"], "scenario", "done", batch, batch, None,
                                          time.time()).to_dict())
                    made += 1
                    accepted_now += 1
                    result = on_accept(candidate)
                    if result is not None:
                        await result
            except BadReply as exc:
                errors.append(f"Generation failed: invalid response format: {exc}")
        ctx.report(AttemptEvent("*", "scenario", batch, accepted_now > 0, errors[:50], None,
                                reply.usage.prompt_tokens, reply.usage.completion_tokens,
                                time.perf_counter() - started, None, time.time()).to_dict())
        stalled = 0 if accepted_now else stalled + 1
        if stalled and stalled % 3 == 0 and diversity.threshold < 0.95:
            diversity.threshold = min(0.95, diversity.threshold + 0.05)  # as the reference loosens after stalls
    return made
