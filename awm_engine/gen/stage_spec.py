"""Stage ``spec``: the API specification (spec §2.6), checked for shape: at least one group and endpoint, valid
methods and paths, unique snake_case operation ids, tables that exist in the schema."""
from __future__ import annotations

import re
from typing import Any

from awm_engine.gen import prompts
from awm_engine.gen.attempts import Attempt, GenContext, Outcome, conversation, run_attempts
from awm_engine.gen.parse import parse_object

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def spec_errors(spec: dict[str, Any], table_names: set[str]) -> list[str]:
    groups = spec.get("api_groups")
    if not isinstance(groups, list) or not groups:
        return ["'api_groups' must be a non-empty list"]
    errors: list[str] = []
    seen: set[str] = set()
    endpoints = 0
    for g, group in enumerate(groups):
        if not isinstance(group, dict) or not isinstance(group.get("endpoints"), list):
            errors.append(f"group #{g + 1} needs 'group_name' and an 'endpoints' list")
            continue
        for endpoint in group["endpoints"]:
            endpoints += 1
            if not isinstance(endpoint, dict):
                errors.append(f"group {group.get('group_name')}: an endpoint is a {type(endpoint).__name__}")
                continue
            op = endpoint.get("operation_id")
            where = f"endpoint {op or endpoint.get('path')}"
            if not isinstance(op, str) or not SNAKE.match(op):
                errors.append(f"{where}: operation_id must be snake_case, got {op!r}")
            elif op in seen:
                errors.append(f"{where}: operation_id {op} is used twice")
            else:
                seen.add(op)
            if str(endpoint.get("method", "")).upper() not in METHODS:
                errors.append(f"{where}: method must be one of {sorted(METHODS)}, got {endpoint.get('method')!r}")
            if not isinstance(endpoint.get("path"), str) or not endpoint["path"].startswith("/"):
                errors.append(f"{where}: path must start with '/', got {endpoint.get('path')!r}")
            params = endpoint.get("request_params", {})
            if params is not None and not isinstance(params, dict):
                errors.append(f"{where}: request_params must be an object of name -> description")
            required = endpoint.get("required_tables") or []
            if isinstance(required, list) and table_names:
                missing = [t for t in required if isinstance(t, str) and t not in table_names]
                if missing:
                    errors.append(f"{where}: required_tables {missing} are not tables of the schema "
                                  f"({', '.join(sorted(table_names))})")
    if not endpoints:
        errors.append("the specification has no endpoints")
    return errors


async def generate_spec(ctx: GenContext, scenario: dict[str, Any], tasks: list[str], db_schema: dict[str, Any]
                        ) -> tuple[Outcome, dict[str, Any] | None]:
    name = str(scenario["name"])
    tables = db_schema.get("tables") if isinstance(db_schema.get("tables"), list) else []
    table_names = {str(t.get("name")) for t in tables if isinstance(t, dict)}

    messages = conversation(prompts.SPEC_SYSTEM, "spec", name, prompts.spec_user(name, tables, tasks))

    async def evaluate(reply) -> Attempt:
        spec = parse_object(reply.text, reply.finish_reason, "api_groups")
        errors = spec_errors(spec, table_names)
        return Attempt({"api_groups": spec["api_groups"]}, errors, float(len(errors)), not errors)

    outcome = await run_attempts(ctx, "spec", name, messages, evaluate, max_tokens=128000)
    if outcome.best is None:
        return outcome, None
    return outcome, {"scenario": name, "api_spec": outcome.best.value}


def operation_ids(spec: dict[str, Any]) -> list[str]:
    found = []
    for group in spec.get("api_groups") or []:
        if isinstance(group, dict):
            for endpoint in group.get("endpoints") or []:
                if isinstance(endpoint, dict) and isinstance(endpoint.get("operation_id"), str):
                    found.append(endpoint["operation_id"])
    return found
