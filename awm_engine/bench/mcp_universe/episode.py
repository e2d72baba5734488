"""An episode over a task's MCP servers: the rollout's ``EpisodeHandle`` backed by one MCP client per server.

Each server is started through awm's sandbox (``Sandbox(SandboxPolicy(network=True, env=…))``) with only the
variables it declares on top of the sandbox's allow-list: a stdio server is the sandboxed command talking
over its pipes; a streamable-HTTP server is reached at its ``url`` (when it also has a ``command``, that command
is started in the sandbox first and awaited on its port). A server writes only its private ``/tmp``: nothing of
the run directory, where awm writes its log (``servers/<name>.log``, opened without following a symlink). Its pipes
go through awm's relay (``relay.py``): a message over ``MESSAGE_LIMIT`` stops it, its log keeps ``LOG_LIMIT``.
Besides the system it reads the paths its command line and ``cwd`` name (``server_paths``), unless one is in a protected
place — ``/`` or a top-level folder, the host's ``/etc``, ``/proc``, ``/sys``, ``/dev``, ``/run``, ``/var``,
``/boot``, a home directory or a hidden entry of one (``~/.ssh``, ``~/.config`` …), awm's configuration and cache,
awm's and other sandboxes' temporary directories: then the server is not started and its tasks error saying so.
A streamable-HTTP server's responses are read up to ``RESPONSE_LIMIT``. The model sees every server's tools named
``server__tool`` (MCP-Universe's function-call naming) and the episode routes each call to its server. There is
no database: ``initial_db`` / ``final_db`` are paths that do not exist, ``reset`` is not supported.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from awm_engine.bench.mcp_universe.servers import ServerConfigError, ServerDef
from awm_engine.runtime.episode import EnvLoadError, ToolResult
from awm_engine.runtime.mcp_client import _error_kind_of
from awm_engine.sandbox import safe_fs
from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy, kill_tree

SEP = "__"
NO_AS_LIMIT = ("npx", "node", "docker", "uvx")  # V8 and the docker client reserve more address space than 2 GB
RELAY = str(Path(__file__).with_name("relay.py"))
MESSAGE_LIMIT = 16 << 20  # the longest MCP message a stdio server may send awm (a page snapshot is a few MB;
# the MCP client copies a line it is reading for every piece that arrives: 16 MB costs seconds, 64 MB a minute)
LOG_LIMIT = 64 << 20  # what a server's log may take on the host's disk
RESPONSE_LIMIT = 64 << 20  # the longest HTTP response body awm reads from a streamable-HTTP server


def bounded_http_client(**kwargs: Any):
    """The MCP client's HTTP client for a streamable-HTTP server (fastmcp's ``httpx_client_factory``): every
    response body is read up to ``RESPONSE_LIMIT`` bytes — a JSON response is read whole into awm's memory, and a
    server sending one without end would take all of it."""
    import httpx2

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, inner: Any):
            self.inner = inner

        async def __aiter__(self):
            seen = 0
            async for chunk in self.inner:
                seen += len(chunk)
                if seen > RESPONSE_LIMIT:
                    raise httpx2.ReadError(f"the server's response is over {RESPONSE_LIMIT} bytes: not read")
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            response.stream = Capped(response.stream)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    kwargs.setdefault("timeout", httpx2.Timeout(30.0, read=300.0))  # the MCP client's own defaults
    return httpx2.AsyncClient(transport=Transport(), **kwargs)


def _relayed(argv: list[str], messages: bool) -> list[str]:
    """``argv`` (the sandboxed server) behind awm's relay (``relay.py``): its messages and its log bounded."""
    return [sys.executable, "-I", RELAY, str(MESSAGE_LIMIT if messages else 0), str(LOG_LIMIT), "--", *argv]


def tool_name(server: str, tool: str) -> str:
    return f"{server}{SEP}{tool}"


def _policy(server: ServerDef) -> SandboxPolicy:
    """The server's sandbox: network, and a TCP listener only on its own URL's port (an HTTP server it starts)."""
    command = os.path.basename(server.command or "")
    return SandboxPolicy(writable=[], readable=server_paths(server), network=True, env=dict(server.env),
                         max_procs=256, memory_mb=None if command in NO_AS_LIMIT else 2048,
                         bind_ports=[_url_port(server.url)] if server.transport == "http" and server.url else [])


def _url_port(url: str) -> int:
    parsed = urlparse(url)
    try:
        port = parsed.port
    except ValueError:  # not a port: the server cannot be reached there anyway
        return 0
    return port or (443 if parsed.scheme == "https" else 80)


SYSTEM_STATE = ("/etc", "/proc", "/sys", "/dev", "/run", "/var", "/boot")


def _inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


def _homes() -> set[str]:
    """Home directories: awm's user's, ``$HOME``'s, and those of the host's login users (uid 0 and ≥ 1000)."""
    import pwd

    homes = {os.path.expanduser("~"), os.environ.get("HOME") or ""}
    try:
        homes |= {p.pw_dir for p in pwd.getpwall() if p.pw_uid == 0 or 1000 <= p.pw_uid < 65534}
    except OSError:
        pass
    return {os.path.realpath(h) for h in homes if h and h != "/" and os.path.isabs(h)}


