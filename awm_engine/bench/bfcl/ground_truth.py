"""``--policy ground-truth``: every entry answered with its possible answer, written as a model would write it.

Single-turn: per expected call, per parameter the first option that is not ``""``; a parameter whose options
include ``""`` (may be omitted) is left out unless the doc requires it (then it gets its first real option,
or ``""`` when it has none). Dict-valued options are candidate dicts whose values are option lists again
(resolved the same way), and arrays of dicts hold such candidates. FC mode sends the calls as tool calls
(names with ``_`` for ``.``, arguments as JSON); prompt mode writes ``[f(a=1, b='x'), …]``. Java and
JavaScript arguments are written as source literals of their doc type (``42L``, ``true``, ``new int[]{1, 2}``,
``new HashMap<…>() {{ put("k", v); }}``, ``[1, 2]``, ``{a: 1}``); in FC mode every one is a JSON string.
Irrelevance entries get a text answer; live_relevance (no possible answer) a call of its first function.
Multi-turn: each turn with expected calls is one step holding them (positional arguments become keyword
arguments, in the order of the doc's parameters), then a text reply ends the turn.
"""
from __future__ import annotations

import ast
import json
from typing import Any

from awm_engine.agent.policies import AssistantTurn, NativeCall, ScriptedTurns
from awm_engine.bench.bfcl.data import Entry, prompt_at

NO_CALL = "None of the functions can answer this question."
TURN_DONE = "Done."


def _pick(options: Any, required: bool) -> tuple[bool, Any]:
    if not isinstance(options, list):  # a bare value where an option list belongs (it happens)
        return True, options
    if "" in options and not required:
        return False, None
    real = [o for o in options if o != ""]
    return True, (real[0] if real else "")


def _resolve_candidate(candidate: dict[str, Any]) -> dict[str, Any]:
    """A candidate dict (values are option lists) as one concrete dict."""
    out = {}
    for key, options in candidate.items():
        if not isinstance(options, list):  # a bare string where an option list belongs: "" is in it, omit
            continue
        present, value = _pick(options, False)
        if present:
            out[key] = value
    return out


def _value(schema: dict[str, Any], option: Any) -> Any:
    kind = (schema or {}).get("type")
    items = ((schema or {}).get("items") or {}).get("type")
    if kind in ("dict", "HashMap") and isinstance(option, dict):
        return _resolve_candidate(option)
    if kind in ("array", "Array", "ArrayList", "tuple") and items == "dict" and isinstance(option, list):
        return [_resolve_candidate(c) if isinstance(c, dict) else c for c in option]
    return option


def expected_calls(doc_list: list[dict[str, Any]], ground_truth: list[dict[str, Any]]) -> list[tuple[str, dict]]:
    """(function name, arguments) per expected call, from the possible answer and the raw docs."""
    docs = {d["name"]: d for d in doc_list}
    calls = []
    for call in ground_truth:
        name, params = next(iter(call.items()))
        doc = docs.get(name) or {}
        props = (doc.get("parameters") or {}).get("properties") or {}
        required = set((doc.get("parameters") or {}).get("required") or [])
        args = {}
        for param, options in params.items():
            present, value = _pick(options, param in required)
            if present:
                args[param] = _value(props.get(param, {}), value)
        calls.append((name, args))
    return calls


# -- Java and JavaScript source literals ------------------------------------------------------------------

_JAVA_ARRAY_TYPES = {"integer": "int", "String": "String", "boolean": "boolean", "long": "long",
                     "double": "double", "float": "float", "char": "char", "any": "Object"}


