"""Reading what a generation model wrote: JSON (from fences or prose, repaired when nearly valid) or Python code,
with the ways a reply goes wrong named — empty, refused, cut off by the token limit, not JSON, wrong shape."""
from __future__ import annotations

import json
import re
from typing import Any

REFUSALS = ("i'm sorry", "i am sorry", "i can't", "i cannot", "i can not", "i won't", "as an ai", "i'm unable",
            "i am unable")
FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\s*\n(.*?)```", re.S)


class BadReply(ValueError):
    """The reply is unusable; the message says how (it goes into the retry's error list)."""


def reply_problem(text: str, finish_reason: str | None) -> str | None:
    """Why a reply cannot be used before even parsing it, or None."""
    if not text or not text.strip():
        return "the model returned an empty reply" + (f" (finish_reason {finish_reason})" if finish_reason else "")
    if finish_reason == "length":
        return "the reply was cut off by the token limit (finish_reason length): write less, more compactly"
    if finish_reason == "content_filter":
        return "the reply was blocked by the endpoint's content filter"
    head = text.strip()[:200].lower()
    if any(head.startswith(r) for r in REFUSALS) and "{" not in text and "def " not in text:
        return f"the model refused: {text.strip()[:200]!r}"
    return None


def parse_json(text: str, finish_reason: str | None = None) -> Any:
    """The JSON value of a reply: plain, inside a code fence, or the outermost {...}/[...] in prose; nearly-valid
    JSON is repaired (json_repair) as the reference does. Raises ``BadReply``."""
    problem = reply_problem(text, finish_reason)
    if problem:
        raise BadReply(problem)
    candidates = [text.strip()] + [m.strip() for m in FENCE.findall(text)]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    try:
        import json_repair

        for candidate in candidates[1:] or candidates:
            value = json_repair.loads(candidate)
            if isinstance(value, (dict, list)) and value:
                return value
    except Exception:  # noqa: BLE001 - json_repair gives up in its own ways
        pass
    raise BadReply(f"the reply is not JSON: {text.strip()[:160]!r}")


def parse_object(text: str, finish_reason: str | None, required: str) -> dict[str, Any]:
    """A JSON object with key ``required`` (a bare list is taken as that key's value)."""
    value = parse_json(text, finish_reason)
    if isinstance(value, list):
        value = {required: value}
    if not isinstance(value, dict):
        raise BadReply(f"expected a JSON object with '{required}', got {type(value).__name__}")
    if required not in value:
        keys = ", ".join(map(str, list(value)[:8])) or "none"
        raise BadReply(f"the JSON object has no '{required}' key (keys: {keys})")
    return value


def parse_code(text: str, finish_reason: str | None = None) -> str:
    """Python source from a reply: raw code, a fenced block, or JSON ``{"full_code": …}`` (as the reference
    accepts when ``full_code`` appears near the start). Raises ``BadReply``."""
    problem = reply_problem(text, finish_reason)
    if problem:
        raise BadReply(problem)
    stripped = text.strip()
    if "full_code" in stripped[:30]:
        try:
            value = parse_json(stripped)
            if isinstance(value, dict) and isinstance(value.get("full_code"), str):
                stripped = value["full_code"]
        except BadReply:
            pass
    fenced = FENCE.findall(stripped)
    if fenced:
        stripped = max(fenced, key=len)
    if "import" not in stripped and "def " not in stripped:
        raise BadReply(f"the reply is not Python code: {stripped[:160]!r}")
    try:
        compile(stripped, "<generated>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise BadReply(f"the code does not parse: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting: parsed, never run
        raise BadReply(f"the code does not parse: {type(exc).__name__}: {str(exc)[:200]}") from None
    return stripped + ("\n" if not stripped.endswith("\n") else "")
