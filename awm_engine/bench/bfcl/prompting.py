"""What the model sees: awm's own system prompt (prompt mode), BFCL's tools (FC mode), multi-turn messages.

**Prompt mode** puts a system prompt first (prepended, after a blank line, to an entry's own system message):
awm's text with the structure of BFCL's default prompt — persona and task, "only the calls, in
``[func(a=1, b=2), g(c=3)]`` form", the multi-turn paragraph, then the functions as indented JSON.
**FC mode** sends the entry's messages as they are and the functions as OpenAI tools, compiled by the
wheel's ``convert_to_tool`` for the OpenAI chat-completions style (``.`` in names becomes ``_``; ``dict`` →
``object``, ``float`` → ``number`` …). Tool results go back as BFCL's OpenAI handler sends them: ``tool``
messages in FC mode, one ``user`` message holding the repr of the results in prompt mode.
"""
from __future__ import annotations

import copy
import json
from typing import Any

from awm_engine.agent.policies import AssistantTurn
from awm_engine.bench.bfcl import wheel

CALL_FORMAT = "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"

SYSTEM_PROMPT = (
    "You are an expert at calling functions. You get a question and a set of functions you can call; make "
    "one or more function calls that accomplish what the question asks. If no function fits, say so. If the "
    "question does not give the parameters a function requires, say so as well."
    "\n\n"
    "Answer with the function calls only.\n\n"
    "To call functions, you MUST write them as " + CALL_FORMAT + ". Do NOT add any other text to your answer."
    "\n\n"
    "In each turn, do everything the user asks for in that turn as well as you can: keep calling functions "
    "until the request is fulfilled. When you have no more functions to call, the turn is over and the next "
    "turn or task begins."
    "\n\n"
    "These are the functions you can call, in JSON format.\n{functions}\n"
)


def system_prompt(functions: list[dict[str, Any]]) -> str:
    return SYSTEM_PROMPT.replace("{functions}", json.dumps(functions, indent=4))


def first_messages(turn: list[dict[str, Any]], functions: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """The first turn's messages (copies); prompt mode adds the system prompt."""
    messages = copy.deepcopy(turn)
    if mode == "prompt":
        prompt = system_prompt(functions)
        if messages and messages[0].get("role") == "system":
            messages[0]["content"] = prompt + "\n\n" + messages[0]["content"]
        else:
            messages.insert(0, {"role": "system", "content": prompt})
    return messages


def fc_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The OpenAI tools BFCL compiles for these docs, in the shape ``LLMPolicy`` takes (name, description,
    inputSchema); ``[]`` in prompt mode."""
    utils = wheel.load("model_handler.utils")
    enums = wheel.load("constants.enums")
    mappings = wheel.load("constants.type_mappings")
    tools = utils.convert_to_tool(copy.deepcopy(functions), mappings.GORILLA_TO_OPENAPI,
                                  enums.ModelStyle.OPENAI_COMPLETIONS)
    return [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
             "inputSchema": t["function"].get("parameters") or {"type": "object", "properties": {}}} for t in tools]


def holdout_message(docs: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """The user message of a miss_func holdout turn (BFCL's own sentence; prompt mode lists the new docs)."""
    prompts = wheel.load("constants.default_prompts")
    if mode == "fc":
        return {"role": "user", "content": prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}
    return {"role": "user", "content": prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(
        functions=str(docs))}


def raw_output(turn: AssistantTurn, mode: str) -> Any:
    """The model's output as BFCL records it: FC ``[{name: arguments_json}, …]`` (the text when it made no
    call), prompt mode the text."""
    if mode == "fc" and turn.tool_calls:
        return [{c.name: c.arguments} for c in turn.tool_calls]
    return turn.content


def result_messages(turn: AssistantTurn, mode: str, decoded: list[str], results: list[str]) -> list[dict]:
    """The execution results of one step as the next request carries them."""
    if mode == "fc":
        return [{"role": "tool", "content": result, "tool_call_id": call.id}
                for result, call in zip(results, turn.tool_calls)]
    return [{"role": "user", "content": repr([{"role": "tool", "name": d, "content": r}
                                              for d, r in zip(decoded, results)])}]
