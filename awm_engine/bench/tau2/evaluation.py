"""Scoring one simulation exactly as τ²-bench does (spec §4).

A simulation is its termination reason and its messages in τ²'s shape: ``{"role": "assistant"|"user", "content",
"tool_calls": [{"id", "name", "arguments", "requestor"}]}`` and ``{"role": "tool", "id", "content", "requestor",
"error"}`` (a multi-tool message — ``"tool_messages": [...]`` — is flattened).

1. Gate: a reason other than ``agent_stop``/``user_stop`` scores 0 and nothing else runs; a task without criteria
   scores 1.
2. Environment: the *predicted* environment is a fresh one with the task's initial state on which the run's
   mutating tool calls are executed again, in order (each paired with the tool message after it; read, generic
   and unknown tools skipped), then synced; the *gold* environment is a fresh one on which every gold action is
   executed (errors ignored, no sync). DB = the canonical-JSON SHA-256 of the agent database and of the user
   database are equal in both; ENV_ASSERTION = every assertion holds on the predicted environment. With neither
   actions nor assertions (both null) the component is 1.
3. COMMUNICATE: each string, lowercased, occurs in some assistant text (lowercased, commas removed).
4. NL_ASSERTION: graded by the judge (``nl_judge``) only when in the basis; without a judge the simulation has
   no verdict (``reward`` None) rather than a guessed one.
5. ACTION: each gold action is matched by some tool call of the run (``Action.matches``); computed always, it
   counts only when in the basis.
6. reward = the product of the components in the basis.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from awm_engine.bench.tau2.environment import Tau2Env, build_env
from awm_engine.bench.tau2.tasks import RewardType, Task

STOP_REASONS = ("agent_stop", "user_stop")
TERMINATION_REASONS = ("user_stop", "agent_stop", "max_steps", "too_many_errors", "timeout", "agent_error",
                       "user_error", "infrastructure_error")

NLJudge = Callable[[list[dict[str, Any]], list[str]], Awaitable[list[dict[str, Any]]]]


class TrajectoryError(ValueError):
    """The messages cannot be replayed (a tool call without its tool message, ids that do not match)."""


def flatten_messages(messages: Any) -> list[dict[str, Any]]:
    """The messages as a flat list of dicts (multi-tool messages expanded; anything that is not a dict dropped)."""
    out: list[dict[str, Any]] = []
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict):
            continue
        if isinstance(m.get("tool_messages"), list):
            out.extend(t for t in m["tool_messages"] if isinstance(t, dict))
        else:
            out.append(m)
    return out


def tool_calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def call_pairs(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each tool call with the tool message that answers it (τ²'s pairing: they must follow in order)."""
    pairs = []
    queue = list(messages)
    i = 0
    while i < len(queue):
        message = queue[i]
        i += 1
        role = message.get("role")
        if role == "tool":
            raise TrajectoryError("a tool message that follows no tool call")
        if role in ("assistant", "user") and message.get("tool_calls") is not None:
            for call in tool_calls_of(message):
                if i >= len(queue):
                    raise TrajectoryError("a tool call has no tool message")
                answer = queue[i]
                i += 1
                if answer.get("role") != "tool":
                    raise TrajectoryError(f"a tool message was expected after a tool call, got {answer.get('role')!r}")
                if call.get("id", "") != answer.get("id", ""):
                    raise TrajectoryError(f"tool call id mismatch: {call.get('id')!r} and {answer.get('id')!r}")
                pairs.append((call, answer))
    return pairs


def _requestor(call: dict[str, Any], message_role: str | None = None) -> str:
    value = call.get("requestor")
    return value if value in ("user", "assistant") else (message_role if message_role == "user" else "assistant")


def predicted_environment(domain_data, task: Task, messages: list[dict[str, Any]],
                          env: Tau2Env | None = None) -> tuple[Tau2Env, list[dict[str, Any]]]:
    """The task's initial state plus the run's mutating calls, replayed; with the replays whose output differs
    from the recorded one (τ²'s non-strict re-grading: reported, not fatal)."""
    env = env or build_env(domain_data, task)
    mismatches = []
    for call, answer in call_pairs(messages):
        name = call.get("name")
        if not isinstance(name, str) or not env.has_tool(name) or not env.is_mutating_tool(name):
            continue
        response = env.get_response(name, call.get("arguments") if call.get("arguments") is not None else {},
                                    _requestor(call))
        if _content(response.content) != _content(answer.get("content")):
            mismatches.append({"tool": name, "arguments": call.get("arguments"), "replayed": response.content,
                               "recorded": answer.get("content")})
    env.sync_tools()
    return env, mismatches


