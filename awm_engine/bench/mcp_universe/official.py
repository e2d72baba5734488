"""MCP-Universe's own evaluator code — the pinned ``mcpuniverse`` wheel — with every live service intercepted.

awm does not re-implement MCP-Universe's evaluators: every ``func`` chain, built-in ``op``, domain operator and
the LLM judge (its prompt and its reply parsing) run as the wheel ships them, on the task's evaluator config as
the task file has it. ``make mcpu`` installs the wheel without its dependency list (agent SDKs, databases,
Blender, Playwright, yfinance …) plus the few packages the evaluator modules import (pyproject's ``mcpu``
extra, pinned in constraints.txt).

What awm changes is only where the official code would reach the outside world. Each such point is replaced in
the evaluator modules' namespaces by a stand-in:

=================  ==========================================================  ===============
service            the official code's call                                    stand-in name
=================  ==========================================================  ===============
Google Maps        ``MCPManager().execute(server_name="google-maps", …)``      ``google-maps``
GitHub             ``MCPManager().execute(server_name="github", …)``           ``github``
Notion             ``MCPManager().execute(server_name="notion", …)``           ``notion``
yfinance           ``yfinance.Ticker`` / ``yfinance.download``                 ``yfinance``
api.weather.gov    ``httpx.AsyncClient``                                       ``weather``
booking sites …    ``playwright.async_api.async_playwright``                   ``web-scraping``
Blender            ``blender__check_file_exists`` / ``…_check_file_content``   ``blender``
the judge          ``openai.OpenAI`` (gpt-4.1)                                 ``llm-judge``
=================  ==========================================================  ===============

A stand-in with nothing behind it raises ``NeedsService`` — a ``BaseException``, so none of the official
``except Exception`` blocks swallow it — and the evaluator's verdict is ``needs SERVICE``. So a task is marked
as needing a service only when the official code actually reaches that service; whatever it decides before
(malformed answers, wrong types, static pre-checks) it decides. ``Services`` can put something behind a
stand-in: a judge endpoint (any OpenAI-compatible model; the official code asks for gpt-4.1), or, for tests and
offline simulations, a handler answering the service's calls.

What awm also changes: the official code renders every string of an evaluator's ``value`` and ``op_args`` as a
Jinja template, unsandboxed, in awm's own process — a task file could run any code there
(``{{ cycler.__init__.__globals__.os.system(…) }}``) or loop forever. Those strings are rendered here by a sandboxed
environment that accepts only what MCP-Universe's tasks use, text and ``{{ NAME }}`` placeholders; anything else
(an attribute, a call, a filter, a loop …) makes the evaluator a ``Bad evaluator`` before anything is rendered.
awm's own model credentials never fill a placeholder (``servers.placeholder_environment``): one naming them stays
unset, as an unset variable does.

Official quirks kept: ``print`` output of the evaluator modules is captured (never written to awm's stdout) and
kept with the verdict; ``.env`` files are not loaded (the official modules call ``load_dotenv()`` at import;
awm takes variables from the environment and its own configuration only).
"""
from __future__ import annotations

import asyncio
import asyncio as _asyncio
import contextvars
import importlib
import importlib.util
import os
import subprocess
import sys
import types
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from awm_engine.bench import pinned

MCPUNIVERSE_VERSION = "1.0.0"
# import name -> distribution: what the wheel's evaluator modules import beyond awm's own dependencies
EXTRAS = {"pandas": "pandas", "bs4": "beautifulsoup4", "dotenv": "python-dotenv", "jinja2": "jinja2"}
SETUP_HINT = (f"run `make mcpu` (installs mcpuniverse=={MCPUNIVERSE_VERSION} without its dependencies, and the "
              "few packages its evaluators import, from constraints.txt)")
JUDGE_OP = "google_search.llm_as_a_judge"
OFFICIAL_JUDGE_MODEL = "gpt-4.1"
# MCP servers the evaluators call through MCPManager -> the service name verdicts report
MCP_SERVICES = {"google-maps": "google-maps", "github": "github", "notion": "notion"}
SERVICES = ("google-maps", "github", "notion", "yfinance", "weather", "web-scraping", "blender", "llm-judge")
_MODULES = ("functions", "github.functions", "google_maps.functions", "yfinance.functions", "blender.functions",
            "playwright.functions", "google_search.functions", "notion.functions", "weather.functions")
_PRINTED_CAP = 2000


class McpuMissing(RuntimeError):
    """The wheel (or one of its extras) is not installed, or is another version."""


class NeedsService(BaseException):
    """The official code reached a live service that has no stand-in behind it here."""

    def __init__(self, service: str, detail: str = ""):
        super().__init__(service, detail)
        self.service, self.detail = service, detail


