"""An episode over a task's MCP servers: the rollout's ``EpisodeHandle`` backed by one MCP client per server.

Each server is started through awm's sandbox (``Sandbox(SandboxPolicy(network=True, env=…))``) with only the
variables it declares on top of the sandbox's allow-list: a stdio server is the sandboxed command talking
over its pipes; a streamable-HTTP server is reached at its ``url`` (when it also has a ``command``, that command
is started in the sandbox first and awaited on its port). The model sees every server's tools named
``server__tool`` (MCP-Universe's function-call naming) and the episode routes each call to its server. There is
no database: ``initial_db`` / ``final_db`` are paths that do not exist, ``reset`` is not supported.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from awm_engine.bench.mcp_universe.servers import ServerConfigError, ServerDef
from awm_engine.runtime.episode import EnvLoadError, ToolResult
from awm_engine.runtime.mcp_client import _error_kind_of
from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy, kill_tree

SEP = "__"
NO_AS_LIMIT = ("npx", "node", "docker", "uvx")  # V8 and the docker client reserve more address space than 2 GB


def tool_name(server: str, tool: str) -> str:
    return f"{server}{SEP}{tool}"


def _policy(server: ServerDef, writable: list[str]) -> SandboxPolicy:
    command = os.path.basename(server.command or "")
    return SandboxPolicy(writable=writable, readable=_server_paths(server), network=True, env=dict(server.env),
                         max_procs=256, memory_mb=None if command in NO_AS_LIMIT else 2048)


def _server_paths(server: ServerDef) -> list[str]:
    """What a server reads besides the system: its working directory, and the directory of every argument (and the
    command) that names an existing path (a script, its package)."""
    paths = [server.cwd] if server.cwd else []
    for arg in [server.command or "", *server.args]:
        if isinstance(arg, str) and arg.startswith("/") or os.path.exists(str(arg)):
            real = os.path.realpath(str(arg))
            if os.path.isfile(real):
                paths.append(os.path.dirname(real))
            elif os.path.isdir(real):
                paths.append(real)
    return [p for p in paths if p and os.path.exists(p) and not p.startswith("/usr")]


class ServerConnection:
    """One server of the episode: its sandbox, its MCP client, its tools."""

    def __init__(self, server: ServerDef, log_dir: Path):
        self.server = server
        self.log_dir = log_dir
        self.sandbox: Sandbox | None = None
        self.proc = None  # an HTTP server's own process
        self.client = None
        self.tools: list[dict[str, Any]] = []

    async def start(self, timeout: float = 60.0) -> None:
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

        s = self.server
        s.check_startable()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        writable = [str(self.log_dir)]
        if s.transport == "stdio":
            command = shutil.which(s.command) or s.command
            self.sandbox = Sandbox(_policy(s, writable), f"mcp_{s.name}")
            argv, env = self.sandbox.command([command, *s.args], cwd=s.cwd or None)
            transport = StdioTransport(argv[0], argv[1:], env=env, cwd="/",
                                       keep_alive=False, log_file=self.log_dir / f"{s.name}.log")
        else:
            if s.command:
                await self._start_http_process(timeout)
            transport = StreamableHttpTransport(s.url, headers=s.headers or None)
        self.client = Client(transport, timeout=timeout)
        await asyncio.wait_for(self.client.__aenter__(), timeout)
        self.tools = [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
                      for t in await self.client.list_tools()]

    async def _start_http_process(self, timeout: float) -> None:
        import subprocess

        s = self.server
        self.sandbox = Sandbox(_policy(s, [str(self.log_dir)]), f"mcp_{s.name}")
        log = open(self.log_dir / f"{s.name}.log", "ab")
        self.proc = self.sandbox.popen([shutil.which(s.command) or s.command, *s.args], cwd=s.cwd or None,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        parsed = urlparse(s.url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerConfigError(f"server {s.name} exited with {self.proc.returncode}")
            with socket.socket() as sock:
                if sock.connect_ex((parsed.hostname or "127.0.0.1", port)) == 0:
                    return
            await asyncio.sleep(0.1)
        raise ServerConfigError(f"server {s.name} did not listen on {s.url} within {timeout:.0f}s")

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float | None) -> ToolResult:
        started = time.perf_counter()
        try:
            result = await self.client.call_tool_mcp(tool, arguments, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the server or the connection failed
            return ToolResult(f"Error calling {tool}: {type(exc).__name__}: {exc}", True, error_kind="internal",
                              elapsed_ms=(time.perf_counter() - started) * 1000)
        text = "\n".join(getattr(c, "text", None) or getattr(getattr(c, "resource", None), "text", None) or ""
                         for c in result.content)
        kind = _error_kind_of(text) if result.is_error else None
        return ToolResult(text, bool(result.is_error), None, kind, (time.perf_counter() - started) * 1000)

    async def close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            try:
                await client.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - the server may already be gone
                pass
        if self.proc is not None:
            await asyncio.to_thread(kill_tree, self.proc)
        if self.sandbox is not None:
            self.sandbox.cleanup()


class McpServersEpisode:
    """``runtime.episode.EpisodeHandle`` over a task's MCP servers (see the module docstring)."""

    def __init__(self, servers: list[ServerDef], run_dir: Path | str):
        self.run_dir = Path(run_dir)
        self.id = f"mcp-universe:{','.join(s.name for s in servers)}"
        self.initial_db = self.run_dir / "initial.db"
        self.final_db = self.run_dir / "final.db"
        self.connections = {s.name: ServerConnection(s, self.run_dir / "servers") for s in servers}
        self.tools: list[dict[str, Any]] = []
        self._routes: dict[str, tuple[str, str]] = {}

    @classmethod
    async def start(cls, servers: list[ServerDef], run_dir: Path | str, timeout: float = 60.0) -> "McpServersEpisode":
        episode = cls(servers, run_dir)
        try:
            for name, conn in episode.connections.items():
                try:
                    await conn.start(timeout)
                except ServerConfigError as exc:
                    raise EnvLoadError(str(exc), name) from None
                except Exception as exc:  # noqa: BLE001 - whatever stops a server from starting
                    raise EnvLoadError(f"server {name} could not start: {type(exc).__name__}: {exc}", name) from None
                for t in conn.tools:
                    full = tool_name(name, t["name"])
                    episode._routes[full] = (name, t["name"])
                    episode.tools.append({**t, "name": full})
        except BaseException:
            await episode.close()
            raise
        return episode

    def list_tools(self) -> list[dict[str, Any]]:
        return self.tools

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = None, on_timeout: str = "interrupt") -> ToolResult:
        route = self._routes.get(name)
        if route is None:
            return ToolResult(f"Unknown tool: {name}", True, error_kind="unknown_tool")
        server, tool = route
        return await self.connections[server].call(tool, arguments or {}, timeout)

    async def reset(self) -> None:
        raise NotImplementedError("MCP-Universe servers hold live state: start a new episode")

    def snapshot(self, dest: Path | str) -> Path:
        raise NotImplementedError("MCP-Universe episodes have no database")

    async def close(self) -> None:
        for conn in self.connections.values():
            await conn.close()
