"""The episode interface every backend implements, and the results and errors it hands out.

An episode is one isolated run of a scenario: its own ``initial.db`` (the state it started from) and
``final.db`` (the working database), in its run directory. Three backends implement ``EpisodeHandle``:
``inprocess.Episode`` (the scenario's code in this process: workers and benchmarks), ``pool.PoolEpisode``
(hosted by a sandboxed worker process: what front ends use) and ``mcp_client.McpEpisode`` (a real MCP
server). Rollouts, verification and the TUI only ever see this interface.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

DEFAULT_CALL_TIMEOUT = 10.0
# what happens to a handler still running when its call times out: "interrupt" stops it (awm's robust profile);
# "finish" leaves it running so its writes land, as under the AWM reference (the MCP client gives up after 60 s
# but the reference server's handler goes on); closing or resetting the episode waits for it (SETTLE_LIMIT).
ON_TIMEOUT = ("interrupt", "finish")
SETTLE_LIMIT = float(os.environ.get("AWM_SETTLE_LIMIT") or 120.0)

# how calls to a tool whose input schema is not valid JSON Schema are treated: "reference" fails every call
# with jsonschema's SchemaError text, as the reference's MCP server does; "robust" runs them
SCHEMA_CHECKS = ("reference", "robust")
DEFAULT_SCHEMA_CHECK = "reference"

# error kinds of a ToolResult that mean the environment (not the agent) failed
ENVIRONMENT_ERROR_KINDS = frozenset({"http_5xx", "internal", "timeout", "invalid_schema"})
# error kinds that mean the agent's call was malformed (it never reached a handler)
CALL_REJECTED_KINDS = frozenset({"unknown_tool", "invalid_arguments", "unknown_function"})


def is_environment_error(error_kind: str | None) -> bool:
    """The one definition of "the environment failed" (5xx, awm-internal failure, a timed-out handler, or a
    tool whose input schema is not valid JSON Schema)."""
    return error_kind in ENVIRONMENT_ERROR_KINDS


def check_schema_check(value: str | None) -> str:
    """``value`` if it names a schema-check profile (None: the default); ValueError otherwise."""
    if value is None:
        return DEFAULT_SCHEMA_CHECK
    if value not in SCHEMA_CHECKS:
        raise ValueError(f"unknown schema check {value!r} (choose from {', '.join(SCHEMA_CHECKS)})")
    return value


@dataclass
class ToolResult:
    text: str
    is_error: bool = False
    status: int | None = None  # the HTTP status, when a request was made
    error_kind: str | None = None  # unknown_tool | invalid_arguments | invalid_schema | http_4xx | http_5xx |
    #                                timeout | internal
    elapsed_ms: float = 0.0
    # the exception and traceback behind an environment error (an unhandled exception in a handler, where a
    # timed-out handler was stopped): for people and logs only; the model sees ``text`` alone
    traceback: str | None = None
    # the text was cut at the result cap (runtime/caps.py; it ends with a marker saying so): its size before, in bytes
    truncated: bool = False
    original_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EnvLoadError(Exception):
    """A scenario's environment could not be started (no code, syntax or import error, no app, no database)."""

    def __init__(self, message: str, scenario: str | None = None):
        super().__init__(message)
        self.scenario = scenario


@dataclass
class EpisodeLoadFailure:
    """A typed "could not open the episode" result, for callers that display rather than raise."""

    scenario: str
    message: str
    kind: str = "load_error"  # load_error | bad_task | server_error

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return self.message


@runtime_checkable
class EpisodeHandle(Protocol):
    """What a rollout, a verifier run or a front end may do with an episode."""

    id: str
    run_dir: Path
    initial_db: Path  # snapshot of the state the episode started from
    final_db: Path  # the working database; a snapshot of the end state once closed

    def list_tools(self) -> list[dict[str, Any]]:
        """MCP tool definitions (name, description, inputSchema)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = None, on_timeout: str = "interrupt") -> ToolResult:
        ...

    async def reset(self) -> None:
        """Back to the initial state (fresh copies of the databases)."""
        ...

    async def close(self) -> None:
        """Stop serving; ``initial.db`` and ``final.db`` stay in the run directory."""
        ...

    def snapshot(self, dest: Path | str) -> Path:
        """A consistent copy of the working database as it is now."""
        ...


SNAPSHOT_LOCK_WAIT = float(os.environ.get("AWM_SNAPSHOT_LOCK_WAIT") or 30.0)


class SnapshotLocked(RuntimeError):
    """The database stayed locked by someone else (the environment's code) for longer than a snapshot waits."""


def snapshot_database(src: Path | str, dest: Path | str, lock_wait: float | None = None) -> Path:
    """Copy a live SQLite database with the backup API (consistent even while another process writes).

    Python's ``backup`` retries for as long as the source is locked, and the environment's code can hold a lock on
    its own database for ever: a copy that finds it locked for ``lock_wait`` seconds (``AWM_SNAPSHOT_LOCK_WAIT``,
    30) stops with ``SnapshotLocked``."""
    import sqlite3
    import time

    wait = SNAPSHOT_LOCK_WAIT if lock_wait is None else lock_wait
    locked_since: list[float] = []

    def progress(status: int, remaining: int, total: int) -> None:
        if status not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            locked_since.clear()
            return
        now = time.monotonic()
        if not locked_since:
            locked_since.append(now)
        elif now - locked_since[0] >= wait:
            raise SnapshotLocked(f"{src}: the database stayed locked for {wait:.0f} s (the environment's code holds "
                                 "a lock on it): no snapshot")

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{Path(src)}?mode=ro", uri=True, timeout=min(5.0, wait))
    try:
        target = sqlite3.connect(dest)
        try:
            source.backup(target, progress=progress)
        finally:
            target.close()
    finally:
        source.close()
    return dest