def problem() -> str | None:
    """Why MCP-Universe's evaluators cannot run here (None when it can)."""
    return pinned.problem("mcpuniverse", MCPUNIVERSE_VERSION, EXTRAS, SETUP_HINT, "MCP-Universe's evaluator")


def require() -> None:
    if (reason := problem()) is not None:
        raise McpuMissing(reason)


# -- what is behind the stand-ins ----------------------------------------------------------------------------

Handler = Callable[..., Any]


@dataclass
class Services:
    """What the official evaluators may reach in one scoring: ``judge`` (an ``agent.endpoints.Endpoint``) answers
    the LLM judge; ``handlers`` maps a service name to a callable answering its calls (offline stand-ins):
    ``google-maps`` / ``github`` / ``notion`` get ``(tool_name, arguments)`` and return the tool's text (or an
    MCP-like result object), ``yfinance`` gets ``(call, *args, **kwargs)`` for ``Ticker`` / ``download``,
    ``llm-judge`` gets the chat ``messages`` and returns the reply text."""

    judge: Any = None
    handlers: dict[str, Handler] = field(default_factory=dict)

    def handler(self, service: str) -> Handler | None:
        return self.handlers.get(service)

    def describe(self) -> dict[str, Any]:
        """What a run's config records: the judge model actually asked, the services with a stand-in."""
        judge = None
        if self.judge is not None:
            judge = {"model": getattr(self.judge, "model", None), "official_model": OFFICIAL_JUDGE_MODEL,
                     "base_url": getattr(self.judge, "base_url", None)}
        elif "llm-judge" in self.handlers:
            judge = {"model": "stand-in", "official_model": OFFICIAL_JUDGE_MODEL}
        return {"judge": judge, "stand_ins": sorted(k for k in self.handlers if k != "llm-judge")}


NO_SERVICES = Services()
_services: contextvars.ContextVar[Services] = contextvars.ContextVar("awm_mcpu_services", default=NO_SERVICES)
_printed: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("awm_mcpu_printed", default=None)


def _reach(service: str, *args: Any, **kwargs: Any) -> Any:
    handler = _services.get().handler(service)
    if handler is None:
        raise NeedsService(service)
    return handler(*args, **kwargs)


class _McpManager:
    """Stands in for ``mcpuniverse.mcp.manager.MCPManager`` inside the evaluator modules."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    async def execute(self, server_name: str, tool_name: str, arguments: dict[str, Any] | None = None,
                      **kwargs: Any) -> Any:
        service = MCP_SERVICES.get(server_name, server_name)
        out = _reach(service, tool_name, arguments or {})
        if isinstance(out, str):
            return types.SimpleNamespace(isError=False, content=[types.SimpleNamespace(type="text", text=out)])
        return out

    def __getattr__(self, name: str) -> Any:
        raise NeedsService("mcp", f"MCPManager.{name}")


class _Yfinance(types.ModuleType):
    """Stands in for the ``yfinance`` module inside the evaluator modules."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: _reach("yfinance", name, *args, **kwargs)


class _Httpx(types.ModuleType):
    """Stands in for ``httpx`` inside the weather evaluators (they fetch api.weather.gov)."""

    def AsyncClient(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - the name the official code calls
        return _reach("weather", *args, **kwargs)


def _async_playwright(*args: Any, **kwargs: Any) -> Any:
    return _reach("web-scraping", *args, **kwargs)


async def _blender(*args: Any, **kwargs: Any) -> Any:
    return _reach("blender", *args, **kwargs)


class _OpenAI:
    """Stands in for ``openai.OpenAI`` inside the judge: a judge endpoint, a handler, or ``needs llm-judge``."""

    def __init__(self, *args: Any, **kwargs: Any):
        services = _services.get()
        self._endpoint, self._handler = services.judge, services.handler("llm-judge")
        if self._endpoint is None and self._handler is None:
            raise NeedsService("llm-judge")
        self._client = None
        if self._endpoint is not None:
            from openai import OpenAI

            e = self._endpoint
            self._client = OpenAI(base_url=e.base_url, api_key=e.api_key or "-", timeout=e.timeout,
                                  max_retries=e.max_retries)
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

    def _create(self, model: str = OFFICIAL_JUDGE_MODEL, messages: list | None = None, **kwargs: Any) -> Any:
        if self._client is None:
            text = self._handler(messages or [])
            message = types.SimpleNamespace(role="assistant", content=text)
            return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])
        return self._client.chat.completions.create(model=self._endpoint.model or model, messages=messages,
                                                    **kwargs)


async def _no_wait(delay: float, result: Any = None) -> Any:
    await _asyncio.sleep(0)
    return result


