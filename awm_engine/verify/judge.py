"""The code-augmented LLM judge (sql mode): trajectory + verifier output → complete / incomplete /
server_error / agent_error, or judge_error when no verdict could be had (spec/awm-format.md §6.3).

Two profiles (``PROFILES``):

* ``reference`` (the default) does what the reference does: the judge receives only
  ``{"code_execution_result": …}`` as verification_json; its reply is parsed with ``json.loads`` and, if that
  fails, ``json.loads`` of the greedy match from the first ``{`` to the last ``}`` — anything else is
  judge_error; one request (with the openai client's default transport retries and timeout), temperature 1.0.
* ``robust`` adds the verifier's reasoning and success/failure criteria to verification_json, accepts code
  fences, prose, trailing commas and labels written with spaces, and retries unparseable answers and failed
  requests (3 attempts with backoff).

The system prompt is awm's own, with the reference's structure and output keys, in both profiles.
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
PROFILES = ("reference", "robust")
DEFAULT_PROFILE = "reference"


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown verification profile {profile!r} (choose from {', '.join(PROFILES)})")
    return profile

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


def judge_messages(task: str, trajectory: Any, verify_result: Any, verifier_meta: dict[str, Any] | None = None,
                   profile: str = DEFAULT_PROFILE) -> list[dict[str, str]]:
    """The judge's two messages. ``trajectory`` is the ``trajectory`` list of trajectory.json; under the
    reference profile verification_json is only ``{"code_execution_result": verify_result}``."""
    trajectory = trajectory or []
    steps = len(trajectory) if isinstance(trajectory, (list, dict, str)) else 0
    task_json = json.dumps({"user_task": task, "actual_execution_steps": steps, "trajectory": trajectory},
                           ensure_ascii=False, indent=2, default=str)
    verification: dict[str, Any] = {"code_execution_result": verify_result}
    if check_profile(profile) == "robust" and isinstance(verifier_meta, dict):
        for key in ("reasoning", "success_criteria", "failure_criteria"):
            if verifier_meta.get(key):
                verification[f"verifier_{key}" if key == "reasoning" else key] = verifier_meta[key]
    user = ("task_json:\n" + task_json + "\n\nverification_json:\n"
            + json.dumps(verification, ensure_ascii=False, indent=2, default=str))
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_GREEDY_OBJECT = re.compile(r"\{[\s\S]*\}")


def _parse_reference(text: str) -> tuple[str, dict[str, Any]]:
    """The reference's procedure, step for step: ``json.loads``; else the greedy ``{…}`` match; a reply that is
    JSON but no object, or whose classification is no string, is judge_error; an unknown label is judge_error
    with the parsed reply kept as the judge result."""
    try:
        data = json.loads(text)
    except ValueError:
        match = _GREEDY_OBJECT.search(text)
        try:
            data = json.loads(match.group()) if match else None
        except ValueError:
            data = None
        if data is None:
            return "judge_error", {"error": f"Failed to parse LLM response: {text}"}
    if not isinstance(data, dict):
        return "judge_error", {"error": f"'{type(data).__name__}' object has no attribute 'get'"}
    label = data.get("classification", "judge_error")
    if not isinstance(label, str):
        return "judge_error", {"error": f"'{type(label).__name__}' object has no attribute 'lower'"}
    label = label.lower().strip()
    return (label if label in VALID else "judge_error"), data


def _parse_robust(text: str) -> tuple[str, dict[str, Any]]:
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


def parse_judge_output(text: str, profile: str = DEFAULT_PROFILE) -> tuple[str, dict[str, Any]]:
    """(label, parsed JSON); label is judge_error when nothing usable is found."""
    return _parse_reference(text) if check_profile(profile) == "reference" else _parse_robust(text)


async def run_judge(endpoint: Endpoint, task: str, trajectory: Any, verify_result: Any,
                    verifier_meta: dict[str, Any] | None = None, attempts: int = 3, backoff: float = 1.0,
                    profile: str = DEFAULT_PROFILE) -> JudgeVerdict:
    """Ask the judge; judge_error when no verdict could be had.

    ``reference``: one request as the reference makes it (a plain ``AsyncOpenAI`` client: the SDK's default
    timeout and transport retries; temperature 1.0), no retry of an unusable answer. ``robust``: up to
    ``attempts`` requests with exponential ``backoff``, the endpoint's timeout and temperature."""
    from openai import AsyncOpenAI

    reference = check_profile(profile) == "reference"
    messages = judge_messages(task, trajectory, verify_result, verifier_meta, profile)
    if reference:
        client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key or "EMPTY")
        attempts, temperature = 1, 1.0
    else:
        client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=endpoint.timeout,
                             max_retries=1)
        attempts, temperature = max(1, attempts), endpoint.temperature
    raw: list[str] = []
    last: dict[str, Any] = {"error": "no attempt made"}
    try:
        for attempt in range(1, attempts + 1):
            try:
                response = await client.chat.completions.create(
                    model=endpoint.model, messages=messages, temperature=temperature, max_completion_tokens=4096)
                content = response.choices[0].message.content or ""
                raw.append(content)
                label, data = parse_judge_output(content, profile)
                if label != "judge_error" or reference:
                    return JudgeVerdict(label, data, attempt, raw, endpoint.model)
                last = data
            except Exception as exc:  # noqa: BLE001 - any failure of the request is "no verdict", as in the reference
                last = {"error": str(exc) if reference else f"{type(exc).__name__}: {exc}"}
            if attempt < attempts:
                await asyncio.sleep(backoff * 2 ** (attempt - 1))
    finally:
        await client.close()
    return JudgeVerdict("judge_error", last, attempts, raw, endpoint.model)
