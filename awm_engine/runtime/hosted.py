"""Hosted environments: environments written in Python by awm itself (a benchmark's domains, e.g. τ²-bench's
airline, retail and telecom) that run in the same sandboxed workers as generated AWM code, behind the same
episode interface (``pool.PoolEpisode``), so front ends, evaluations and the TUI treat them alike.

A scenario is hosted when it has a ``hosted`` attribute: ``{"factory": "awm_engine.<module>:<function>",
"config": {...}}``. The worker imports the factory (only from awm's own package: the name comes from the parent,
never from data) and calls it with ``config`` once per worker; the result is a ``HostedEnv``. Every episode's
state lives in its own ``initial.db`` / ``final.db`` (reset copies ``initial.db`` back; ``attach`` re-opens from
``final.db``), so worker restarts, replays and database diffs work as for AWM environments. ``open`` passes the
episode's ``options`` (e.g. which task's initial state to set up).
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

from awm_engine.runtime.episode import ToolResult

FACTORY_PREFIX = "awm_engine."


class HostedEpisode(Protocol):
    id: str
    env: Any  # the HostedEnv (``env.key`` names it in logs)
    run_dir: Path
    initial_db: Path
    final_db: Path
    stuck: bool

    def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = None, on_timeout: str = "interrupt") -> ToolResult: ...

    def reset_now(self) -> None: ...

    def close_now(self) -> None: ...


class HostedEnv(Protocol):
    key: str

    def mcp_tools(self) -> list[dict[str, Any]]: ...

    def open_episode(self, run_dir: str, episode_id: str, attach: bool,
                     options: dict[str, Any] | None) -> HostedEpisode: ...

    def close(self) -> None: ...


class HostedSpecError(ValueError):
    """A hosted environment's factory cannot be used."""


def load_hosted(key: str, spec: Any, workdir: str | None = None) -> HostedEnv:
    """Import the spec's factory and build the environment (``HostedSpecError`` for a bad spec)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("factory"), str):
        raise HostedSpecError(f"{key}: a hosted environment needs {{'factory': 'module:function', 'config': {{}}}}")
    module_name, _, function = spec["factory"].partition(":")
    if not module_name.startswith(FACTORY_PREFIX) or not function.isidentifier():
        raise HostedSpecError(f"{key}: hosted factory {spec['factory']!r} is not a function of awm's own package")
    factory = getattr(importlib.import_module(module_name), function, None)
    if not callable(factory):
        raise HostedSpecError(f"{key}: {spec['factory']} is not callable")
    config = spec.get("config") if isinstance(spec.get("config"), dict) else {}
    return factory(key=key, workdir=workdir, **config)


def is_hosted(scenario: Any) -> bool:
    return isinstance(getattr(scenario, "hosted", None), dict)
