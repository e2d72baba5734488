"""AWM's meta-tool protocol: our system prompt, the tool list shown to the model, and tool-call parsing.

The model sees two functions, ``list_tools`` and ``call_tool``, and calls one per turn by writing a
JSON object inside ``<tool_call>…</tool_call>``; a turn without a call is the final answer
(spec/awm-format.md §5.2–5.4). Parsing is tolerant (json_repair) and accepts every tool-name form
in use: ``<op>``, ``mcp_tool_<op>``, ``mcp_server_<op>`` and ``mcp_tool_mcp_server_<op>`` (§4.5, §11.12).
Unlike the reference, malformed output is reported as a format issue rather than crashing or being
taken for a final answer, and calls written inside ``<think>`` are ignored unless asked for.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)
PREFIXES = ("mcp_tool_", "mcp_server_")
NAME_STYLES = {"reference": "mcp_tool_mcp_server_", "prefixed": "mcp_tool_", "plain": ""}

SYSTEM_PROMPT = """# MCP Tools

You are an agent working inside an application through its MCP tools. Solve the user's task by calling tools.
You are already signed in as the user with id 1; never try to log in or register.

You have exactly two functions, described in JSON Schema inside <tools></tools>:
<tools>
{"name": "list_tools", "description": "Return the list of tools this application offers, with their parameters.", "parameters": {"type": "object", "properties": {}}}
{"name": "call_tool", "description": "Call one application tool by name.", "parameters": {"type": "object", "properties": {"tool_name": {"type": "string", "description": "A tool name exactly as list_tools shows it."}, "arguments": {"type": "string", "description": "The tool's arguments as a JSON object encoded in a string (no markdown). Use \\"{}\\" when the tool takes none."}}, "required": ["tool_name", "arguments"]}}
</tools>

Rules:
- Start by calling list_tools, once. Then use call_tool as often as you need.
- Make exactly one function call per reply.
- To call a function, write a JSON object with "name" and "arguments" between <tool_call> and </tool_call>.
- When the task is done (or cannot be done), reply with your final answer as plain text and no function call.

Example: listing the tools
<tool_call>
{"name": "list_tools", "arguments": {}}
</tool_call>

Example: calling a tool
<tool_call>
{"name": "call_tool", "arguments": {"tool_name": "mcp_tool_mcp_server_search_items", "arguments": "{\\"query\\": \\"blue mug\\", \\"limit\\": 5}"}}
</tool_call>
"""


# native mode: the request carries the environment's tools as functions, so the prompt describes no tools of its
# own and no call format (the endpoint's tool-calling format is the one the model was trained with)
NATIVE_SYSTEM_PROMPT = """# Tools

You are an agent working inside an application through its tools. Solve the user's task by calling them.
You are already signed in as the user with id 1; never try to log in or register.

