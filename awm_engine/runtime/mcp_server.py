"""The MCP façade: one episode served over streamable HTTP (127.0.0.1 only) or stdio, with fastmcp.

Tools are the environment's routes with fastapi-mcp's names, descriptions and input schemas; a call
goes to the episode (hosted by a worker process) and returns exactly the text the in-process path
returns, with ``isError`` set for rejected calls and HTTP errors. What an MCP client sees is what the reference
server (fastapi-mcp) sends: the text, ``isError``, nothing else — the traceback behind an error goes to
``calls.jsonl`` and to the worker's log (``server.log``), never to the client. ``extras`` (``AWM_SERVE_EXTRAS=1``;
awm's own client sets it, for its front ends) adds ``_meta.awm`` to error and cut results: the error kind, HTTP
status and traceback, and the size of a text cut at the result cap (``runtime/caps.py``; the cut also says so in
its marker and in ``calls.jsonl``, which keeps no result text).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware
from fastmcp.tools.base import Tool
from fastmcp.tools.base import ToolResult as McpToolResult
from mcp.types import TextContent
from pydantic import PrivateAttr

from awm_engine.runtime import caps
from awm_engine.runtime.http_guard import LoopbackGuard

HOST = "127.0.0.1"
MCP_PATH = "/mcp"


class EpisodeTool(Tool):
    """One environment tool; ``run`` forwards the raw arguments to the episode."""

    _episode: Any = PrivateAttr(default=None)
    _log: Any = PrivateAttr(default=None)
    _result_cap: int | None = PrivateAttr(default=None)
    _extras: bool = PrivateAttr(default=False)

    def to_mcp_tool(self, **overrides: Any) -> Any:
        """As fastapi-mcp lists a tool: name, description and input schema — no title, no ``_meta``."""
        return super().to_mcp_tool(**{"title": None, "_meta": None, **overrides})

    async def run(self, arguments: dict[str, Any]) -> McpToolResult:
        result = await self._episode.call_tool(self.name, arguments)
        if self._result_cap is not None:  # the worker cut at its own cap already; this server's may be lower
            result = caps.cap_result(result, self._result_cap)
        if self._log is not None:
            self._log({"time": time.time(), "tool": self.name, "arguments": arguments, "is_error": result.is_error,
                       "status": result.status, "error_kind": result.error_kind,
                       "elapsed_ms": round(result.elapsed_ms, 3), "traceback": result.traceback,
                       **({"truncated": True, "original_bytes": result.original_bytes}
                          if getattr(result, "truncated", False) else {})})
        return McpToolResult(content=[TextContent(type="text", text=result.text)], is_error=result.is_error,
                             meta=error_meta(result) if self._extras else None)


def error_meta(result: Any) -> dict[str, Any] | None:
    """``_meta`` of an error result: its kind, HTTP status and traceback for awm's own MCP client (the text,
    which is all a model sees, stays exactly the reference's); of a result cut at the result cap: its size before."""
    cut = {"truncated": True, "original_bytes": result.original_bytes} if getattr(result, "truncated", False) else {}
    if not result.is_error:
        return {"awm": cut} if cut else None
    return {"awm": {"error_kind": result.error_kind, "status": result.status, "traceback": result.traceback, **cut}}


class UnknownToolAsResult(Middleware):
    """An unknown tool name gets the episode's own answer (``Unknown tool: <name>``, isError) rather than
    fastmcp's protocol error, so MCP and in-process calls read the same."""

    def __init__(self, episode: Any, names: set[str]):
        self.episode = episode
        self.names = names

    async def on_call_tool(self, context, call_next):
        name = context.message.name
        if name in self.names:
            return await call_next(context)
        result = await self.episode.call_tool(name, context.message.arguments or {})
        return McpToolResult(content=[TextContent(type="text", text=result.text)], is_error=True)


EXTRAS_ENV = "AWM_SERVE_EXTRAS"
# the reference server's serverInfo: FastApiMCP(app) is named after the app's title, its version is its mcp package's
REFERENCE_MCP_VERSION = "1.26.0"
FASTAPI_DEFAULT_TITLE = "FastAPI"


def app_title(code: str | None) -> str:
    """The ``title=`` of the environment code's ``FastAPI(...)`` (a string literal), else FastAPI's default: the name
    the reference's ``FastApiMCP(app)`` gives its server. Read from the source, never by running it."""
    import ast

    try:
        tree = ast.parse(code or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return FASTAPI_DEFAULT_TITLE
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "FastAPI":
            for kw in node.keywords:
                if kw.arg == "title" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
            return FASTAPI_DEFAULT_TITLE
    return FASTAPI_DEFAULT_TITLE


def extras_enabled() -> bool:
    return os.environ.get(EXTRAS_ENV, "") == "1"


def build_server(episode: Any, name: str, log_path: Path | None = None, result_cap: int | None = None,
                 extras: bool | None = None) -> FastMCP:
    """``result_cap``: cut every result's text at this many bytes (``runtime/caps.py``; None: as the episode
    returns it). ``extras`` (default: ``AWM_SERVE_EXTRAS=1``): ``_meta.awm`` on error and cut results."""
    extras = extras_enabled() if extras is None else extras
    scenario = getattr(episode, "scenario", None)
    if scenario is not None and hasattr(scenario, "code"):  # the reference's name and version, no instructions
        name = app_title(scenario.code)
    server = FastMCP(name=name, version=REFERENCE_MCP_VERSION)
    server.add_middleware(UnknownToolAsResult(episode, {t["name"] for t in episode.list_tools()}))
    log_file = open(log_path, "a", encoding="utf-8") if log_path else None

    def log(entry: dict[str, Any]) -> None:
        log_file.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
        log_file.flush()

    for spec in episode.list_tools():
        tool = EpisodeTool(name=spec["name"], description=spec["description"], parameters=spec["inputSchema"])
        tool._episode = episode
        tool._log = log if log_file else None
        tool._result_cap = result_cap
        tool._extras = extras
        server.add_tool(tool)
    return server


async def serve_http(server: FastMCP, port: int, token: str | None = None) -> None:
    """Streamable HTTP on 127.0.0.1 only; a foreign Host or Origin is refused (DNS rebinding), and with
    ``token`` every request needs ``Authorization: Bearer <token>``."""
    from starlette.middleware import Middleware as AsgiMiddleware

    await server.run_http_async(transport="http", host=HOST, port=port, path=MCP_PATH, show_banner=False,
                                log_level="warning", host_origin_protection=True, json_response=True,
                                middleware=[AsgiMiddleware(LoopbackGuard, port=port, token=token)])


async def serve_stdio(server: FastMCP) -> None:
    await server.run_stdio_async(show_banner=False)


async def list_remote_tools(url: str, timeout: float = 10.0, token: str | None = None) -> list[dict[str, Any]]:
    """``tools/list`` on any MCP server (streamable HTTP URL), with a bearer token when given."""
    from fastmcp import Client

    async with Client(url, timeout=timeout, auth=token) as client:
        tools = await client.list_tools()
    return [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema} for t in tools]