def _java_plain(value: Any) -> str:
    """A value as Java source where the converter reads it without its doc type (HashMap values)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _java_element(value: Any, kind: str | None, container: str) -> str:
    if isinstance(value, str):
        # Array elements of type String are taken as they are written; ArrayList strips one char each side
        return f'"{value}"' if container == "ArrayList" and kind in ("String", "char") else value
    return _java_scalar(value, kind or "any", prompt=False)


def _java_scalar(value: Any, kind: str, prompt: bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "long" and isinstance(value, int):
        return f"{value}L"
    if kind == "float" and isinstance(value, (int, float)):
        return f"{value}f"
    if isinstance(value, (int, float)):
        return repr(value)
    return str(value)


def _text(value: str, prompt: bool) -> str:
    """A string argument: as it is in FC mode; quoted in prompt mode, where the decoder strips the quotes of
    a top-level string (so a variable name, ``employee:1234`` or ``1.2.3`` all come back as written)."""
    return f'"{value}"' if prompt and '"' not in value else value


def java_literal(value: Any, schema: dict[str, Any], prompt: bool) -> str:
    kind = schema.get("type", "any")
    items = (schema.get("items") or {}).get("type")
    if isinstance(value, str):
        return _text(value, prompt)  # a string, or a variable name where a typed value belongs
    if kind == "Array" and isinstance(value, list):
        inner = ", ".join(_java_element(v, items, "Array") for v in value)
        return f"new {_JAVA_ARRAY_TYPES.get(items or 'any', items)}[]{{{inner}}}"
    if kind == "ArrayList" and isinstance(value, list):
        return f"new ArrayList<>(Arrays.asList({', '.join(_java_element(v, items, 'ArrayList') for v in value)}))"
    if kind == "HashMap" and isinstance(value, dict):
        puts = " ".join(f'put("{k}", {_java_plain(v)});' for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return _java_scalar(value, kind, prompt)


def _js_plain(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_js_plain(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_js_plain(v)}" for k, v in value.items()) + "}"
    return repr(value)


def js_literal(value: Any, schema: dict[str, Any], prompt: bool) -> str:
    kind = schema.get("type", "any")
    if isinstance(value, str):
        return _text(value, prompt)
    if kind == "Bigint" and isinstance(value, int):
        return f"{value}n"
    return _js_plain(value)


# -- the answers ----------------------------------------------------------------------------------------

def _fc_name(name: str) -> str:
    return name.replace(".", "_")


def _python_call(name: str, args: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def answer_calls(calls: list[tuple[str, dict]], mode: str, language: str = "python",
                 docs: list[dict[str, Any]] | None = None, tag: str = "gt") -> AssistantTurn:
    """One assistant turn making ``calls``."""
    if language != "python":
        props = {d["name"]: (d.get("parameters") or {}).get("properties") or {} for d in docs or []}
        literal = java_literal if language == "java" else js_literal
        calls = [(name, {k: literal(v, props.get(name, {}).get(k, {}), mode == "prompt") for k, v in args.items()})
                 for name, args in calls]
        if mode == "prompt":
            text = ", ".join(f"{name}({', '.join(f'{k}={v}' for k, v in args.items())})" for name, args in calls)
            return AssistantTurn(f"[{text}]")
    if mode == "fc":
        return AssistantTurn("", [NativeCall(f"call_{tag}_{i}", _fc_name(name), json.dumps(args, ensure_ascii=False))
                                  for i, (name, args) in enumerate(calls)])
    return AssistantTurn("[" + ", ".join(_python_call(n, a) for n, a in calls) + "]")


def parse_call(call: str, docs: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """A multi-turn ground-truth call string as (name, keyword arguments); no code is run."""
    node = ast.parse(call.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {call!r}")
    name = node.func.id
    order = list(((docs.get(name) or {}).get("parameters") or {}).get("properties") or {})
    args = {order[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return name, args


def script(entry: Entry, mode: str) -> list[AssistantTurn]:
    """The assistant turns the ground-truth policy plays for ``entry``, in order."""
    cat = entry.category
    if cat.kind == "irrelevance":
        return [AssistantTurn(NO_CALL)]
    if cat.kind == "relevance":
        first = entry.prompt["function"][0]["name"]
        return [answer_calls([(first, {})], mode)]
    if cat.kind == "ast":
        raw_docs = raw_functions(entry)
        return [answer_calls(expected_calls(raw_docs, entry.ground_truth), mode, cat.language, raw_docs)]
    docs = {d["name"]: d for d in entry.prompt["function"]}
    for held in (entry.prompt.get("missed_function") or {}).values():
        docs.update({d["name"]: d for d in held})
    turns: list[AssistantTurn] = []
    for index, expected in enumerate(entry.ground_truth):
        if expected:
            turns.append(answer_calls([parse_call(c, docs) for c in expected], mode, tag=f"gt{index}"))
        turns.append(AssistantTurn(TURN_DONE))
    return turns


def raw_functions(entry: Entry) -> list[dict[str, Any]]:
    """The entry's function docs as in the file (Java/JavaScript types not yet rewritten to ``string``)."""
    return prompt_at(entry.category.name, entry.index, hinted=False)["function"]


class GroundTruthPolicy(ScriptedTurns):
    """Plays ``script(entry, mode)``, then keeps replying with text (which ends any further turn)."""

    name = "ground-truth"

    def __init__(self, entry: Entry, mode: str):
        super().__init__(script(entry, mode), TURN_DONE)
