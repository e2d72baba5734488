"""The worker protocol: JSON objects, one per line, over the socket between ``EnvPool`` and a worker.

Requests: ``{"id": N, "op": OP, ...fields}`` with OP one of ``OPS``; ``{"op": "shutdown"}`` has no id
and no answer. Answers: ``{"id": N, "ok": true, "result": {...}}`` or ``{"id": N, "ok": false,
"kind": KIND, "error": TEXT, "traceback": TEXT}``. While an episode is served over MCP (op ``serve``) the worker
also sends an event, without id, after each call: ``{"event": "call", "record": {...}}`` (``"stuck": true`` when
its handler would not stop). Both sides use only the functions below.
"""
from __future__ import annotations

import json
import math
import traceback
from typing import Any

from awm_engine.data.jsonl import dumps_text

OPS = ("ping", "load", "unload", "open", "call", "list_tools", "reset", "close", "serve", "shutdown")
# the largest line either side reads: a longer one fails the reader (the parent then restarts that worker), so
# a worker that sends a giant line anyway costs the parent at most about twice this in buffers. Honest answers fit:
# a tool result's text is cut at the result cap (runtime/caps.py, at most 4 MiB), and shorter still when its JSON
# encoding would take more than TEXT_BUDGET (escaped control characters take six bytes each)
LINE_LIMIT = 16 << 20
TEXT_BUDGET = LINE_LIMIT - (1 << 20)  # the rest of the line: the answer's other fields (a traceback is ≤ 20,000 chars)
ERROR_TEXT_LIMIT = 64 << 10  # characters of an error's message and traceback that an error answer carries
TRACEBACK_LIMIT = 20_000  # characters kept of one tool call's traceback (its start and its end)
ERROR_KIND_LIMIT = 64  # characters of an error kind (``http_5xx``, ``timeout`` …)


class WorkerError(Exception):
    """A worker answered with an error, died, or is not running (``kind`` says which)."""

    def __init__(self, message: str, kind: str = "worker", traceback_text: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.traceback = traceback_text


def encode(message: dict[str, Any]) -> bytes:
    """One line; a lone surrogate (a client's ``"\\ud800"`` in a tool's arguments) goes as its JSON escape."""
    return (dumps_text(message, default=str) + "\n").encode()


def decode(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a protocol message must be a JSON object")
    return message


def request(rid: int, op: str, **fields: Any) -> bytes:
    if op not in OPS:
        raise ValueError(f"unknown worker op {op!r}")
    return encode({"id": rid, "op": op, **fields})


def shutdown() -> bytes:
    return encode({"op": "shutdown"})


def ok_reply(rid: Any, result: dict[str, Any]) -> bytes:
    return encode({"id": rid, "ok": True, "result": result})


def error_reply(rid: Any, exc: BaseException, kind: str | None = None) -> bytes:
    return encode({"id": rid, "ok": False, "kind": kind or type(exc).__name__,
                   "error": _clip(str(exc) if kind else f"{type(exc).__name__}: {exc}"),
                   "traceback": _clip("".join(traceback.format_exception(exc, limit=8)))})


def clip(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``text`` kept to about ``limit`` characters, its start and its end (code can raise with a message of any
    size)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - limit:,} characters left out) …\n{text[-half:]}"


_clip = clip


class MalformedAnswer(ValueError):
    """A worker's answer that an honest worker never sends (a field of the wrong type)."""


MAX_CONTAINERS = 200_000  # lists and objects in one answer the parent keeps (a tool list: a few thousand)
MAX_DEPTH = 100


def check_size(value: Any, what: str) -> None:
    """``MalformedAnswer`` when ``value`` holds more than ``MAX_CONTAINERS`` lists and objects or nests deeper than
    ``MAX_DEPTH``: a line of the channel's 16 MiB can hold five million empty lists, 350 MB in the parent, which a
    kept answer (a scenario's tools) would hold for the whole run."""
    count, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            count += 1
            if count > MAX_CONTAINERS or depth > MAX_DEPTH:
                raise MalformedAnswer(f"{what} holds more than {MAX_CONTAINERS:,} lists and objects or nests deeper "
                                      f"than {MAX_DEPTH} levels")
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))