def _content(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def gold_environment(domain_data, task: Task) -> tuple[Tau2Env, list[dict[str, Any]]]:
    """The task's initial state plus every gold action (errors ignored and returned, no sync in between)."""
    env = build_env(domain_data, task)
    errors = []
    for action in (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []:
        try:
            env.make_tool_call(action.name, action.requestor, **action.arguments)
        except Exception as exc:  # noqa: BLE001 - τ² logs and ignores them
            errors.append({"action_id": action.action_id, "name": action.name, "error": f"{exc}"})
    return env, errors


def gold_messages(domain_data, task: Task, actions: list | None = None) -> list[dict[str, Any]]:
    """A conversation in τ²'s shape whose tool calls are ``actions`` (the task's gold actions by default), each made
    by its requestor on a live environment of the task for its tool message, after the agent's greeting and ended
    by the user's stop token: what a perfect run looks like (``awm env doctor``, tests). Raises what the task's
    initial state raises when it cannot be built."""
    from awm_engine.bench.tau2.prompts import GREETING, STOP

    env = build_env(domain_data, task)
    if actions is None:
        actions = (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": GREETING}]
    for i, action in enumerate(actions):
        call = {"id": f"call_{i}", "name": action.name, "arguments": action.arguments, "requestor": action.requestor}
        messages.append({"role": action.requestor, "content": None, "tool_calls": [call]})
        response = env.get_response(action.name, action.arguments, action.requestor)
        messages.append({"role": "tool", "id": f"call_{i}", "content": response.content,
                         "requestor": action.requestor, "error": response.error})
    messages.append({"role": "user", "content": f"Thanks, that's all. {STOP}"})
    return messages


@dataclass
class RewardInfo:
    """What one simulation scored, component by component (τ²'s ``reward_info`` shape, plus awm's notes)."""

    reward: float | None
    reward_basis: list[str]
    reward_breakdown: dict[str, float] = field(default_factory=dict)
    db_check: dict[str, Any] | None = None
    env_assertions: list[dict[str, Any]] | None = None
    action_checks: list[dict[str, Any]] | None = None
    communicate_checks: list[dict[str, Any]] | None = None
    nl_assertions: list[dict[str, Any]] | None = None
    not_scored: list[str] = field(default_factory=list)  # components in the basis that could not be evaluated
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def has_verdict(self) -> bool:
        return self.reward is not None

    def to_dict(self) -> dict[str, Any]:
        return {"reward": self.reward, "reward_basis": self.reward_basis, "reward_breakdown": self.reward_breakdown,
                "db_check": self.db_check, "env_assertions": self.env_assertions,
                "action_checks": self.action_checks, "communicate_checks": self.communicate_checks,
                "nl_assertions": self.nl_assertions, "not_scored": self.not_scored, "info": self.info}


def communicate_checks(messages: list[dict[str, Any]], infos: list[str]) -> list[dict[str, Any]]:
    texts = [m["content"] for m in messages
             if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()]
    checks = []
    for info in infos:
        met = isinstance(info, str) and any(info.lower() in text.lower().replace(",", "") for text in texts)
        checks.append({"info": info, "met": met,
                       "justification": "found in an agent message" if met else "not found in any agent message"})
    return checks


def action_checks(messages: list[dict[str, Any]], task: Task) -> list[dict[str, Any]]:
    calls = [c for m in messages if m.get("role") in ("assistant", "user") for c in tool_calls_of(m)]
    checks = []
    for action in (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []:
        match = any(isinstance(c.get("name"), str) and isinstance(c.get("arguments"), dict)
                    and action.matches(c["name"], c["arguments"]) for c in calls)
        checks.append({"action": action.model_dump(), "action_match": match, "action_reward": 1.0 if match else 0.0})
    return checks


def gold_state(domain_data, task: Task) -> tuple[str | None, str | None, list[dict[str, Any]]]:
    """The gold environment's database hashes and the gold actions that failed; computed once per task and
    domain data (the gold end state is deterministic)."""
    key = (task.id, hashlib.sha256(task.model_dump_json().encode()).hexdigest())
    cache = getattr(domain_data, "_cache", {}).setdefault("gold", {})
    if key not in cache:
        gold, errors = gold_environment(domain_data, task)
        cache[key] = (gold.db_hash(), gold.user_db_hash(), errors)
    return cache[key]


def evaluate_environment(domain_data, task: Task, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The environment component's parts: the DB check and the assertions (sync; in-process)."""
    criteria = task.evaluation_criteria
    predicted, mismatches = predicted_environment(domain_data, task, messages)
    gold_db, gold_user_db, gold_errors = gold_state(domain_data, task)
    predicted_db, predicted_user_db = predicted.db_hash(), predicted.user_db_hash()
    db_match = predicted_db == gold_db and predicted_user_db == gold_user_db
    assertions = []
    for assertion in criteria.env_assertions or []:
        entry: dict[str, Any] = {"env_assertion": assertion.model_dump()}
        try:
            met = predicted.run_env_assertion(assertion)
        except Exception as exc:  # noqa: BLE001 - a failing assertion function counts as not met
            met = False
            entry["error"] = f"{type(exc).__name__}: {exc}"
        entry.update(met=met, reward=1.0 if met else 0.0)
        assertions.append(entry)
    return {"db_check": {"db_match": db_match, "db_reward": 1.0 if db_match else 0.0,
                         "predicted_db_hash": predicted_db, "gold_db_hash": gold_db,
                         "predicted_user_db_hash": predicted_user_db, "gold_user_db_hash": gold_user_db},
            "env_assertions": assertions, "replay_mismatches": mismatches, "gold_action_errors": gold_errors,
            "predicted": predicted}


async def evaluate_simulation(domain_data, task: Task, messages: Any, termination_reason: str | None,
                              nl_judge: NLJudge | None = None) -> RewardInfo:
    """Score one simulation (see the module docstring). ``TrajectoryError`` when its messages cannot be paired."""
    messages = flatten_messages(messages)
    criteria = task.evaluation_criteria
    basis = task.basis
    reason = termination_reason.lower() if isinstance(termination_reason, str) else termination_reason
    if reason not in STOP_REASONS:
        return RewardInfo(0.0, basis, info={"note": f"the simulation ended with {termination_reason!r}, not a stop: "
                                            "reward 0 and nothing else evaluated"})
    if criteria is None:
        return RewardInfo(1.0, basis, info={"note": "the task has no evaluation criteria"})
    result = RewardInfo(None, basis)
    breakdown: dict[str, float] = {}
    env_reward = 1.0
    if RewardType.DB.value in basis or RewardType.ENV_ASSERTION.value in basis:
        if criteria.actions is None and criteria.env_assertions is None:
            result.info["note"] = "no actions and no assertions: the environment component is 1"
            if RewardType.DB.value in basis:
                breakdown["DB"] = 1.0
            if RewardType.ENV_ASSERTION.value in basis:
                breakdown["ENV_ASSERTION"] = 1.0
        else:
            env = await asyncio.to_thread(evaluate_environment, domain_data, task, messages)
            result.db_check, result.env_assertions = env["db_check"], env["env_assertions"]
            result.info.update(replay_mismatches=env["replay_mismatches"], gold_action_errors=env["gold_action_errors"])
            if RewardType.DB.value in basis:
                breakdown["DB"] = env["db_check"]["db_reward"]
                env_reward *= breakdown["DB"]
            if RewardType.ENV_ASSERTION.value in basis:
                breakdown["ENV_ASSERTION"] = 1.0 if all(a["met"] for a in env["env_assertions"]) else 0.0
                env_reward *= breakdown["ENV_ASSERTION"]
    result.action_checks = action_checks(messages, task)
    if RewardType.ACTION.value in basis:
        breakdown["ACTION"] = 1.0 if all(c["action_match"] for c in result.action_checks) else 0.0
    result.communicate_checks = communicate_checks(messages, criteria.communicate_info or [])
    if RewardType.COMMUNICATE.value in basis:
        breakdown["COMMUNICATE"] = 1.0 if all(c["met"] for c in result.communicate_checks) else 0.0
    if RewardType.NL_ASSERTION.value in basis:
        if not criteria.nl_assertions:
            breakdown["NL_ASSERTION"] = 1.0
        elif nl_judge is None:
            result.not_scored.append("NL_ASSERTION")
            result.info["nl_assertions"] = "not scored: no judge configured"
        else:
            try:
                results = await nl_judge(messages, criteria.nl_assertions)
            except Exception as exc:  # noqa: BLE001 - the judge failed: no verdict for this component
                result.not_scored.append("NL_ASSERTION")
                result.info["nl_assertions"] = f"not scored: the judge failed: {exc}"
            else:
                result.nl_assertions = results
                breakdown["NL_ASSERTION"] = 1.0 if all(r.get("met") for r in results) else 0.0
    elif criteria.nl_assertions:
        result.info["nl_assertions"] = "not scored: NL_ASSERTION is not in the reward basis"
    result.reward_breakdown = breakdown
    if result.not_scored:
        result.reward = None
        return result
    reward = 1.0
    for value in breakdown.values():
        reward *= value
    result.reward = reward
    return result
