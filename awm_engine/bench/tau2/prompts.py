"""The prompts awm uses for τ²-bench, written for awm with the structure τ²-bench's have (spec §4, §5, §8): the
agent's system prompt (an instructions block, then the domain policy), the user simulator's (the guidelines file,
then the scenario), the NL-assertion judge's. The greeting and the stop tokens are τ²'s own protocol values."""
from __future__ import annotations

import json
from typing import Any

GREETING = "Hi! How can I help you today?"
STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)

AGENT_INSTRUCTIONS = (
    "You are a customer service representative. The policy below is the only rulebook you follow: do what it "
    "allows, refuse what it forbids, and when a request falls outside it, say so or hand over as it describes.\n"
    "Each of your turns is either one message to the customer or tool calls - never both at once. Look facts up "
    "with the tools instead of guessing them, and give tool calls arguments that are valid JSON.\n"
    "Be courteous and get the customer's request done as far as the policy lets you.")


def agent_system_prompt(policy: str) -> str:
    return f"<instructions>\n{AGENT_INSTRUCTIONS}\n</instructions>\n<policy>\n{policy}\n</policy>"


def user_system_prompt(guidelines: str, scenario: str) -> str:
    """The simulated user's system prompt: the guidelines file, a blank line, the scenario in its tags."""
    return f"{guidelines}\n\n<scenario>\n{scenario}\n</scenario>"


def is_stop(content: Any) -> bool:
    """Whether a user message ends the conversation (any stop token, anywhere in it)."""
    return isinstance(content, str) and any(token in content for token in STOP_TOKENS)


JUDGE_SYSTEM = (
    "You grade a customer-service conversation against a list of expected outcomes. For each expected outcome, "
    "decide from the conversation alone whether it was met, and explain why in one or two sentences.\n"
    "Reply with JSON only, no other text:\n"
    '{"results": [{"expectedOutcome": "<the outcome, as given>", "reasoning": "<why>", '
    '"metExpectation": true or false}]}')


def judge_user_prompt(messages: list[dict[str, Any]], assertions: list[str]) -> str:
    """Every message as ``role: content`` (tool messages too; a turn with only tool calls shows its content as
    None), then the expected outcomes as a list."""
    lines = [f"{m.get('role')}: {m.get('content')}" for m in messages]
    return ("conversation:\n" + "\n".join(lines) + "\n\nexpected outcomes:\n" + json.dumps(list(assertions),
                                                                                            ensure_ascii=False))