def protected(real: str) -> str | None:
    """Why a server's sandbox may not be shown ``real`` (a resolved path), or None when it may."""
    import tempfile

    from awm_engine.agent.endpoints import config_path
    from awm_engine.data.paths import cache_dir
    from awm_engine.sandbox.launcher import sandbox_ids

    if real.count("/") <= 1:
        return "the filesystem root or a top-level folder"
    for root in SYSTEM_STATE:
        if _inside(real, root):
            return f"the host's {root}"
    for home in _homes():
        if _inside(home, real):
            return f"the home directory {home}" + ("" if home == real else " is inside it")
        if real.startswith(home.rstrip("/") + "/") and real[len(home.rstrip("/")) + 1:].startswith("."):
            return f"a hidden entry of the home directory {home} (where keys and configuration live)"
    for own, what in ((os.path.realpath(config_path().parent), "awm's configuration"),
                      (os.path.realpath(cache_dir()), "awm's cache")):
        if _inside(real, own) or _inside(own, real):
            return what
    temp = os.path.realpath(tempfile.gettempdir())
    if real.startswith(temp + "/") and real[len(temp) + 1:].startswith("awm"):
        return "awm's own temporary directories"
    uid = sandbox_ids()[0]
    if uid != os.getuid():
        probe = real
        while probe not in ("/", ""):
            try:
                if os.stat(probe).st_uid == uid:
                    return "another sandbox's directory"
            except OSError:
                pass
            probe = os.path.dirname(probe)
    return None


def server_paths(server: ServerDef) -> list[str]:
    """What a server reads besides the system: its working directory, and the directory of every argument (and the
    command) that names an existing path (a script, its package). ``ServerConfigError`` when one is protected."""
    named = [("cwd", server.cwd)] if server.cwd else []
    for arg in [server.command or "", *server.args]:
        if isinstance(arg, str) and arg.startswith("/") or os.path.exists(str(arg)):
            named.append(("command line", str(arg)))
    command = server.command or ""
    link = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(command))), os.path.basename(command))
    if command and os.path.islink(link):  # a venv's bin/python -> the runtime: the link must be there, and its venv
        folder = os.path.dirname(link)
        venv = os.path.dirname(folder)
        named.append(("command line", venv if os.path.isfile(os.path.join(venv, "pyvenv.cfg")) else folder))
    from awm_engine.sandbox import view

    seen = ["/usr", *view.python_paths(), view.PACKAGE_DIR]  # in every sandbox's view already
    paths = []
    for where, given in named:
        real = os.path.realpath(given)
        if not os.path.exists(real) or any(_inside(real, root) for root in seen):
            continue
        bound = real if where == "cwd" or os.path.isdir(real) else os.path.dirname(real)
        why = protected(real) or protected(bound)
        if why:
            raise ServerConfigError(f"server {server.name}: its {where} names {real}, in a protected place ({why}): "
                                    "awm never shows it to a server's sandbox")
        paths.append(bound)
    return paths


def _open_log(log_dir: Path, name: str):
    """The server's log, appended to: a regular file of the run directory, never through a symlink."""
    dfd = safe_fs.open_dir(log_dir)
    try:
        try:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         0o644, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (40, 6):  # ELOOP: a symlink; ENXIO: a socket
                raise safe_fs.UnsafeEntry(f"{log_dir / name} is a symlink or special file (refused)") from None
            raise
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise safe_fs.UnsafeEntry(f"{log_dir / name} is not a regular file with one link (refused)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a")


class ServerConnection:
    """One server of the episode: its sandbox, its MCP client, its tools."""

    def __init__(self, server: ServerDef, log_dir: Path):
        self.server = server
        self.log_dir = log_dir
        self.sandbox: Sandbox | None = None
        self.proc = None  # an HTTP server's own process
        self.log = None  # a stdio server's log (its stderr), open while it runs
        self.client = None
        self.tools: list[dict[str, Any]] = []

    async def start(self, timeout: float = 60.0) -> None:
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

        s = self.server
        s.check_startable()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if s.transport == "stdio":
            command = shutil.which(s.command) or s.command
            self.sandbox = Sandbox(_policy(s), f"mcp_{s.name}")
            argv, env = self.sandbox.command([command, *s.args], cwd=s.cwd or None)
            argv = _relayed(argv, messages=True)
            self.log = _open_log(self.log_dir, f"{s.name}.log")
            transport = StdioTransport(argv[0], argv[1:], env=env, cwd="/", keep_alive=False, log_file=self.log)
        else:
            if s.command:
                await self._start_http_process(timeout)
            transport = StreamableHttpTransport(s.url, headers=s.headers or None,
                                                httpx_client_factory=bounded_http_client)
        self.client = Client(transport, timeout=timeout)
        await asyncio.wait_for(self.client.__aenter__(), timeout)
        self.tools = [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
                      for t in await self.client.list_tools()]

    async def _start_http_process(self, timeout: float) -> None:
        import subprocess

        s = self.server
        self.sandbox = Sandbox(_policy(s), f"mcp_{s.name}")
        log = _open_log(self.log_dir, f"{s.name}.log")
        try:
            argv, env = self.sandbox.command([shutil.which(s.command) or s.command, *s.args], cwd=s.cwd or None)
            self.proc = self.sandbox.proc = subprocess.Popen(  # the relay bounds its log (and ends with it)
                _relayed(argv, messages=False), env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)
        finally:
            log.close()
        parsed = urlparse(s.url)
        port = _url_port(s.url)
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
        if self.log is not None:
            self.log.close()
            self.log = None


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
                    log = conn.log_dir / f"{name}.log"  # what the server itself printed says why, mostly
                    where = f" (its output: {log})" if log.is_file() else ""
                    raise EnvLoadError(f"server {name} could not start: {type(exc).__name__}: {exc}{where}",
                                       name) from None
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
