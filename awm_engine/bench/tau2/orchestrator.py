"""The τ² conversation (spec §5): agent ↔ simulated user ↔ environment, half-duplex.

- The agent's fixed greeting opens the trajectory and is delivered to the user.
- A delivered message is answered by its recipient: the user (its reply goes to the environment when it has tool
  calls, else to the agent), the agent (likewise, else to the user), the environment (every tool call in order;
  the results go back to whoever called). Text sent together with tool calls goes to the environment: the other
  party never sees it, the trajectory keeps it.
- Each delivery is one step (the greeting is not). After a step whose next recipient is not the environment:
  ``max_steps`` reached → ``max_steps``; errored tool messages (agent and user, a running total) reaching
  ``max_errors`` → ``too_many_errors``; past the wall-clock ``timeout`` → ``timeout``. A user message holding a
  stop token ends the run as ``user_stop`` (the message stays in the trajectory).
- The user simulator sees the conversation role-flipped: its own turns as ``assistant``, the agent's text as
  ``user``, its own tool results as tool messages; the agent's tool calls never reach it.
- A turn with neither text nor tool calls, tool-call arguments that are not a JSON object, or a model endpoint
  that fails after its retries end the simulation as ``infrastructure_error`` (τ² v1.x drops those from the
  metrics; awm records them as errors that ``--resume`` runs again).

Tools run in an ``EpisodeHandle`` (a pool episode of the domain); the user's own tools are called as
``user:<name>``. Every message is also written as awm step events (``events.jsonl``), so replays and the TUI
follow a τ² conversation like any rollout.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from awm_engine.agent.policies import AssistantTurn, PolicyError
from awm_engine.bench.tau2.episode import USER_TOOL_PREFIX
from awm_engine.bench.tau2.prompts import GREETING, is_stop
from awm_engine.data.run_formats import (
    ModelTurn,
    Observation,
    RolloutFinished,
    RolloutStarted,
    StepEvent,
    ToolCall,
)
from awm_engine.runtime.episode import EpisodeHandle

DEFAULT_MAX_STEPS = 200
DEFAULT_MAX_ERRORS = 10
INFRASTRUCTURE_ERROR = "infrastructure_error"


class InvalidMessage(Exception):
    """A participant produced a message τ² cannot use (empty, or tool-call arguments that are not an object)."""

    def __init__(self, message: str, role: str):
        super().__init__(message)
        self.role = role


@dataclass
class Limits:
    max_steps: int = DEFAULT_MAX_STEPS
    max_errors: int = DEFAULT_MAX_ERRORS
    timeout: float | None = None  # seconds of wall clock for the whole simulation


@dataclass
class Participant:
    """A side of the conversation: who writes its turns (any ``agent.policies`` policy: a model, a person, a
    script), its system prompt and its tools (MCP-style dicts)."""

    policy: Any
    system_prompt: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # chat messages as this side's model sees them
    usage: dict[str, int] = field(default_factory=dict)

    async def respond(self) -> AssistantTurn:
        # no tools at all (airline and retail users): no ``tools`` key in the request (OpenAI refuses an empty list)
        turn = await self.policy.next_turn([{"role": "system", "content": self.system_prompt}, *self.history],
                                           self.tools, "native" if self.tools else "meta")
        for key, value in (turn.usage or {}).items():
            if isinstance(value, int):
                self.usage[key] = self.usage.get(key, 0) + value
        return turn


@dataclass
class Simulation:
    """One finished conversation: τ²'s simulation fields."""

    task_id: str
    trial: int
    seed: int | None
    messages: list[dict[str, Any]]
    termination_reason: str
    step_count: int
    num_errors: int
    start_time: str
    end_time: str
    duration: float
    error: str | None = None
    error_kind: str | None = None
    usage: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """τ²'s ``SimulationRun`` shape (``reward_info`` is added by whoever scores it)."""
        return {"id": f"{self.task_id}/{self.trial}", "task_id": self.task_id, "trial": self.trial, "seed": self.seed,
                "start_time": self.start_time, "end_time": self.end_time, "duration": self.duration,
                "termination_reason": self.termination_reason, "messages": self.messages,
                "step_count": self.step_count, "num_errors": self.num_errors, "error": self.error,
                "usage": self.usage}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def parse_arguments(raw: Any, role: str, name: str) -> dict[str, Any]:
    """A tool call's arguments: a JSON object (an empty string is ``{}``, as servers send for no-argument
    calls); anything else is an invalid message."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"the {role}'s call of {name} has arguments that are not JSON: {exc}", role) from None
    if not isinstance(value, dict):
        raise InvalidMessage(f"the {role}'s call of {name} has arguments that are not an object", role)
    return value


class Orchestrator:
    """Runs one task: ``await Orchestrator(...).run()`` -> ``Simulation``."""

    def __init__(self, episode: EpisodeHandle, agent: Participant, user: Participant, task_id: str, trial: int = 0,
                 seed: int | None = None, limits: Limits | None = None,
                 on_event: Callable[[StepEvent], Any] | None = None, events_path=None, scenario: str = "",
                 task_text: str = ""):
        self.episode = episode
        self.agent = agent
        self.user = user
        self.task_id = task_id
        self.trial = trial
        self.seed = seed
        self.limits = limits or Limits()
        self.on_event = on_event
        self.events_path = events_path
        self.scenario = scenario
        self.task_text = task_text
        self.messages: list[dict[str, Any]] = []
        self.step_count = 0
        self.num_errors = 0
        self.tool_calls = 0
        self.iteration = 0
        self.termination_reason: str | None = None
        self._events = None

    # -- events ---------------------------------------------------------------------------------------------
    async def _emit(self, event: StepEvent) -> None:
        if self._events is not None and not self._events.closed:
            self._events.write(json.dumps(event.to_dict(), ensure_ascii=False, default=str) + "\n")
            self._events.flush()
        if self.on_event is not None:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result

    def _append(self, message: dict[str, Any]) -> dict[str, Any]:
        message = {**message, "turn_idx": len(self.messages), "timestamp": _now()}
        self.messages.append(message)
        return message

    # -- turns ----------------------------------------------------------------------------------------------
    async def _turn(self, who: Participant, role: str) -> dict[str, Any]:
        """The next message of ``who`` (τ² shape), also added to its own history."""
        turn = await who.respond()
        calls = []
        for call in turn.tool_calls:
            name = call.name
            arguments = parse_arguments(call.arguments, role, name)
            calls.append({"id": call.id or f"call_{uuid.uuid4().hex[:12]}", "name": name, "arguments": arguments,
                          "requestor": role})
        text = turn.content or ""
        if not text.strip() and not calls:
            raise InvalidMessage(f"the {role} sent a message with neither text nor tool calls", role)
        own = {"role": "assistant", "content": text or None}
        if calls:
            own["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                                 for c in calls]
        who.history.append(own)
        message = self._append({"role": role, "content": text or None, "tool_calls": calls or None,
                                "usage": turn.usage})
        self.iteration += 1
        label = "agent" if role == "assistant" else "user"
        await self._emit(ModelTurn(self.iteration, f"[{label}] {text}" if text else f"[{label}]",
                                   [{"id": c["id"], "name": c["name"], "arguments": json.dumps(c["arguments"])}
                                    for c in calls], turn.usage, turn.latency_ms, turn.reasoning))
        return message

    async def _execute(self, message: dict[str, Any], caller: Participant) -> None:
        """Every tool call of ``message``, in order; results to the caller's history and the trajectory."""
        role = message["role"]
        for i, call in enumerate(message["tool_calls"]):
            name = call["name"]
            if i:  # one replay step per call
                self.iteration += 1
                await self._emit(ModelTurn(self.iteration, ""))
            target = name if role == "assistant" else f"{USER_TOOL_PREFIX}{name}"
            await self._emit(ToolCall(self.iteration, call["id"], "call_tool", target, call["arguments"]))
            if role == "assistant" and isinstance(name, str) and name.startswith(USER_TOOL_PREFIX):
                text, is_error, kind, elapsed, trace = f"Error: Tool '{name}' not found.", True, "unknown_tool", 0.0, None
            else:
                result = await self.episode.call_tool(target, call["arguments"])
                if result.error_kind == "internal":  # the environment worker failed: not the model's doing
                    raise EnvironmentFailure(result.text)
                text, is_error, kind = result.text, result.is_error, result.error_kind
                elapsed, trace = result.elapsed_ms, result.traceback
            self.tool_calls += 1
            if is_error:
                self.num_errors += 1
            self._append({"role": "tool", "id": call["id"], "content": text, "requestor": role, "error": is_error})
            caller.history.append({"role": "tool", "tool_call_id": call["id"], "content": text})
            await self._emit(Observation(self.iteration, call["id"], target, text, is_error, kind, None, elapsed,
                                         trace))

    # -- the loop -------------------------------------------------------------------------------------------
    async def run(self) -> Simulation:
        started, start_time = time.perf_counter(), _now()
        error = error_kind = None
        if self.events_path is not None:
            self._events = open(self.events_path, "a", encoding="utf-8", errors="backslashreplace")
        try:
            await self._emit(RolloutStarted(self.scenario, self.task_id, self.task_text, "tau2", "native",
                                            len(self.agent.tools), str(getattr(self.episode, "run_dir", ""))))
            self._append({"role": "assistant", "content": GREETING, "tool_calls": None})
            self.agent.history.append({"role": "assistant", "content": GREETING})
            self.user.history.append({"role": "user", "content": GREETING})
            self.iteration += 1
            await self._emit(ModelTurn(self.iteration, f"[agent] {GREETING}"))
            try:
                await self._loop(started)
            except InvalidMessage as exc:
                self.termination_reason, error, error_kind = INFRASTRUCTURE_ERROR, str(exc), "agent_error"
            except PolicyError as exc:
                self.termination_reason, error, error_kind = INFRASTRUCTURE_ERROR, str(exc), exc.kind
            except EnvironmentFailure as exc:
                self.termination_reason, error, error_kind = INFRASTRUCTURE_ERROR, str(exc), "environment_error"
            except asyncio.TimeoutError:
                self.termination_reason = "timeout"
        finally:
            elapsed = time.perf_counter() - started
            usage = {"agent": dict(self.agent.usage), "user": dict(self.user.usage)}
            total = {k: usage["agent"].get(k, 0) + usage["user"].get(k, 0)
                     for k in set(usage["agent"]) | set(usage["user"])}
            if self.termination_reason is None:  # cancelled or failed in awm's own code
                self.termination_reason = INFRASTRUCTURE_ERROR
                error = error or "the simulation did not finish"
            await self._emit(RolloutFinished(self.termination_reason, "", self.step_count, self.tool_calls, 0,
                                             self.num_errors, elapsed, error, total))
            if self._events is not None:
                self._events.close()
        return Simulation(self.task_id, self.trial, self.seed, self.messages, self.termination_reason,
                          self.step_count, self.num_errors, start_time, _now(), elapsed, error, error_kind, usage)

    def _remaining(self, started: float) -> float | None:
        if self.limits.timeout is None:
            return None
        return max(0.001, self.limits.timeout - (time.perf_counter() - started))

    async def _loop(self, started: float) -> None:
        to_role, message, caller = "user", None, None
        while True:
            if to_role == "user":
                message = await asyncio.wait_for(self._turn(self.user, "user"), self._remaining(started))
                stopped = is_stop(message["content"])
                if message["tool_calls"]:
                    to_role, caller = "env", self.user
                else:
                    to_role = "agent"
                    self.agent.history.append({"role": "user", "content": message["content"]})
                if stopped:
                    self.termination_reason = "user_stop"
            elif to_role == "agent":
                message = await asyncio.wait_for(self._turn(self.agent, "assistant"), self._remaining(started))
                if message["tool_calls"]:
                    to_role, caller = "env", self.agent
                else:
                    to_role = "user"
                    self.user.history.append({"role": "user", "content": message["content"]})
            else:
                await asyncio.wait_for(self._execute(message, caller), self._remaining(started))
                to_role = "agent" if caller is self.agent else "user"
            self.step_count += 1
            if to_role != "env":
                if self.step_count >= self.limits.max_steps:
                    self.termination_reason = "max_steps"
                if self.num_errors >= self.limits.max_errors:
                    self.termination_reason = "too_many_errors"
                if self.limits.timeout is not None and time.perf_counter() - started >= self.limits.timeout:
                    self.termination_reason = "timeout"
            if self.termination_reason is not None:
                return


class EnvironmentFailure(Exception):
    """The environment's worker failed (not the model's doing)."""