# the Notion and Playwright checks wait 20 s for a live page to settle before reaching the service: with a
# stand-in there is nothing to wait for (the wait decides nothing)
_NO_WAIT_ASYNCIO = types.SimpleNamespace(**{k: getattr(_asyncio, k) for k in dir(_asyncio) if not k.startswith("__")})
_NO_WAIT_ASYNCIO.sleep = _no_wait


def _print(*args: Any, sep: str | None = " ", end: str | None = "\n", **kwargs: Any) -> None:
    buf = _printed.get()
    if buf is not None and sum(map(len, buf)) < _PRINTED_CAP:
        buf.append((sep or " ").join(map(str, args)) + (end or ""))


class UnsafeTemplate(ValueError):
    """An evaluator value is a Jinja template with more than text and ``{{ NAME }}`` placeholders."""


def _placeholder_environment() -> type:
    """The ``jinja2.Environment`` the evaluator module renders its values with: a sandboxed environment whose
    templates are only text and ``{{ NAME }}`` placeholders (checked when parsed, before anything runs), and whose
    rendering leaves awm's model credentials as unset placeholders."""
    import jinja2
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from awm_engine.bench.mcp_universe.servers import withheld

    allowed = (nodes.Output, nodes.TemplateData, nodes.Name)

    class PlaceholderTemplate(jinja2.Template):
        def render(self, *args: Any, **kwargs: Any) -> str:
            names, values = withheld()
            masked = {k: f"{{{{ {k} }}}}" if k in names or (isinstance(v, str) and v in values) else v
                      for k, v in kwargs.items()}
            return super().render(*args, **masked)

    class PlaceholderEnvironment(ImmutableSandboxedEnvironment):
        template_class = PlaceholderTemplate

        def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
            tree = super()._parse(source, name, filename)
            for node in tree.find_all(nodes.Node):
                if not isinstance(node, allowed) or (isinstance(node, nodes.Name) and node.ctx != "load"):
                    raise UnsafeTemplate(f"an evaluator value may hold only text and {{{{ NAME }}}} placeholders "
                                         f"(what MCP-Universe's tasks use); this one has a {type(node).__name__} "
                                         f"(refused: it would run in awm's own process)")
            return tree

    return PlaceholderEnvironment


_loaded: dict[str, types.ModuleType] = {}


def _import_with_absent(names: tuple[str, ...]) -> None:
    """Import ``mcpuniverse.evaluator`` with placeholder modules for the service clients it imports at module
    level that are not installed (yfinance, playwright): only their stand-ins are ever called."""
    placed = []
    absent = {name for name in names if name not in sys.modules and importlib.util.find_spec(name.split(".")[0]) is None}
    for name in names:
        if name in absent:
            module = types.ModuleType(name)
            module.async_playwright = _async_playwright
            sys.modules[name] = module
            placed.append(name)
    import dotenv

    real_load = dotenv.load_dotenv
    dotenv.load_dotenv = lambda *a, **k: False
    try:
        importlib.import_module("mcpuniverse.evaluator")
    finally:
        dotenv.load_dotenv = real_load
        for name in placed:
            sys.modules.pop(name, None)


def load() -> types.ModuleType:
    """``mcpuniverse.evaluator`` with its services replaced by the stand-ins (once per process)."""
    if "evaluator" in _loaded:
        return _loaded["evaluator"]
    require()
    _import_with_absent(("yfinance", "playwright", "playwright.async_api"))
    base = "mcpuniverse.evaluator."
    mods = {name: sys.modules[base + name] for name in _MODULES}
    for name in ("github.functions", "google_maps.functions", "notion.functions"):
        mods[name].MCPManager = _McpManager
    mods["yfinance.functions"].yf = _Yfinance("yfinance")
    mods["weather.functions"].httpx = _Httpx("httpx")
    mods["playwright.functions"].async_playwright = _async_playwright
    mods["blender.functions"].blender__check_file_exists = _blender
    mods["blender.functions"].blender__check_file_content = _blender
    mods["blender.functions"].subprocess = types.SimpleNamespace(run=_blender, TimeoutExpired=subprocess.TimeoutExpired)
    mods["google_search.functions"].OpenAI = _OpenAI
    for name in ("notion.functions", "playwright.functions"):
        mods[name].asyncio = _NO_WAIT_ASYNCIO
    for module in (*mods.values(), sys.modules[base + "evaluator"]):
        module.print = _print
    sys.modules[base + "evaluator"].Environment = _placeholder_environment()
    _loaded["evaluator"] = sys.modules["mcpuniverse.evaluator"]
    return _loaded["evaluator"]


