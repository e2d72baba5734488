"""Environment health: load each scenario, list its tools, call every GET tool once.

The result per scenario (loads / tools listed / calls ok / calls failing with 5xx) feeds
``awm env test`` and the health column of the TUI; it is cached per code and data version.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.data.catalog import Scenario
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.paths import cache_dir
from awm_engine.data.schema_examples import example_arguments
from awm_engine.runtime.episode import EnvLoadError
from awm_engine.runtime.openapi_tools import input_schema_error, static_schema_errors
from awm_engine.runtime.pool import EnvPool


@dataclass
class CallOutcome:
    tool: str
    arguments: dict[str, Any]
    status: int | None
    is_error: bool
    error_kind: str | None
    text: str
    traceback: str | None = None  # what the handler raised (ToolResult.traceback)


@dataclass
class HealthReport:
    scenario: str
    loads: bool
    error: str | None = None
    tools: int = 0
    get_tools: int = 0
    calls_ok: int = 0
    calls_5xx: int = 0
    calls_4xx: int = 0
    calls_other_error: int = 0
    shared: bool | None = None
    seconds: float = 0.0
    # tools whose input schema is not valid JSON Schema -> the error every call gets under the reference
    invalid_schemas: dict[str, str] = field(default_factory=dict)
    calls: list[CallOutcome] = field(default_factory=list)

    @property
    def status(self) -> str:
        if not self.loads:
            return "broken"
        if self.calls_5xx:
            return "errors"
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status
        return data


def _cache_path(scenario: Scenario) -> Path:
    return cache_dir() / "health" / f"{scenario.key}-{scenario.version_key()}.json"


def cached_health(scenario: Scenario) -> dict[str, Any] | None:
    try:
        return json.loads(_cache_path(scenario).read_text())
    except (OSError, ValueError):
        return None


def invalid_schemas(scenario: Scenario) -> dict[str, str]:
    """Tools whose input schema is not valid JSON Schema -> the error every call gets under the reference: the
    loaded schemas' answer from the last ``awm env test`` when cached, else what the source shows statically."""
    found = static_schema_errors(scenario.code)
    tested = (cached_health(scenario) or {}).get("invalid_schemas")
    if isinstance(tested, dict):
        found = {str(k): str(v) for k, v in tested.items()}
    return found


async def check_scenario(pool: EnvPool, scenario: Scenario) -> HealthReport:
    started = time.perf_counter()
    report = HealthReport(scenario.key, loads=False)
    try:
        episode = await pool.open_episode(scenario)
    except EnvLoadError as exc:
        report.error = str(exc)
    else:
        report.loads = True
        report.shared = episode.shared
        try:
            tools = episode.list_tools()
            report.tools = len(tools)
            for tool in tools:
                error = input_schema_error(tool.get("inputSchema"))
                if error is not None:
                    report.invalid_schemas[str(tool.get("name"))] = error
            gets = [t for t in tools if episode.methods.get(t["name"]) == "get"]
            report.get_tools = len(gets)
            for tool in gets:
                args = example_arguments(tool["inputSchema"])
                result = await episode.call_tool(tool["name"], args)
                report.calls.append(CallOutcome(tool["name"], args, result.status, result.is_error,
                                                result.error_kind, result.text[:500], result.traceback))
                if not result.is_error:
                    report.calls_ok += 1
                elif result.error_kind == "http_5xx":
                    report.calls_5xx += 1
                elif result.error_kind == "http_4xx":
                    report.calls_4xx += 1
                else:
                    report.calls_other_error += 1
        finally:
            await episode.close()
    report.seconds = time.perf_counter() - started
    _store(scenario, report)
    return report


def _store(scenario: Scenario, report: HealthReport) -> None:
    """Cache a health report, whole or not at all: what the environment answered (a tool's text with a lone
    surrogate, which no UTF-8 file holds) is escaped, and a cache that cannot be written is no error."""
    path = _cache_path(scenario)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(dumps_text(report.to_dict(), default=str), encoding="utf-8")
        tmp.replace(path)
    except (OSError, ValueError):
        pass

