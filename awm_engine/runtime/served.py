"""One episode served over MCP from inside its worker: the ``WireServer`` whose tool calls run the episode's, and
the record of each call sent to the parent (which writes ``calls.jsonl``; the traceback goes to the worker's log)."""
from __future__ import annotations

import asyncio
import json
import time
import traceback
from typing import Any, Callable

from awm_engine.runtime.episode import ToolResult
from awm_engine.runtime.mcp_http import Guard
from awm_engine.runtime.mcp_wire import WireServer

RESTARTED = " (the environment worker was restarted)"


def error_meta(result: Any) -> dict[str, Any] | None:
    """``_meta`` of an error result: its kind, HTTP status and traceback for awm's own MCP client (the text, which
    is all a model sees, stays exactly the reference's); of a result cut at the result cap: its size before."""
    cut = {"truncated": True, "original_bytes": result.original_bytes} if getattr(result, "truncated", False) else {}
    if not result.is_error:
        return {"awm": cut} if cut else None
    return {"awm": {"error_kind": result.error_kind, "status": result.status, "traceback": result.traceback, **cut}}


RECORD_LIMITS = {"tool": 4 << 10, "arguments": 256 << 10}  # characters of their JSON a call record keeps whole


def call_record(tool: str, arguments: Any, result: Any) -> dict[str, Any]:
    """One line of ``calls.jsonl`` (no result text: it can be megabytes; the episode's databases tell the rest). A
    tool name or arguments longer than ``RECORD_LIMITS`` (a client may send 16 MiB of them) are recorded by their
    size and beginning (``<field>_cut``): a record must stay far within the worker protocol's line, whose excess
    would get this worker replaced."""
    record: dict[str, Any] = {"time": time.time()}
    for field, value in (("tool", tool), ("arguments", arguments)):
        text = json.dumps(value, ensure_ascii=False, default=str)
        if len(text) <= RECORD_LIMITS[field]:
            record[field] = value
        else:
            record[field] = None
            record[f"{field}_cut"] = {"characters": len(text), "start": text[:1024]}
    return {**record, "is_error": result.is_error, "status": result.status, "error_kind": result.error_kind,
            "elapsed_ms": round(result.elapsed_ms, 3), "traceback": result.traceback,
            **({"truncated": True, "original_bytes": result.original_bytes}
               if getattr(result, "truncated", False) else {})}


def episode_server(episode: Any, spec: dict[str, Any], call: Callable, emit: Callable) -> tuple[WireServer, Guard]:
    """``spec``: the serve request (``name``, ``timeout``, ``result_cap``, ``extras``, ``port``, ``token``)."""
    extras = bool(spec.get("extras"))

    async def run(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await call(episode, tool, arguments, spec.get("timeout"), spec.get("result_cap"), inline=True)
        except Exception as exc:  # noqa: BLE001 - as the reference's MCP server: what a call raised is its error result
            result = ToolResult(str(exc), True, error_kind="internal", traceback=traceback.format_exc())
        text = result.text
        if getattr(episode, "stuck", False):  # a handler would not stop: the parent replaces this worker
            text += RESTARTED
        event = {"event": "call", "record": call_record(tool, arguments, result),
                 **({"stuck": True} if getattr(episode, "stuck", False) else {})}
        asyncio.get_running_loop().call_soon(emit, event)  # after the answer is on its way: the client first
        return {"text": text, "is_error": result.is_error, "meta": error_meta(result) if extras else None}

    server = WireServer(spec.get("name") or "FastAPI", episode.list_tools(), run)
    return server, Guard(spec.get("port"), spec.get("token"))
