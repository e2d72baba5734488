"""The reference side of the MCP-Universe equality test: MCP-Universe's own ``Evaluator``, run the way its
benchmark runner runs it, in a fresh interpreter, with nothing of awm imported.

The machine is offline, so every live service the official code reaches is answered here the way an offline
run would see it — a connection error (or, for Blender, no .blend file) — unless the case gives a fixture;
each reach is recorded, so the test can tell what the official code decided before reaching any service.

stdin: a JSON list of cases ``{"evaluators": [...], "answer": str, "fixtures": {service: ...}}``; stdout: per
case, per evaluator ``{"passed", "reason", "reached"}`` (``reached``: the first service reached, or null).
"""
from __future__ import annotations

import asyncio
import copy
import json
import os
import sys
import types

REACHED: list[str] = []
FIXTURES: dict = {}


def _reach(service: str):
    REACHED.append(service)
    if service not in FIXTURES:
        raise ConnectionError(f"offline: cannot reach {service}")
    return FIXTURES[service]


def _absent_client(service: str):
    def call(*args, **kwargs):
        _reach(service)
        raise ConnectionError(f"no fixture calls for {service}")
    return call


yfinance = types.ModuleType("yfinance")
yfinance.Ticker = _absent_client("yfinance")
yfinance.download = _absent_client("yfinance")
sys.modules["yfinance"] = yfinance
playwright = types.ModuleType("playwright")
playwright_api = types.ModuleType("playwright.async_api")
playwright_api.async_playwright = _absent_client("web-scraping")
sys.modules["playwright"], sys.modules["playwright.async_api"] = playwright, playwright_api

import httpx  # noqa: E402

httpx.AsyncClient = _absent_client("weather")


async def _no_sleep(delay, result=None):
    return result


asyncio.sleep = _no_sleep  # the official checks wait 20 s for live pages; the wait decides nothing

import mcpuniverse.evaluator.blender.functions as blender  # noqa: E402
import mcpuniverse.evaluator.google_search.functions as google_search  # noqa: E402
from mcpuniverse.common.context import Context  # noqa: E402
from mcpuniverse.evaluator import Evaluator  # noqa: E402
from mcpuniverse.mcp.manager import MCPManager  # noqa: E402

for module in list(sys.modules.values()):
    if getattr(module, "__name__", "").startswith("mcpuniverse.evaluator"):
        module.print = lambda *a, **k: None


async def _execute(self, server_name, tool_name, arguments, **kwargs):
    answers = _reach(server_name)
    text = answers.get(tool_name) if isinstance(answers, dict) else None
    if text is None:
        raise ConnectionError(f"no fixture for {server_name}.{tool_name}")
    return types.SimpleNamespace(isError=False, content=[types.SimpleNamespace(type="text", text=text)])


MCPManager.execute = _execute
MCPManager.__init__ = lambda self, *a, **k: None  # it only loads server_list.json (84 ms a time); decides nothing


class _Path(types.SimpleNamespace):
    pass


_real_exists = os.path.exists


def _exists(path):
    if "blend_files" in str(path):
        _reach("blender")
        return False  # offline: the Blender server made no file
    return _real_exists(path)


blender.os = types.SimpleNamespace(path=types.SimpleNamespace(join=os.path.join, exists=_exists), environ=os.environ,
                                   remove=os.remove)


class _OpenAI:
    def __init__(self, *args, **kwargs):
        rules = _reach("llm-judge")
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))
        self._rules = rules

    def _create(self, model, messages, **kwargs):
        prompt = messages[-1]["content"]
        reply = next((r for marker, r in self._rules if marker in prompt), self._rules[-1][1])
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=types.SimpleNamespace(content=reply))])


google_search.OpenAI = _OpenAI


_BUILT: dict = {}


def _evaluator(config):
    """Built once per config (building renders every value as a Jinja template, tens of milliseconds; the
    result depends on the config and the environment only), a fresh copy per answer."""
    key = json.dumps(config, sort_keys=True)
    if key not in _BUILT:
        _BUILT[key] = Evaluator(config, context=Context())
    return copy.deepcopy(_BUILT[key])


async def run(cases):
    out = []
    for case in cases:
        FIXTURES.clear()
        FIXTURES.update(case.get("fixtures") or {})
        rows = []
        for config in case["evaluators"]:
            REACHED.clear()
            try:
                result = await _evaluator(config).evaluate(case["answer"])
                rows.append({"passed": result.passed, "reason": result.reason,
                             "reached": REACHED[0] if REACHED else None})
            except Exception as exc:  # noqa: BLE001 - a config the official code cannot load
                rows.append({"passed": False, "reason": "Bad evaluator", "reached": None, "load_error": str(exc)})
        out.append(rows)
    return out


if __name__ == "__main__":
    json.dump(asyncio.run(run(json.load(sys.stdin))), sys.stdout)