The application's tools are the functions you were given. Call one function per reply (only the first call of a
reply is made), and read its result before the next. When the task is done (or cannot be done), reply with your
final answer as plain text and no function call.
"""

def display_name(op: str, style: str = "reference") -> str:
    return NAME_STYLES[style] + op


def strip_tool_prefixes(name: str) -> str:
    """``mcp_tool_mcp_server_x`` / ``mcp_tool_x`` / ``mcp_server_x`` / ``x`` → ``x``."""
    for prefix in PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def _param_lines(name: str, prop: dict[str, Any], required: bool, indent: int) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}- {name}: {prop.get('type', 'unknown')} ({'required' if required else 'optional'})"]
    inner = " " * (indent + 2)
    if prop.get("description"):
        lines.append(f"{inner}Description: {prop['description']}")
    if prop.get("default") is not None:
        lines.append(f"{inner}Default: {prop['default']}")
    if prop.get("enum"):
        lines.append(f"{inner}Allowed values: {prop['enum']!r}")
    if prop.get("type") == "object" and prop.get("properties"):
        lines.append(f"{inner}Properties:")
        req = set(prop.get("required", []))
        for sub, sub_prop in prop["properties"].items():
            lines.extend(_param_lines(sub, sub_prop, sub in req, indent + 4))
    return lines


def render_tool_list(tools: list[dict[str, Any]], style: str = "reference") -> str:
    """The ``list_tools`` answer, laid out as the reference agent lays it out (§5.3)."""
    shown = [t for t in tools if t["name"] != "list_tools"]
    out = [f"Available MCP Tools ({len(shown)} tools):", "=" * 80, ""]
    for i, tool in enumerate(shown, start=1):
        out.append(f"{i}. {display_name(tool['name'], style)}")
        desc_lines = [line.strip() for line in (tool.get("description") or "").split("\n") if line.strip()]
        out.append(f"   Description: {desc_lines[0] if desc_lines else ''}")
        out.extend(f"   {line}" for line in desc_lines[1:])
        props = (tool.get("inputSchema") or {}).get("properties") or {}
        if props:
            out.append("   Parameters:")
            req = set((tool.get("inputSchema") or {}).get("required", []))
            for name, prop in props.items():
                out.extend(_param_lines(name, prop, name in req, 6))
        else:
            out.append("   Parameters: None")
        out.append("")
    return "\n".join(out).strip()


def robust_json(text: Any) -> Any:
    """json, then json_repair (which also digs JSON out of fences and prose); '' gives {}."""
    if not isinstance(text, str):
        return text
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        import json_repair

        try:
            return json_repair.loads(text)
        except Exception:  # noqa: BLE001 - unrepairable
            return None


@dataclass
class ParsedCall:
    id: str
    name: str  # "list_tools" | "call_tool" | whatever the model wrote
    arguments: Any  # as written by the model (kept for the trajectory)
    tool: str | None = None  # call_tool: the environment tool, prefixes stripped
    tool_arguments: dict[str, Any] = field(default_factory=dict)
    rejection: str | None = None  # reference protocol: the error the model gets instead of a call


@dataclass
class FormatIssue:
    kind: str  # invalid_json | missing_name | unclosed_tool_call | multiple_calls | invalid_arguments
    detail: str


@dataclass
class ParsedTurn:
    calls: list[ParsedCall]
    issues: list[FormatIssue]

    @property
    def is_final(self) -> bool:
        return not self.calls and not self.issues


def _call_tool_target(arguments: Any, call: ParsedCall) -> FormatIssue | None:
    args = robust_json(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(args, dict):
        return FormatIssue("invalid_arguments", "call_tool arguments must be an object with tool_name and arguments")
    tool_name = args.get("tool_name")
    if not isinstance(tool_name, str) or not tool_name.strip():
        return FormatIssue("invalid_arguments", "call_tool needs a 'tool_name' string")
    inner = args.get("arguments", {})
    if isinstance(inner, str):
        inner = robust_json(inner)
    if inner is None or inner == "":
        inner = {}
    if not isinstance(inner, dict):
        return FormatIssue("invalid_arguments", f"the arguments of {tool_name} must be a JSON object")
    call.tool = strip_tool_prefixes(tool_name.strip())
    call.tool_arguments = inner
    return None


def parse_meta_turn(content: str, known_tools: set[str] | None = None, parse_think_calls: bool = False,
                    id_base: int | None = None) -> ParsedTurn:
    """Every ``<tool_call>`` of one assistant turn, normalized to list_tools / call_tool."""
    text = content or ""
    if not parse_think_calls:
        text = THINK_RE.sub("", text)
    matches = TOOL_CALL_RE.findall(text)
    issues: list[FormatIssue] = []
    calls: list[ParsedCall] = []
    if not matches:
        if "<tool_call>" in text:
            issues.append(FormatIssue("unclosed_tool_call", "a <tool_call> tag was opened but never closed"))
        return ParsedTurn(calls, issues)
    base = id_base if id_base is not None else int(time.time() * 1000)
    for index, raw in enumerate(matches):
        data = robust_json(raw)
        if isinstance(data, list):
            data = next((d for d in data if isinstance(d, dict)), None)
        if not isinstance(data, dict) or not data:
            issues.append(FormatIssue("invalid_json", f"not a JSON object: {raw[:200]}"))
            continue
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            issues.append(FormatIssue("missing_name", f"the call has no function name: {raw[:200]}"))
            continue
        name = name.strip()
        arguments = data.get("arguments", {})
        call = ParsedCall(f"call_{base}_{index}", name, arguments)
        if name == "list_tools":
            pass
        elif name == "call_tool":
            issue = _call_tool_target(arguments, call)
            if issue:
                issues.append(issue)
                continue
        elif name.startswith(PREFIXES) or (known_tools is not None and name in known_tools):
            # a direct call by tool name: treated as call_tool, like the reference's shortcut
            inner = robust_json(arguments) if isinstance(arguments, str) else arguments
            call = ParsedCall(call.id, "call_tool", {"tool_name": name, "arguments": arguments or {}},
                              strip_tool_prefixes(name), inner if isinstance(inner, dict) else {})
        calls.append(call)
    if len(calls) > 1:
        issues.append(FormatIssue("multiple_calls", f"{len(calls)} calls in one turn; only the first is executed"))
    return ParsedTurn(calls, issues)


def observation_text(text: str, is_error: bool) -> str:
    return f"Error: {text}" if is_error else text


# -- the reference agent's parsing and dispatch (``--protocol reference``) -----------------------------

REFERENCE_PREFIX = "mcp_tool_"  # what the reference agent puts in front of every name it shows
REFERENCE_SERVER = "mcp_server_"  # mcp-agent's namespace for the environment's server


@dataclass
class ReferenceTurn:
    """One assistant turn as the reference agent reads it: the calls it found (only the first runs), or a
    final answer when there are none, or ``crash`` when the reference itself would have crashed."""

    calls: list[ParsedCall]
    crash: str | None = None

    @property
    def is_final(self) -> bool:
        return not self.calls and self.crash is None


def _reference_json(raw: str) -> Any:
    data = robust_json(raw)
    if isinstance(data, list):  # the first element, whatever it is
        data = data[0] if data else None
    return data


def parse_reference_turn(content: str, id_base: int | None = None) -> ReferenceTurn:
    """Every ``<tool_call>`` of the whole content, ``<think>`` included (spec §5.4); calls that do not
    parse are dropped without a word; ``"name": null`` (or any non-string name) is a crash."""
    base = id_base if id_base is not None else int(time.time() * 1000)
    calls: list[ParsedCall] = []
    for index, raw in enumerate(TOOL_CALL_RE.findall(content or "")):
        data = _reference_json(raw)
        if not data or not isinstance(data, dict):
            continue
        name = data.get("name", "")
        arguments = data.get("arguments", {})
        if not isinstance(name, str):
            return ReferenceTurn(calls, f"the call's name is {json.dumps(name)}, not a string "
                                        "(the reference agent crashes here)")
        if name.startswith(REFERENCE_PREFIX):  # direct-call shortcut
            name, arguments = "call_tool", {"tool_name": name, "arguments": arguments or {}}
        calls.append(ParsedCall(f"call_{base}_{index}", name, arguments))
    return ReferenceTurn(calls)


class ReferenceCrash(ValueError):
    """Input on which the reference agent raises and ends without a trajectory."""


def reference_call_tool_arguments(arguments: Any) -> tuple[str, dict[str, Any]]:
    """``call_tool``'s (tool_name, arguments) as the reference reads them: anything malformed becomes an
    empty name or ``{}``; one leading ``mcp_tool_`` is removed from the name; a ``tool_name`` that is not a
    string (null, a number …) is ``ReferenceCrash``."""
    args = robust_json(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(args, dict):
        return "", {}
    tool_name = args.get("tool_name", "")
    if not isinstance(tool_name, str):  # the reference calls tool_name.startswith(...) and crashes
        raise ReferenceCrash(f"call_tool's tool_name is {json.dumps(tool_name, default=str)}, not a string "
                             "(the reference agent crashes here)")
    if tool_name.startswith(REFERENCE_PREFIX):
        tool_name = tool_name[len(REFERENCE_PREFIX):]
    inner = args.get("arguments", {})
    if isinstance(inner, str):
        inner = robust_json(inner) if inner.strip() else {}
    return tool_name, inner if isinstance(inner, dict) else {}


def reference_tool_target(tool_name: str, known: set[str]) -> tuple[str | None, str | None]:
    """How mcp-agent resolves a name: ``mcp_server_<op>`` goes to the server as ``<op>`` (which answers
    ``Unknown tool: <op>`` itself when it has none); any other name must be an exact tool name.
    Returns (tool to call, None) or (None, the error text the model sees)."""
    if tool_name.startswith(REFERENCE_SERVER):
        return tool_name[len(REFERENCE_SERVER):], None
    if tool_name in known:
        return tool_name, None
    return None, f"Error: Tool '{tool_name}' not found"


def unknown_function_text(name: str) -> str:
    return f"Error: Unknown tool '{name}'. Only 'list_tools' and 'call_tool' are available."


def uses_vllm_extras(base_url: str | None) -> bool:
    """The reference's switch for local vLLM serving (spec §5.5): tool results as ``role: tool`` messages
    and the extra request fields, iff the URL has ``localhost`` and ``v1`` and is not Azure."""
    url = base_url or ""
    return "localhost" in url and "openai.azure.com" not in url and "v1" in url


VLLM_EXTRA_BODY = {"add_generation_prompt": True, "min_tokens": 16, "chat_template_kwargs": {"enable_thinking": True}}
