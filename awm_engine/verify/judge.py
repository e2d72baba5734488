"""The code-augmented LLM judge (sql mode): trajectory + verifier output → complete / incomplete /
server_error / agent_error, or judge_error when no verdict could be had (spec/awm-format.md §6.3).

Inputs and output keys follow the reference; unlike it, the judge also receives the verifier's
reasoning and its success/failure criteria, parsing tolerates code fences, prose and letter case,
and failed attempts are retried.
"""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from awm_engine.agent.endpoints import Endpoint

JUDGE_LABELS = ("complete", "incomplete", "server_error", "agent_error")
VALID = set(JUDGE_LABELS) | {"judge_error"}

JUDGE_SYSTEM_PROMPT = """You judge, impartially, whether an agent finished a task in a simulated application that it used \
through MCP tools. The application is a simplified simulation backed by a SQLite database.

You receive:
- task_json: the user's task, the number of agent steps, and the agent's full trajectory (its messages, tool calls and \
the tool responses);
- verification_json: what a verification program found by comparing the database before and after the episode, \
together with the program's reasoning and its success and failure criteria when available.

Decide on exactly one class:
- "complete": everything the task asked for was done (changes visible in the database, or the requested information \
correctly given in the final answer).
- "server_error": the task could not be finished because the environment failed (tool responses with HTTP 5xx \
errors or broken behaviour the agent could not work around).
- "agent_error": the agent made mistakes: wrong tool, wrong arguments, wrong record changed, gave up, or claimed \
success without doing the work.
- "incomplete": part of the task was done, but not all of it.
When several apply, prefer them in this order: complete, server_error, agent_error, incomplete.

The verification result helps but can be empty, an error, or itself wrong; weigh it against the trajectory. \
Write in English, UTF-8, no emoji.

Answer with one JSON object and nothing else (no code fences):
{"reasoning": "<your analysis>", "confidence_score": [<0-100 for complete>, <incomplete>, <server_error>, \
<agent_error>], "classification": "complete|incomplete|server_error|agent_error", "evidence": {"status": "<short \
status>", "iterations": <int>, "error_signals": ["..."], "last_actions": ["..."], "database_verification": "<what \
the database shows>"}}"""


@dataclass
class JudgeVerdict:
    classification: str  # one of JUDGE_LABELS, or judge_error
    judge_result: dict[str, Any]
    attempts: int = 0
    raw: list[str] = field(default_factory=list)
    model: str | None = None

    @property
    def has_verdict(self) -> bool:
        return self.classification != "judge_error"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_messages(task: str, trajectory: list[dict[str, Any]], verify_result: Any,
                   verifier_meta: dict[str, Any] | None = None) -> list[dict[str, str]]:
    task_json = json.dumps({"user_task": task, "actual_execution_steps": len(trajectory), "trajectory": trajectory},
                           ensure_ascii=False, indent=2, default=str)
    verification: dict[str, Any] = {"code_execution_result": verify_result}
    for key in ("reasoning", "success_criteria", "failure_criteria"):
        if verifier_meta and verifier_meta.get(key):
            verification[f"verifier_{key}" if key == "reasoning" else key] = verifier_meta[key]
    user = ("task_json:\n" + task_json + "\n\nverification_json:\n"
            + json.dumps(verification, ensure_ascii=False, indent=2, default=str))
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def parse_judge_output(text: str) -> tuple[str, dict[str, Any]]:
    """(label, parsed JSON); label is judge_error when nothing usable is found."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"): text.rindex("}") + 1])
    data = None
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            break
        data = None
    if data is None:
        try:
            import json_repair

            repaired = json_repair.loads(text)
            data = repaired if isinstance(repaired, dict) and repaired else None
        except Exception:  # noqa: BLE001
            data = None
    if data is None:
        return "judge_error", {"error": f"Failed to parse LLM response: {text[:2000]}"}
    label = str(data.get("classification", "judge_error")).lower().strip().replace(" ", "_")
    if label not in VALID:
        return "judge_error", {"error": f"invalid classification {data.get('classification')!r}", **data}
    return label, data


async def run_judge(endpoint: Endpoint, task: str, trajectory: list[dict[str, Any]], verify_result: Any,
                    verifier_meta: dict[str, Any] | None = None, attempts: int = 3,
                    backoff: float = 1.0) -> JudgeVerdict:
    """Ask the judge, retrying unparseable answers and failed requests; judge_error if all attempts fail."""
    import openai
    from openai import AsyncOpenAI

    messages = judge_messages(task, trajectory, verify_result, verifier_meta)
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=endpoint.timeout,
                         max_retries=1)
    raw: list[str] = []
    last: dict[str, Any] = {"error": "no attempt made"}
    try:
        for attempt in range(1, attempts + 1):
            try:
                response = await client.chat.completions.create(
                    model=endpoint.model, messages=messages, temperature=endpoint.temperature,
                    max_completion_tokens=4096)
                content = (response.choices[0].message.content or "") if response.choices else ""
                raw.append(content)
                label, data = parse_judge_output(content)
                if label != "judge_error":
                    return JudgeVerdict(label, data, attempt, raw, endpoint.model)
                last = data
            except openai.APIError as exc:
                last = {"error": f"{type(exc).__name__}: {exc}"}
            if attempt < attempts:
                await asyncio.sleep(backoff * 2 ** (attempt - 1))
    finally:
        await client.close()
    return JudgeVerdict("judge_error", last, attempts, raw, endpoint.model)
