"""The worker protocol: JSON objects, one per line, over the socket between ``EnvPool`` and a worker.

Requests: ``{"id": N, "op": OP, ...fields}`` with OP one of ``OPS``; ``{"op": "shutdown"}`` has no id
and no answer. Answers: ``{"id": N, "ok": true, "result": {...}}`` or ``{"id": N, "ok": false,
"kind": KIND, "error": TEXT, "traceback": TEXT}``. While an episode is served over MCP (op ``serve``) the worker
also sends an event, without id, after each call: ``{"event": "call", "record": {...}}`` (``"stuck": true`` when
its handler would not stop). Both sides use only the functions below.
"""
from __future__ import annotations

import json
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


def _clip(text: str) -> str:
    """An error's text short enough for one line whatever it says (code can raise with a message of any size)."""
    if len(text) <= ERROR_TEXT_LIMIT:
        return text
    half = ERROR_TEXT_LIMIT // 2
    return f"{text[:half]}\n… ({len(text) - ERROR_TEXT_LIMIT:,} characters left out) …\n{text[-half:]}"


def result_of(message: dict[str, Any]) -> dict[str, Any]:
    """The result of an answer, or WorkerError carrying the worker's kind, text and traceback."""
    if not message.get("ok"):
        raise WorkerError(message.get("error", "worker error"), message.get("kind", "worker"),
                          message.get("traceback"))
    return message["result"]
