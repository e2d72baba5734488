"""One agent rollout as a stream of typed step events, written to a run directory as it goes.

``Rollout.events()`` is the step API the CLI, the TUI, batch evaluation and training share: iterate
it to advance (a front end that stops pulling pauses the agent). The run directory receives
``events.jsonl`` (one event per line, appended and flushed live: what a viewer follows and what
survives a kill) and ``trajectory.json`` (the keys of spec/awm-format.md §5.7, written when the
rollout ends, however it ends), next to the episode's ``initial.db`` and ``final.db``.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from awm_engine.agent.policies import openai_tools
from awm_engine.agent.meta_protocol import (
    NATIVE_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    VLLM_EXTRA_BODY,
    FormatIssue,
    ParsedCall,
    ReferenceCrash,
    observation_text,
    parse_meta_turn,
    parse_reference_turn,
    reference_call_tool_arguments,
    reference_tool_target,
    render_tool_list,
    robust_json,
    strip_tool_prefixes,
    unknown_function_text,
    uses_vllm_extras,
)
from awm_engine.agent.policies import AssistantTurn, Policy, PolicyError

# the step events are defined with the run formats (events.jsonl); importing them from here keeps working
from awm_engine.data.error_text import error_title
from awm_engine.data.run_formats import (
    TRAJECTORY,
    FormatError,
    ModelTurn,
    Observation,
    RolloutFinished,
    RolloutStarted,
    StepEvent,
    ToolCall,
)
from awm_engine.runtime import caps
from awm_engine.runtime.episode import (
    CALL_REJECTED_KINDS,
    ON_TIMEOUT,
    EpisodeHandle,
    is_environment_error,
)

STOP_REASONS = ("final_answer", "max_turns", "format_error", "timeout", "environment_error", "llm_error",
                "abandoned")  # abandoned: the person playing left, or the episode was stopped (never verified)


PROTOCOLS = ("reference", "robust")
PROTOCOL_DEFAULT = -1.0  # "use the protocol's value" for limits where None already means "no limit"
REFERENCE_CALL_TIMEOUT = 60.0  # the reference agent's MCP call timeout (fastapi-mcp's 10 s has no effect there)


@dataclass
class AgentConfig:
    """How a rollout runs. ``protocol`` picks the defaults: ``reference`` behaves like the AWM reference agent
    wherever the model would see something different or the reward would change (30 turns, no episode
    limit, calls inside ``<think>`` executed, unparseable calls end the episode as a final answer, only the
    meta tools, 60 s tool calls, vLLM request shape for localhost endpoints); ``robust`` is awm's forgiving
    variant (20 turns, 900 s, format errors reported to the model, any tool-name form accepted)."""

    mode: str = "meta"  # meta (list_tools/call_tool in text) | native (OpenAI tool calls)
    protocol: str = "reference"  # reference | robust
    max_turns: int | None = None  # None: 30 (reference) / 20 (robust)
    history_window: int | None = None  # keep system, task, first list_tools exchange and the last w turns
    call_timeout: float | None = None  # per tool call; None: 60 s (reference) / the host's default, 10 s (robust)
    # a handler still running at its call's timeout: None: "finish" (reference: it goes on and its writes land
    # before the final database is taken) / "interrupt" (robust: stopped, so a timed-out call changes nothing more)
    on_timeout: str | None = None
    episode_timeout: float | None = PROTOCOL_DEFAULT  # None: no limit; default: none (reference) / 900 s (robust)
    on_format_error: str = "observe"  # observe: tell the model and go on | stop: end the rollout (reward -1)
    tool_name_style: str = "reference"  # how list_tools shows names: reference | prefixed | plain
    tool_message_role: str = "auto"  # meta mode: "user" ("Tool response:\n…"), "tool", or auto (by protocol)
    parse_think_calls: bool | None = None  # execute calls written inside <think> (None: yes for reference)
    system_prompt: str | None = None
    # bytes of one tool result the model sees, and of tool-result text the run stores (runtime/caps.py; None:
    # $AWM_RESULT_CAP / $AWM_TRAJECTORY_CAP, else 4 MiB / 8 MiB): recorded resolved, as in force
    result_cap: int | str | None = None
    trajectory_cap: int | str | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r} (choose from {', '.join(PROTOCOLS)})")
        self.result_cap = caps.result_cap(self.result_cap)
        self.trajectory_cap = caps.trajectory_cap(self.trajectory_cap)
        reference = self.protocol == "reference"
        if self.max_turns is None:
            self.max_turns = 30 if reference else 20
        if self.episode_timeout == PROTOCOL_DEFAULT:
            self.episode_timeout = None if reference else 900.0
        if self.call_timeout is None and reference:
            self.call_timeout = REFERENCE_CALL_TIMEOUT
        if self.on_timeout is None:
            self.on_timeout = "finish" if reference else "interrupt"
        if self.on_timeout not in ON_TIMEOUT:
            raise ValueError(f"unknown on_timeout {self.on_timeout!r} (choose from {', '.join(ON_TIMEOUT)})")
        if self.parse_think_calls is None:
            self.parse_think_calls = reference

    @property
    def system_prompt_text(self) -> str:
        """The system prompt: the configured one, else awm's for the mode (native: the tools are the request's
        functions, so the meta-tools and their call format are not described)."""
        return self.system_prompt or (NATIVE_SYSTEM_PROMPT if self.mode == "native" else SYSTEM_PROMPT)

    @property
    def system_prompt_sha256(self) -> str:
        return hashlib.sha256(self.system_prompt_text.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """Every setting (a custom system prompt in full; awm's own only by its hash)."""
        data = asdict(self)
        data["system_prompt_sha256"] = self.system_prompt_sha256
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "AgentConfig":
        fields = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        if data:
            fields.setdefault("protocol", "robust")  # runs recorded before protocols existed behaved robustly
        return cls(**fields)


# -- the history window and the request shape (shared with training: awm_engine.train.samples) ------

def window_groups(n_groups: int, first_list_group: int | None, window: int | None) -> list[int]:
    """Which of ``n_groups`` turns the model sees next under history window ``window`` (None: all): the last
    ``window`` turns, preceded by the first ``list_tools`` exchange when it has slid out of them."""
    if window is None or n_groups <= window:
        return list(range(n_groups))
    keep = list(range(n_groups - window, n_groups))
    if first_list_group is not None and first_list_group not in keep:
        keep.insert(0, first_list_group)
    return keep


def api_messages(messages: list[dict[str, Any]], mode: str, tool_role: str) -> list[dict[str, Any]]:
    """``messages`` (the internal form of trajectory.json) as the endpoint receives them: in meta mode with
    ``tool_role`` "user", a tool result is a ``Tool response:\n…`` user message."""
    out = []
    for m in messages:
        if m["role"] == "tool" and mode == "meta" and tool_role == "user":
            out.append({"role": "user", "content": "Tool response:\n" + m["content"]})
        else:
            out.append({k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id")})
    return out


# -- the runner --------------------------------------------------------------------------------

class Rollout:
    """Drive ``policy`` on one task in ``episode`` (any ``runtime.episode.EpisodeHandle``)."""

    def __init__(self, episode: EpisodeHandle, scenario: str, task_id: int | None, task: str, policy: Policy,
                 config: AgentConfig | None = None, meta: dict[str, Any] | None = None):
        self.episode = episode
        self.scenario = scenario
        self.task_id = task_id
        self.task = task
        self.policy = policy
        self.config = config or AgentConfig()
        self.meta = meta or {}
        self.run_dir = Path(episode.run_dir)
        self.tools = episode.list_tools()
        self.tool_names = {t["name"] for t in self.tools}
        self.tool_list_text = render_tool_list(self.tools, self.config.tool_name_style)
        system = self.config.system_prompt_text
        # the reference talks to local vLLM servers differently (spec §5.5): role "tool" results, extra fields
        base_url = getattr(getattr(policy, "endpoint", None), "base_url", None)
        self.reference_meta = self.config.protocol == "reference" and self.config.mode == "meta"
        self.vllm_shape = self.reference_meta and uses_vllm_extras(base_url)
        role = self.config.tool_message_role
        self.tool_role = ("tool" if self.vllm_shape else "user") if role == "auto" else role
        if hasattr(policy, "request_extras"):
            policy.request_extras = dict(VLLM_EXTRA_BODY) if self.vllm_shape else {}
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                               {"role": "user", "content": task}]
        self.groups: list[list[dict[str, Any]]] = []  # one list of messages per turn
        self.first_list_group: int | None = None
        self.trajectory: list[dict[str, Any]] = []
        self.finished: RolloutFinished | None = None
        self.iteration = 0
        self._counts = {"tool_calls": 0, "format_errors": 0, "env_errors": 0}
        self.first_env_error: str | None = None  # "tool: Type: message" of the first environment error
        self._usage: dict[str, int] = {}
        self._events_file = None
        self._stored = caps.StoredBudget(self.config.trajectory_cap)  # what the run's files keep of tool results
        self._stored_copies: dict[int, tuple[Any, str]] = {}  # id(object) -> (object, its stored text)
        self._results_cut = 0

    # -- what the run stores (the trajectory cap) ------------------------------------------------
    def stored_messages(self) -> list[dict[str, Any]]:
        """``messages`` as the run's files keep them: tool results past the trajectory cap cut (the model saw them
        whole)."""
        return [{**m, "content": self._stored_copies[id(m)][1]} if id(m) in self._stored_copies else m
                for m in self.messages]

    # -- messages the policy sees --------------------------------------------------------------
    def visible_messages(self) -> list[dict[str, Any]]:
        keep = window_groups(len(self.groups), self.first_list_group, self.config.history_window)
        return self.messages[:2] + [m for i in keep for m in self.groups[i]]

    def _api_messages(self) -> list[dict[str, Any]]:
        return api_messages(self.visible_messages(), self.config.mode, self.tool_role)

    # -- the loop ------------------------------------------------------------------------------
    async def events(self) -> AsyncIterator[StepEvent]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # a lone surrogate (a model's or a tool's "\ud800") becomes its JSON escape: the line reads back exactly
        self._events_file = open(self.run_dir / "events.jsonl", "a", encoding="utf-8", errors="backslashreplace")
        started = time.perf_counter()
        stop_reason, final_answer, error = "max_turns", "", None
        deadline = None if self.config.episode_timeout is None else started + self.config.episode_timeout
        try:
            yield self._emit(RolloutStarted(self.scenario, self.task_id, self.task, self.policy.name,
                                            self.config.mode, len(self.tools), str(self.run_dir)))
            while self.iteration < self.config.max_turns:
                self.iteration += 1
                try:
                    turn = await self._with_deadline(
                        self.policy.next_turn(self._api_messages(), self.tools, self.config.mode), deadline)
                except asyncio.TimeoutError:
                    stop_reason, error = "timeout", f"episode timeout ({self.config.episode_timeout}s)"
                    break
                except PolicyError as exc:
                    stop_reason, error = ("abandoned" if exc.kind == "abandoned" else "llm_error"), str(exc)
                    break
                self._add_usage(turn.usage)
                yield self._emit(ModelTurn(self.iteration, turn.content,
                                           [asdict(c) for c in turn.tool_calls], turn.usage, turn.latency_ms,
                                           turn.reasoning, turn.prompt_token_ids, turn.token_ids))
                outcome = None
                async for item in self._act(turn, deadline):
                    if isinstance(item, StepEvent):
                        yield self._emit(item)
                    else:
                        outcome = item
                if outcome is not None:
                    stop_reason, final_answer, error = outcome
                    break
        except (asyncio.CancelledError, GeneratorExit):
            # stopped from outside before it ended (x in a live rollout, the TUI quit mid-episode, Ctrl-C): recorded
            # as such, never as max_turns (a training export or a report would count it as out of turns)
            stop_reason, final_answer, error = "abandoned", "", "stopped before the episode ended"
            raise
        finally:
            if self.finished is None:
                self.finished = RolloutFinished(stop_reason, final_answer, self.iteration,
                                                self._counts["tool_calls"], self._counts["format_errors"],
                                                self._counts["env_errors"], time.perf_counter() - started, error,
                                                self._usage)
                try:  # a long history takes tens of ms to serialize: keep it off the event loop
                    await asyncio.to_thread(self._write_trajectory, self.finished)
                except asyncio.CancelledError:
                    self._write_trajectory(self.finished)
                    raise
                finally:
                    self._emit(self.finished)
                    self._events_file.close()
            else:
                self._events_file.close()
        yield self.finished

    async def run(self) -> RolloutFinished:
        async for _ in self.events():
            pass
        return self.finished

    @staticmethod
    async def _with_deadline(awaitable, deadline):
        if deadline is None:
            return await awaitable
        return await asyncio.wait_for(awaitable, max(0.001, deadline - time.perf_counter()))

    def _add_usage(self, usage: dict[str, Any] | None) -> None:
        for key, value in (usage or {}).items():
            if isinstance(value, int):
                self._usage[key] = self._usage.get(key, 0) + value

    def _emit(self, event: StepEvent) -> StepEvent:
        if self._events_file is not None and not self._events_file.closed:
            data = event.to_dict()
            if id(event) in self._stored_copies:  # an observation past the trajectory cap: its stored copy
                data["text"] = self._stored_copies[id(event)][1]
            self._events_file.write(json.dumps(data, ensure_ascii=False, default=str))
            self._events_file.write("\n")  # not appended to the line: a long one is not copied again
            self._events_file.flush()
        return event

    async def _act(self, turn: AssistantTurn, deadline):
        """Events for one assistant turn, then (stop_reason, final_answer, error) if the rollout ends."""
        # meta mode: the history keeps role and content only, as the reference agent's; tool calls the endpoint
        # returned natively are recorded in the trajectory (native_tool_calls), never sent back (an OpenAI API
        # rejects tool_calls without their tool results) nor shown to the judge
        assistant = turn.message() if self.config.mode == "native" else {"role": "assistant", "content": turn.content}
        if self.config.mode == "native":
            calls, issues = self._parse_native(turn)
        elif self.reference_meta:
            reference = parse_reference_turn(turn.content)
            first = reference.calls[0] if reference.calls else None  # the one call the reference executes
            if reference.crash is None and first is not None and first.name == "call_tool":
                try:
                    reference_call_tool_arguments(first.arguments)
                except ReferenceCrash as exc:
                    reference.crash = str(exc)
            if reference.crash is not None:  # the reference agent would crash: a format error ends the episode
                self._counts["format_errors"] += 1
                yield FormatError(self.iteration, "invalid_name", reference.crash)
                self.messages.append(assistant)
                self.groups.append([assistant])
                self.trajectory.append({"iteration": self.iteration, "role": "assistant", "content": turn.content,
                                        "tool_calls": [], "format_error": [{"kind": "invalid_name",
                                                                            "detail": reference.crash}]})
                yield ("format_error", "", reference.crash)
                return
            calls, issues = reference.calls, []
            for c in calls[:1]:  # the reference executes the first call only (the others are dropped below)
                if c.name == "call_tool":  # resolved as mcp-agent does: mcp_server_<op> goes to the server as <op>
                    name, c.tool_arguments = reference_call_tool_arguments(c.arguments)
                    target, c.rejection = reference_tool_target(name, self.tool_names)
                    c.tool = target or name
        else:
            parsed = parse_meta_turn(turn.content, self.tool_names, self.config.parse_think_calls)
            calls, issues = parsed.calls, parsed.issues
        if not calls and not issues:
            self.messages.append(assistant)
            self.groups.append([assistant])
            self.trajectory.append({"iteration": self.iteration, "role": "assistant", "content": turn.content,
                                    "tool_calls": [], "is_final": True,
                                    **({"native_tool_calls": [asdict(c) for c in turn.tool_calls]}
                                       if turn.tool_calls else {})})
            yield ("final_answer", turn.content, None)
            return
        for issue in issues:
            self._counts["format_errors"] += 1
            yield FormatError(self.iteration, issue.kind, issue.detail)
        group = [assistant]
        self.messages.append(assistant)
        entry: dict[str, Any] = {"iteration": self.iteration, "role": "assistant", "content": turn.content}
        if turn.tool_calls:
            entry["native_tool_calls"] = [asdict(c) for c in turn.tool_calls]
        stop = self.config.on_format_error == "stop"
        if issues and stop:
            entry["tool_calls"] = []
            entry["format_error"] = [asdict(i) for i in issues]
            self.trajectory.append(entry)
            self.groups.append(group)
            yield ("format_error", "", "; ".join(f"{i.kind}: {i.detail}" for i in issues))
            return
        call = calls[0] if calls else None
        if call is None:  # nothing executable: tell the model what was wrong
            text = "Error: " + " ".join(_issue_message(i, self.config.mode) for i in issues)
            call_id = f"call_{int(time.time() * 1000)}_0"
            entry["tool_calls"] = [{"id": call_id, "name": None, "arguments": None}]
            observation = Observation(self.iteration, call_id, None, text, True, "format_error")
        else:
            entry["tool_calls"] = [{"id": call.id, "name": call.name, "arguments": call.arguments}]
            if turn.tool_calls and call.name == "call_tool" and call.tool:  # native: the arguments are the tool's own
                entry["tool_calls"][0]["tool"] = call.tool  # and its name is nowhere else in the entry
            yield ToolCall(self.iteration, call.id, call.name, call.tool, call.tool_arguments
                           if call.name == "call_tool" else call.arguments)
            try:
                observation = await Rollout._with_deadline(self._execute(call), deadline)
            except asyncio.TimeoutError:
                yield ("timeout", "", f"episode timeout ({self.config.episode_timeout}s)")
                return
            kind = observation.error_kind
            if kind in CALL_REJECTED_KINDS:
                self._counts["format_errors"] += 1
                yield FormatError(self.iteration, {"unknown_tool": "tool_not_found",
                                                   "invalid_arguments": "invalid_args"}.get(kind, kind),
                                  observation.text)
                if stop:
                    entry["tool_response"] = {"tool_call_id": call.id, "content": observation.text}
                    self.trajectory.append(entry)
                    self.groups.append(group)
                    yield ("format_error", "", observation.text)
                    return
            elif is_environment_error(kind):
                self._counts["env_errors"] += 1
                if self.first_env_error is None:
                    self.first_env_error = f"{call.tool}: {error_title(observation.text, observation.traceback)}"
            if len(calls) > 1 and not self.reference_meta:  # the reference drops the others without a word
                observation.text += (f"\n\nNote: your reply contained {len(calls)} function calls; only the first "
                                     "was executed. Make one call per reply.")
        self._counts["tool_calls"] += 1
        stored, stored_cut = self._stored.store(observation.text)
        if stored_cut is not None:
            self._stored_copies[id(observation)] = (observation, stored)
        yield observation
        entry["tool_response"] = {"tool_call_id": observation.call_id, "content": stored}
        if observation.truncated:  # cut at the result cap: the model saw the marker, the record says how much
            entry["tool_response"].update(truncated=True, original_bytes=observation.original_bytes)
        if stored_cut is not None:
            entry["tool_response"]["stored_cut"] = stored_cut
        self.trajectory.append(entry)
        tool_messages = [{"role": "tool", "tool_call_id": observation.call_id, "content": observation.text}]
        if stored_cut is not None:
            self._stored_copies[id(tool_messages[0])] = (tool_messages[0], stored)
        for extra in (turn.tool_calls[1:] if self.config.mode == "native" else []):
            tool_messages.append({"role": "tool", "tool_call_id": extra.id, "content":
                                  "Error: only one tool call per turn is executed; this one was skipped."})
        self.messages.extend(tool_messages)
        group.extend(tool_messages)
        self.groups.append(group)
        if call is not None and call.name == "list_tools" and self.first_list_group is None:
            self.first_list_group = len(self.groups) - 1
        if observation.error_kind == "internal":
            yield ("environment_error", "", observation.text)

    def _parse_native(self, turn: AssistantTurn) -> tuple[list[ParsedCall], list[FormatIssue]]:
        calls, issues = [], []
        for c in turn.tool_calls:
            args = robust_json(c.arguments) if c.arguments else {}
            if not isinstance(args, dict):
                issues.append(FormatIssue("invalid_json", f"arguments of {c.name} are not a JSON object"))
                continue
            if not c.name:
                issues.append(FormatIssue("missing_name", "a tool call without a name"))
                continue
            calls.append(ParsedCall(c.id, "call_tool", args, strip_tool_prefixes(c.name), args))
        if len(calls) > 1:
            issues.append(FormatIssue("multiple_calls", f"{len(calls)} calls in one turn; only the first is executed"))
        return calls, issues

    async def _execute(self, call: ParsedCall) -> Observation:
        if call.name == "list_tools":
            return Observation(self.iteration, call.id, None, self.tool_list_text)
        if call.name != "call_tool":
            return Observation(self.iteration, call.id, None, unknown_function_text(call.name), True,
                               "unknown_function")
        if call.rejection is not None:
            return Observation(self.iteration, call.id, call.tool, call.rejection, True, "unknown_tool")
        if not self.reference_meta and call.tool not in self.tool_names:
            return Observation(self.iteration, call.id, call.tool, f"Error: Tool '{call.tool}' not found", True,
                               "unknown_tool")
        kwargs: dict[str, Any] = {} if self.config.call_timeout is None else {"timeout": self.config.call_timeout}
        if self.config.on_timeout != "interrupt":
            kwargs["on_timeout"] = self.config.on_timeout
        result = await self.episode.call_tool(call.tool, call.tool_arguments, **kwargs)
        if self.reference_meta and result.error_kind == "timeout":
            result.text = f"Tool call timed out after {float(self.config.call_timeout or 0):.1f}s"
        # the environment's side cut it already (at most 4 MiB); this run's cap may be lower, and any backend counts
        text, original = caps.cut_text(result.text, self.config.result_cap,
                                       getattr(result, "original_bytes", None) if getattr(result, "truncated", False)
                                       else None)
        observation = Observation(self.iteration, call.id, call.tool, observation_text(text, result.is_error),
                                  result.is_error, result.error_kind, result.status, result.elapsed_ms)
        observation.traceback = getattr(result, "traceback", None)  # for people (events.jsonl); never the model
        if original is not None:
            observation.truncated, observation.original_bytes = True, original
            self._results_cut += 1
        return observation

    # -- trajectory.json -----------------------------------------------------------------------
    def _write_trajectory(self, finished: RolloutFinished | None) -> None:
        data = {
            "format_version": TRAJECTORY.version,
            "scenario": self.scenario, "task_id": self.task_id, "task": self.task,
            "model": self.meta.get("model", self.policy.name), "api_url": self.meta.get("api_url", ""),
            "max_iterations": self.config.max_turns, "temperature": self.meta.get("temperature", 1.0),
            "total_iterations": self.iteration, "timestamp": self.meta.get("timestamp",
                                                                           time.strftime("%Y%m%d_%H%M%S")),
            "trajectory": self.trajectory, "messages": self.stored_messages(),
            "awm": {"policy": self.policy.name, "config": self.config.to_dict(), "tool_role": self.tool_role,
                    "caps": {"result_cap": self.config.result_cap, "trajectory_cap": self.config.trajectory_cap,
                             "results_cut": self._results_cut, "stored_bytes": self._stored.used,
                             "stored_cut": self._stored.cut},
                    "stop_reason": finished.stop_reason if finished else None,
                    "final_answer": finished.final_answer if finished else None,
                    "error": finished.error if finished else None, "usage": self._usage,
                    "counts": self._counts, "first_env_error": self.first_env_error,
                    # native mode: the tools every request carried, as the endpoint received them (training exports'
                    # tools column; the environment's data may have changed or moved by the time of an export)
                    "endpoint_tools": openai_tools(self.tools) if self.config.mode == "native" else None,
                    **{k: v for k, v in self.meta.items() if k not in ("model", "api_url")}},
        }
        # a write cancelled mid-way goes on in its thread while the cancelling side writes again: one file each
        tmp = self.run_dir / f"trajectory.json.{os.getpid()}.{threading.get_ident()}.tmp"
        # streamed: a long history is never one string in memory; a lone surrogate is written as its JSON escape
        with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as fh:
            json.dump(data, fh, indent=4, ensure_ascii=False, default=str)
        tmp.replace(self.run_dir / "trajectory.json")


NATIVE_ISSUES = {  # native mode has no <tool_call> and no call_tool: what went wrong, in its own terms
    "invalid_json": "the arguments of your function call are not a JSON object.",
    "missing_name": "your function call has no name.",
    "multiple_calls": "make one function call per reply.",
}


def _issue_message(issue: FormatIssue, mode: str = "meta") -> str:
    if mode == "native":
        return NATIVE_ISSUES.get(issue.kind, issue.detail)
    return {
        "invalid_json": "your <tool_call> is not valid JSON.",
        "missing_name": "your <tool_call> has no function name.",
        "unclosed_tool_call": "you opened <tool_call> but never closed it with </tool_call>.",
        "invalid_arguments": "call_tool needs {\"tool_name\": ..., \"arguments\": \"{...}\"}.",
        "multiple_calls": "make one function call per reply.",
    }.get(issue.kind, issue.detail)