def load_answer(result: Any) -> dict[str, Any]:
    """A ``load`` answer as the parent keeps it (for the scenario's whole life in the pool): its tools a list of
    objects with a string name and an object input schema, within ``check_size``; ``MalformedAnswer`` otherwise."""
    if not isinstance(result, dict):
        raise MalformedAnswer(f"a load's result is a {type(result).__name__}, not an object")
    tools = result.get("tools")
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("inputSchema"), dict)
            and isinstance(t.get("description", ""), (str, type(None))) for t in tools):
        raise MalformedAnswer("a load's tools are not a list of tools (name, description, inputSchema)")
    methods = result.get("methods") or {}
    if not isinstance(methods, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in methods.items()):
        raise MalformedAnswer("a load's methods are not names of HTTP methods")
    reasons = result.get("fit_reasons") or []
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise MalformedAnswer("a load's fit reasons are not texts")
    built = result.get("template_built_at")
    check_size(result, "a load's answer")
    return {"tools": tools, "shared": result.get("shared") is True, "fit_reasons": reasons, "methods": methods,
            "template_built_at": built if isinstance(built, (int, float)) and not isinstance(built, bool) else None}


def call_answer(result: Any) -> dict[str, Any]:
    """The fields of a ``call`` answer as the parent may keep them. The worker is where the environment's code runs,
    so everything it sends is checked here, never trusted: ``MalformedAnswer`` for a field of the wrong type; the
    traceback cut to ``TRACEBACK_LIMIT`` and the error kind to ``ERROR_KIND_LIMIT`` characters (the worker cuts them
    itself, but its code can be replaced by the environment's: a forged 15 MB traceback per call went whole into
    ``events.jsonl`` and ``calls.jsonl``)."""
    if not isinstance(result, dict):
        raise MalformedAnswer(f"a call's result is a {type(result).__name__}, not an object")
    out: dict[str, Any] = {}

    def typed(name: str, kinds: tuple[type, ...], default: Any, optional: bool = False) -> Any:
        value = result.get(name, default)
        if (value is None and optional) or (isinstance(value, kinds) and not (
                isinstance(value, bool) and bool not in kinds)):
            return value
        raise MalformedAnswer(f"a call's {name!r} is a {type(value).__name__}")

    out["text"] = typed("text", (str,), None)
    out["is_error"] = typed("is_error", (bool,), False)
    out["status"] = typed("status", (int,), None, optional=True)
    kind = typed("error_kind", (str,), None, optional=True)
    out["error_kind"] = kind[:ERROR_KIND_LIMIT] if kind is not None else None
    out["elapsed_ms"] = _milliseconds(typed("elapsed_ms", (int, float), 0.0))
    trace = typed("traceback", (str,), None, optional=True)
    out["traceback"] = clip(trace, TRACEBACK_LIMIT) if trace is not None else None
    out["truncated"] = typed("truncated", (bool,), False)
    out["original_bytes"] = typed("original_bytes", (int,), None, optional=True)
    out["stuck"] = typed("stuck", (bool,), False)
    out["left_running"] = typed("left_running", (int,), 0)
    return out


def _milliseconds(value: int | float) -> float:
    """A call's duration as a float (0.0 for NaN or an infinity); ``MalformedAnswer`` for an integer no float holds
    (a 400-digit one, which JSON carries: ``float()`` raised ``OverflowError`` in the parent, past every handler of a
    malformed answer, and ended ``awm env test`` over a whole data directory)."""
    try:
        number = float(value)
    except OverflowError:
        raise MalformedAnswer("a call's 'elapsed_ms' is out of range") from None
    return number if math.isfinite(number) else 0.0


def result_of(message: dict[str, Any]) -> dict[str, Any]:
    """The result of an answer, or WorkerError carrying the worker's kind, text and traceback."""
    if not message.get("ok"):
        raise WorkerError(message.get("error", "worker error"), message.get("kind", "worker"),
                          message.get("traceback"))
    return message["result"]