# -- verdicts -------------------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """One evaluator: the official ``EvaluationResult`` (``passed``, ``reason``, ``error``'s first line), or
    ``needs`` when the official code reached a service with no stand-in behind it."""

    func: str
    op: str
    status: str  # pass | fail | needs
    reason: str = ""
    error: str = ""
    needs: str | None = None
    desc: str = ""
    printed: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


@dataclass
class TaskVerdict:
    status: str  # pass | fail | needs (no evaluator failed, some reached a service not available here)
    evaluators: list[Verdict] = field(default_factory=list)

    @property
    def needs(self) -> list[str]:
        return sorted({v.needs for v in self.evaluators if v.needs})

    @property
    def evaluator_score(self) -> float | None:
        """Passed / total evaluators (the leaderboard's evaluator score); None while some need a service."""
        if self.status == "needs":
            return None
        if not self.evaluators:
            return 1.0
        return sum(v.status == "pass" for v in self.evaluators) / len(self.evaluators)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "needs": self.needs, "evaluator_score": self.evaluator_score,
                "passed": sum(v.status == "pass" for v in self.evaluators),
                "failed": sum(v.status == "fail" for v in self.evaluators),
                "evaluators": [v.to_dict() for v in self.evaluators]}


def _first_line(text: str, cap: int = 500) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:cap]


_EVALUATORS: dict[str, Any] = {}
_EVALUATORS_CAP = 4096


def _evaluator(module: types.ModuleType, context_cls: type, config: Mapping[str, Any],
               env: Mapping[str, str] | None) -> Any:
    """The official ``Evaluator`` for a config, built once per (config, env, environment): building one renders every value
    as a Jinja template (milliseconds). Each evaluation gets its own deep copy, so an operator that changed its
    arguments could not change the next answer's verdict."""
    import copy
    import json

    # the official code renders from the context's env and from os.environ: both are part of the key
    key = json.dumps([config, sorted((env or {}).items()), hash(frozenset(os.environ.items()))], sort_keys=True,
                     default=str)
    evaluator = _EVALUATORS.get(key)
    if evaluator is None:
        evaluator = module.Evaluator(dict(config), context=context_cls(env=dict(env or {})))
        if len(_EVALUATORS) >= _EVALUATORS_CAP:
            _EVALUATORS.clear()
        _EVALUATORS[key] = evaluator
    return copy.deepcopy(evaluator)


async def evaluate(config: Mapping[str, Any], answer: str, services: Services | None = None,
                   env: Mapping[str, str] | None = None) -> Verdict:
    """One evaluator config (as the task file has it) on one final answer, by the official ``Evaluator``."""
    module = load()
    context_cls = sys.modules["mcpuniverse.common.context"].Context
    verdict = Verdict(str(config.get("func", "")), str(config.get("op") or ""), "fail",
                      desc=str(config.get("desc") or ""))
    printed: list[str] = []
    t_services, t_printed = _services.set(services or NO_SERVICES), _printed.set(printed)
    try:
        try:
            evaluator = _evaluator(module, context_cls, config, env)
        except Exception as exc:  # noqa: BLE001 - the official runner could not even load such a task
            verdict.reason, verdict.error = "Bad evaluator", _first_line(f"{type(exc).__name__}: {exc}")
            return verdict
        try:
            result = await evaluator.evaluate(answer)
        except NeedsService as need:
            verdict.status, verdict.needs, verdict.reason = "needs", need.service, f"needs {need.service}"
            return verdict
        verdict.status = "pass" if result.passed else "fail"
        verdict.reason, verdict.error = result.reason, _first_line(result.error)
        return verdict
    finally:
        verdict.printed = "".join(printed)[:_PRINTED_CAP]
        _services.reset(t_services)
        _printed.reset(t_printed)


async def evaluate_task_async(evaluators: list[Mapping[str, Any]], answer: str, services: Services | None = None,
                              env: Mapping[str, str] | None = None) -> TaskVerdict:
    """Every evaluator in order, no short-circuit (the official ``Task.evaluate``). The task passes only if every
    evaluator passes; it fails if any fails; otherwise (none failed, some need a service) it is ``needs``."""
    verdicts = [await evaluate(e, answer, services, env) for e in evaluators]
    statuses = {v.status for v in verdicts}
    status = "fail" if "fail" in statuses else "needs" if "needs" in statuses else "pass"
    return TaskVerdict(status, verdicts)


def evaluate_task(evaluators: list[Mapping[str, Any]], answer: str, services: Services | None = None,
                  env: Mapping[str, str] | None = None) -> TaskVerdict:
    """``evaluate_task_async`` from synchronous code (not from inside a running event loop: use a thread)."""
    return asyncio.run(evaluate_task_async(evaluators, answer, services, env))


def decode_answer(text: str) -> Any:
    """The official ``json`` step's decoding of an answer string (strip, backticks, a leading ``json``)."""
    import json

    s = str(text).strip().strip("`").strip()
    if s.startswith("json"):
        s = s[4:].strip()
    return json.loads(s)
