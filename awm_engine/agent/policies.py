"""Policies: who writes the assistant turns of a rollout.

Every policy answers ``next_turn(messages, tools)`` with an ``AssistantTurn``: text (meta mode) or
native tool calls (native mode). LLM talks to any OpenAI-compatible endpoint; human waits for turns
from a front end; replay repeats a saved trajectory; oracle plays a sample environment's reference
solution; immediate answers at once (a baseline that never acts).
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.meta_protocol import display_name
from awm_engine.data.terminal import visible


class PolicyError(Exception):
    """The policy could not produce a turn (endpoint down, retries exhausted, script over)."""

    def __init__(self, message: str, kind: str = "llm_error"):
        super().__init__(message)
        self.kind = kind


@dataclass
class NativeCall:
    id: str
    name: str
    arguments: str  # the raw JSON string, as the API returns it


@dataclass
class AssistantTurn:
    content: str
    tool_calls: list[NativeCall] = field(default_factory=list)
    usage: dict[str, int] | None = None
    latency_ms: float = 0.0
    reasoning: str | None = None
    prompt_token_ids: list[int] | None = None  # when the endpoint returns them (vLLM's return_token_ids)
    token_ids: list[int] | None = None

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                                             "arguments": c.arguments}}
                                 for c in self.tool_calls]
        return msg


class Policy(Protocol):
    name: str

    async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                        mode: str) -> AssistantTurn: ...


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t.get("inputSchema") or {"type": "object"}}}
            for t in tools]


class LLMPolicy:
    """Chat completions against an OpenAI-compatible endpoint (the ``openai`` client, with its retries)."""

    name = "llm"

    def __init__(self, endpoint: Endpoint):
        import httpx2
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        self.endpoint = endpoint
        self.request_extras: dict[str, Any] = {}  # set by the rollout (the reference's vLLM fields, spec §5.5)
        # a bounded connection pool: httpcore scans every pooled connection on each request, so hundreds
        # of idle keep-alive connections cost more CPU than queueing a request for a moment
        limits = httpx2.Limits(max_connections=endpoint.max_connections,
                               max_keepalive_connections=endpoint.max_connections)
        self.client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=endpoint.timeout,
                                  max_retries=endpoint.max_retries, http_client=DefaultAsyncHttpxClient(limits=limits))

    async def next_turn(self, messages, tools, mode) -> AssistantTurn:
        import openai
        from openai.types.chat import ChatCompletion

        body: dict[str, Any] = {"model": self.endpoint.model, "messages": messages,
                                "temperature": self.endpoint.temperature,
                                "max_completion_tokens": self.endpoint.max_tokens}
        if mode == "native":
            body["tools"] = openai_tools(tools)
        body.update(self.request_extras)
        body.update(self.endpoint.extra_body or {})
        started = time.perf_counter()
        try:
            # the client's own request path (auth, retries with backoff, typed errors, parsed response), without
            # the SDK's per-request type transform of the whole history, which costs ~10 ms a turn on long chats
            response = await self.client.post("/chat/completions", body=body, cast_to=ChatCompletion)
        except openai.APIError as exc:
            raise PolicyError(f"{type(exc).__name__}: {exc}") from None
        if not response.choices:
            raise PolicyError("the endpoint returned no choices")
        message = response.choices[0].message
        calls = [NativeCall(c.id, c.function.name, c.function.arguments or "") for c in (message.tool_calls or [])
                 if getattr(c, "function", None) is not None]
        usage = response.usage.model_dump() if response.usage else None
        reasoning = getattr(message, "reasoning_content", None)
        # vLLM returns the exact tokens when asked (``return_token_ids``): the prompt's on the response, the
        # turn's on the choice; kept for training (token-in/token-out), absent elsewhere
        prompt_ids = _token_ids((response.model_extra or {}).get("prompt_token_ids"))
        token_ids = _token_ids((response.choices[0].model_extra or {}).get("token_ids"))
        return AssistantTurn(message.content or "", calls, usage, (time.perf_counter() - started) * 1000, reasoning,
                             prompt_ids, token_ids)

    async def aclose(self) -> None:
        await self.client.close()


def _token_ids(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


class ScriptedTurns:
    """Base for policies that emit a fixed list of turns, then a final answer."""

    name = "scripted"

    def __init__(self, turns: list[AssistantTurn], final: str = ""):
        self.turns = list(turns)
        self.final = final
        self.index = 0

    async def next_turn(self, messages, tools, mode) -> AssistantTurn:
        if self.index < len(self.turns):
            turn = self.turns[self.index]
            self.index += 1
            return turn
        return AssistantTurn(self.final)


class ImmediatePolicy(ScriptedTurns):
    """Answers at once without touching the environment (a do-nothing baseline)."""

    name = "immediate"

    def __init__(self, answer: str = "I am unable to complete this task."):
        super().__init__([], answer)


def _meta_call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


class OraclePolicy(ScriptedTurns):
    """Plays a reference solution: list_tools, each call, then the final answer (as an LLM would write them)."""

    name = "oracle"

    def __init__(self, solution: dict[str, Any], mode: str = "meta", style: str = "reference"):
        turns: list[AssistantTurn] = []
        if mode == "native":
            for i, call in enumerate(solution["calls"]):
                turns.append(AssistantTurn("", [NativeCall(f"call_oracle_{i}", call["tool"],
                                                           json.dumps(call.get("arguments") or {}))]))
        else:
            turns.append(AssistantTurn(_meta_call("list_tools", {})))
            for call in solution["calls"]:
                turns.append(AssistantTurn(_meta_call("call_tool", {
                    "tool_name": display_name(call["tool"], style),
                    "arguments": json.dumps(call.get("arguments") or {}, ensure_ascii=False)})))
        super().__init__(turns, solution.get("final_answer") or "Done.")


class ReplayPolicy(ScriptedTurns):
    """Repeats the assistant turns of a saved trajectory (``trajectory.json``)."""

    name = "replay"

    def __init__(self, trajectory: dict[str, Any], scenario: str | None = None, task_id: int | None = None):
        turns = []
        for step, entry in enumerate(trajectory.get("trajectory", [])):
            native = entry.get("native_tool_calls") or []
            try:
                calls = [NativeCall(c["id"], c["name"], c["arguments"]) for c in native]
            except (TypeError, KeyError):
                raise PolicyError(f"not a trajectory: step {step}'s native_tool_calls are not calls "
                                  "(each has id, name and arguments)", "config") from None
            turns.append(AssistantTurn(entry.get("content") or "", calls))
        super().__init__(turns, "")
        # the mode it was recorded in: its calls are in that mode's form (native calls, or <tool_call> text)
        awm = trajectory.get("awm")
        config = awm.get("config") if isinstance(awm, dict) else None
        mode = config.get("mode") if isinstance(config, dict) else None
        self.mode: str | None = mode if mode in ("meta", "native") else None
        # a recording of another scenario or task replays all the same (on purpose, or by mistake: said)
        recorded = (trajectory.get("scenario"), trajectory.get("task_id"))
        self.mismatch = None
        if scenario is not None and recorded != (scenario, task_id):
            self.mismatch = (f"the recording replayed is of {recorded[0]!s} task {recorded[1]!s}, not of {scenario} "
                             f"task {task_id}: its calls are made here all the same")


class HumanPolicy:
    """Turns typed by a person: a front end puts ``AssistantTurn``s on ``queue``."""

    name = "human"

    def __init__(self) -> None:
        self.queue: asyncio.Queue[AssistantTurn | None] = asyncio.Queue()

    def abandon(self) -> None:
        """The person leaves: the episode ends as ``abandoned`` (no final answer, never verified)."""
        self.queue.put_nowait(None)

    async def next_turn(self, messages, tools, mode) -> AssistantTurn:
        turn = await self.queue.get()
        if turn is None:
            raise PolicyError("the player left the episode", kind="abandoned")
        return turn


class TerminalHumanPolicy:
    """Play from a terminal (``awm agent run --policy human``): each line is ``TOOL {json args}``, ``tools``
    to list them, or ``answer TEXT`` to finish. Prompts go to stderr; lines come from stdin."""

    name = "human"

    def __init__(self, read_line=None, write=None):
        import sys

        self.read_line = read_line or sys.stdin.readline
        raw = write or (lambda text: (sys.stderr.write(text), sys.stderr.flush()))
        self.write = lambda text: raw(visible(text))  # tool names and descriptions: the environment's text
        self.counter = 0

    async def next_turn(self, messages, tools, mode) -> AssistantTurn:
        names = {t["name"]: t for t in tools}
        while True:
            self.write("call> ")
            line = await asyncio.to_thread(self.read_line)
            if not line:  # end of input: finish with no answer
                return AssistantTurn("(no answer)")
            line = line.strip()
            if not line:
                continue
            if line == "tools":
                for t in tools:
                    props = (t.get("inputSchema") or {}).get("properties") or {}
                    required = set((t.get("inputSchema") or {}).get("required", []))
                    args = ", ".join(p + ("*" if p in required else "") for p in props)
                    self.write(f"  {t['name']}({args})  {(t.get('description') or '').splitlines()[0]}\n")
                continue
            if line.startswith("answer"):
                return AssistantTurn(line[len("answer"):].strip() or "(no answer)")
            name, _, raw = line.partition(" ")
            if name not in names:
                self.write(f"  unknown tool {name!r}; type 'tools' to list them, 'answer TEXT' to finish\n")
                continue
            try:
                arguments = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                self.write(f"  arguments must be a JSON object: {exc}\n")
                continue
            self.counter += 1
            return AssistantTurn("", [NativeCall(f"call_human_{self.counter}", name, json.dumps(arguments))])
