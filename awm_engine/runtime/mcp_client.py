"""Episodes reached over MCP: start ``awm env serve`` for a task and talk to it like any MCP client.

``McpEpisode`` has the episode interface the rollout uses (``list_tools``, ``call_tool``,
``run_dir``), so an agent can act on an environment through a real MCP server — the TUI's live
rollouts do, so a user can also point MCP Inspector at the same server while watching.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from awm_engine.data.paths import cache_dir
from awm_engine.db.templates import MAX_AGE_ENV
from awm_engine.runtime.episode import EnvLoadError, ToolResult, snapshot_database
from awm_engine.runtime.ports import free_port
from awm_engine.sandbox.environment import scrubbed_env
from awm_engine.sandbox.launcher import PACKAGE_PARENT


class ServedEnvironment:
    """An ``awm env serve`` subprocess for one episode, with its session directory."""

    def __init__(self, scenario: str, run_dir: Path | str, data_dirs: list[str] | None = None,
                 task_idx: int | None = None, call_timeout: float | None = None, schema_check: str | None = None):
        self.scenario = scenario
        self.schema_check = schema_check
        self.run_dir = Path(run_dir).resolve()
        self.data_dirs = data_dirs or []
        self.task_idx = task_idx
        self.call_timeout = call_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.token = secrets.token_urlsafe(24)  # only this process's client may drive the episode
        self.proc: subprocess.Popen | None = None

    async def start(self, timeout: float = 60.0) -> "ServedEnvironment":
        args = [sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario", self.scenario,
                "--port", str(self.port), "--out", str(self.run_dir), "--exit-with-parent"]
        for d in self.data_dirs:
            args += ["--data", str(d)]
        if self.task_idx is not None:
            args += ["--task", str(self.task_idx)]
        if self.call_timeout is not None:
            args += ["--timeout", str(self.call_timeout)]
        if self.schema_check is not None:
            args += ["--protocol", self.schema_check]
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.run_dir / "serve.log", "ab")
        # the server is awm's own code, started with no secrets (the scrubbed environment); the environment's code
        # runs in the server's sandboxed worker, one scenario per sandbox, as everywhere
        # AWM_SERVE_EXTRAS: error kinds and tracebacks in _meta, for awm's own front ends (no other client gets them)
        env = scrubbed_env({"AWM_SERVE_TOKEN": self.token, "AWM_CACHE_DIR": str(cache_dir()),
                            "AWM_SERVE_EXTRAS": "1",
                            "PYTHONPATH": os.pathsep.join(x for x in (PACKAGE_PARENT, os.environ.get("PYTHONPATH"))
                                                          if x)})
        for name in (MAX_AGE_ENV, "AWM_UNSAFE_NO_SANDBOX", "AWM_SANDBOX_UID", "AWM_CONFIG", "AWM_WARM", "AWM_WARM_DIR",
                     "AWM_WARM_IDLE"):
            if name in os.environ:
                env[name] = os.environ[name]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.run_dir / "serve.log").read_text(errors="replace")[-800:]
                raise RuntimeError(f"awm env serve exited with {self.proc.returncode}: {tail}")
            if (self.run_dir / "session.json").exists():
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", self.port)) == 0:
                        return self
            await asyncio.sleep(0.1)
        self.stop()
        raise RuntimeError(f"awm env serve did not start within {timeout:.0f}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class McpEpisode:
    """The episode interface (``episode.EpisodeHandle``) over one persistent MCP session.

    With ``server`` (an ``awm env serve`` this episode started), ``reset`` starts that server again on a
    fresh copy of the databases and ``close`` stops it; a server someone else runs cannot be reset.
    """

    def __init__(self, url: str, run_dir: Path | str, server: "ServedEnvironment | None" = None):
        self.url = url
        self.id = url
        self.run_dir = Path(run_dir)
        self.initial_db = self.run_dir / "initial.db"
        self.final_db = self.run_dir / "final.db"
        self.tools: list[dict[str, Any]] = []
        self.server = server
        self.template: dict[str, Any] | None = None  # the server's session.json says when its template was built
        self._client = None

    @classmethod
    async def start(cls, scenario: str, run_dir: Path | str, data_dirs: list[str] | None = None,
                    task_idx: int | None = None, call_timeout: float | None = None,
                    schema_check: str | None = None) -> "McpEpisode":
        """Start ``awm env serve`` for this episode and connect to it (EnvLoadError if it cannot start);
        ``schema_check`` is the server's ``--protocol``."""
        server = ServedEnvironment(scenario, run_dir, data_dirs, task_idx, call_timeout, schema_check)
        try:
            await server.start()
        except RuntimeError as exc:
            raise EnvLoadError(f"{scenario}: {exc}", scenario) from None
        episode = cls(server.url, server.run_dir, server)
        try:
            return await episode.connect()
        except BaseException:
            await asyncio.to_thread(server.stop)
            raise

    async def connect(self) -> "McpEpisode":
        from fastmcp import Client

        token = self.server.token if self.server is not None else None
        self._client = Client(self.url, timeout=120, auth=token)
        await self._client.__aenter__()
        self.tools = [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
                      for t in await self._client.list_tools()]
        try:
            session = load_session(self.run_dir)
        except (OSError, ValueError):
            session = {}
        session = session if isinstance(session, dict) else {}
        self.template = session.get("template") if isinstance(session.get("template"), dict) else None
        if self.server is not None:  # while it runs, the databases live in the server's worker directory
            for name in ("initial_db", "final_db"):
                if isinstance(session.get(name), str):
                    setattr(self, name, Path(session[name]))
        return self

    def list_tools(self) -> list[dict[str, Any]]:
        return self.tools

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = None, on_timeout: str = "interrupt") -> ToolResult:
        started = time.perf_counter()
        try:
            result = await self._client.call_tool_mcp(name, arguments or {})
        except Exception as exc:  # noqa: BLE001 - the server or the connection failed
            return ToolResult(f"Error calling {name}: {type(exc).__name__}: {exc}", True, error_kind="internal")
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        meta = getattr(result, "meta", None)
        awm = meta.get("awm") if isinstance(meta, dict) else None  # what an awm server adds to an error result
        awm = awm if isinstance(awm, dict) else {}
        kind = status = trace = None
        if result.is_error:
            kind = awm.get("error_kind") if isinstance(awm.get("error_kind"), str) else _error_kind_of(text)
            status = awm.get("status") if isinstance(awm.get("status"), int) else None
            trace = awm.get("traceback") if isinstance(awm.get("traceback"), str) else None
        original = awm.get("original_bytes")  # an awm server cut the text at the result cap (runtime/caps.py)
        cut = awm.get("truncated") is True and isinstance(original, int) and not isinstance(original, bool)
        return ToolResult(text, bool(result.is_error), status, kind, (time.perf_counter() - started) * 1000, trace,
                          cut, original if cut else None)

    async def reset(self) -> None:
        if self.server is None:
            raise NotImplementedError("MCP has no reset: this server was started elsewhere; start a new episode")
        await self._disconnect()
        await asyncio.to_thread(self.server.stop)
        for db in (self.initial_db, self.final_db, self.run_dir / "session.json"):
            db.unlink(missing_ok=True)
        await self.server.start()
        await self.connect()

    def snapshot(self, dest: Path | str) -> Path:
        return snapshot_database(self.final_db, dest)

    async def _disconnect(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - the server may already be gone
                pass

    async def close(self) -> None:
        await self._disconnect()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)  # the server moves the databases into run_dir as it stops
            self.initial_db, self.final_db = self.run_dir / "initial.db", self.run_dir / "final.db"


def _error_kind_of(text: str) -> str:
    """The error kind of an error result from a server that does not say (not an awm server)."""
    return ("unknown_tool" if text.startswith("Unknown tool:") else
            "invalid_arguments" if text.startswith("Input validation error") else
            "http_5xx" if "Status code: 5" in text else
            "http_4xx" if "Status code: 4" in text else
            "timeout" if "timed out" in text else "internal")


def load_session(run_dir: Path | str) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "session.json").read_text())
