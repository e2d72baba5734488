"""MCP-Universe tasks from a checkout: suite YAMLs, task JSON files and the paper's domains.

A checkout is found from ``--mcp-universe DIR``: DIR may be the configs folder itself (the one holding
``<domain>.yaml`` and ``<domain>/``), a repository checkout (``mcpuniverse/benchmark/configs/test`` at v1.0.0,
``mcpuniverse/benchmark/configs/mcpuniverse`` later) or ``mcpuniverse/benchmark/configs``. A suite lists task
paths such as ``test/web_search/info_search_task_0001.json``; only the last two parts (domain folder and file)
are used to find the file in the checkout, whichever layout the suite was written for.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from awm_engine.bench.mcp_universe.servers import placeholder_environment

# suite (YAML stem) -> the paper's domain name
DOMAINS: dict[str, str] = {
    "location_navigation": "Location",
    "repository_management": "Repository",
    "financial_analysis": "Financial",
    "3d_design": "3D",
    "browser_automation": "Browser",
    "web_search": "Web",
}
PAPER_COLUMNS = ("Location", "Repository", "Financial", "3D", "Browser", "Web")
# the AWM paper's MCP-Universe columns (spec §1.3): Repository and 3D dropped, multi-server files in "Multi"
AWM_COLUMNS = ("Location", "Financial", "Browser", "Web", "Multi")
MULTI_FOLDER = "multi_server"
SUITES = tuple(DOMAINS) + (MULTI_FOLDER,)
PAPER_COUNTS = {"Location": 45, "Repository": 33, "Financial": 40, "3D": 19, "Browser": 39, "Web": 55}

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class TaskError(ValueError):
    """A checkout, suite or task file that cannot be read."""


def render(text: str, env: Mapping[str, str] | None = None) -> str:
    """``{{ VAR }}`` replaced by its value in ``env`` (default: the environment without awm's model credentials,
    ``servers.placeholder_environment``); an unset or empty variable stays as the literal ``{{ VAR }}`` text, as
    MCP-Universe leaves it."""
    env = placeholder_environment() if env is None else env

    def sub(m: re.Match) -> str:
        value = env.get(m.group(1))
        return value if value else m.group(0)

    return _PLACEHOLDER.sub(sub, text)


@dataclass
class Task:
    id: str  # "<folder>/<file stem>": unique across the benchmark, the key of results
    path: Path
    folder: str  # the folder the file lives in (multi_server for multi-server tasks)
    suite: str  # the suite (YAML stem) that listed it
    question: str
    output_format: dict[str, Any] | None = None
    mcp_servers: list[str] = field(default_factory=list)
    evaluators: list[dict[str, Any]] = field(default_factory=list)
    cleanups: list[dict[str, Any]] = field(default_factory=list)
    category: str = "general"
    instruction: str = ""  # the suite agent's instruction
    env: dict[str, str] | None = None  # variables given at load (the official Context's env); None: the environment

    @property
    def domain(self) -> str:
        """The paper's domain: the domain suite that lists the task (multi-server tasks are folded in)."""
        if self.suite in DOMAINS:
            return DOMAINS[self.suite]
        return DOMAINS.get(self.folder, "Multi")

    @property
    def awm_column(self) -> str | None:
        """The AWM paper's column (folder grouping, spec §1.3 reading A); None for Repository and 3D."""
        if self.folder == MULTI_FOLDER:
            return "Multi"
        column = DOMAINS.get(self.folder)
        return column if column in AWM_COLUMNS else None

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "suite": self.suite, "domain": self.domain, "folder": self.folder,
                "servers": self.mcp_servers, "evaluators": len(self.evaluators)}


def configs_dir(root: Path | str) -> Path:
    """The folder holding the suite YAMLs and domain folders, found from a checkout or the folder itself."""
    root = Path(root).expanduser()
    candidates = [root, root / "test", root / "mcpuniverse",
                  root / "mcpuniverse" / "benchmark" / "configs" / "test",
                  root / "mcpuniverse" / "benchmark" / "configs" / "mcpuniverse"]
    for c in candidates:
        if any((c / f"{s}.yaml").is_file() for s in SUITES):
            return c
    raise TaskError(f"{root}: no MCP-Universe suite YAMLs (e.g. web_search.yaml) found in it or in "
                    "mcpuniverse/benchmark/configs/{test,mcpuniverse}")


@dataclass
class Suite:
    tasks: list[str]  # task paths as the YAML lists them (commented-out entries are not read)
    servers: list[str] = field(default_factory=list)  # the benchmark agent's servers (for tasks that name none)
    instruction: str = ""  # the benchmark agent's instruction


def read_suite(yaml_path: Path) -> Suite:
    """The ``kind: benchmark`` documents' tasks, and the servers and instruction of the agent they name."""
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(yaml_path.read_text()) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError) as exc:
        raise TaskError(f"cannot read suite {yaml_path}: {exc}") from None
    paths: list[str] = []
    agent_names = []
    for doc in docs:
        if doc.get("kind") == "benchmark":
            spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
            entries = spec.get("tasks") or []
            if not isinstance(entries, list):
                raise TaskError(f"suite {yaml_path}: its tasks are a {type(entries).__name__}, not a list")
            paths += [str(p) for p in entries]
            agent_names.append(spec.get("agent"))
    suite = Suite(paths)
    for doc in docs:
        spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
        if doc.get("kind") == "agent" and (spec.get("name") in agent_names or not suite.servers):
            config = spec.get("config") if isinstance(spec.get("config"), dict) else {}
            listed = config.get("servers") if isinstance(config.get("servers"), list) else []
            suite.servers = [s["name"] if isinstance(s, dict) else str(s) for s in listed
                             if not isinstance(s, dict) or isinstance(s.get("name"), str)]
            suite.instruction = str(config.get("instruction") or "")
    return suite


def suite_task_paths(yaml_path: Path) -> list[str]:
    return read_suite(yaml_path).tasks


def resolve_task_path(base: Path, entry: str) -> Path:
    """A suite entry mapped onto the checkout: ``test/<domain>/<file>`` or ``mcpuniverse/<domain>/<file>`` →
    ``<configs>/<domain>/<file>``."""
    parts = Path(entry).parts
    if len(parts) >= 2:
        candidate = base / parts[-2] / parts[-1]
        if candidate.is_file():
            return candidate
    direct = base / entry
    if direct.is_file():
        return direct
    raise TaskError(f"suite entry {entry!r}: no file {base / Path(*parts[-2:])}")


def load_task(path: Path, suite: str, env: Mapping[str, str] | None = None, default_servers: list[str] | None = None,
              instruction: str = "") -> Task:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TaskError(f"cannot read task {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("question"), str):
        raise TaskError(f"{path}: not an MCP-Universe task (no question)")
    folder = path.parent.name
    for key in ("mcp_servers", "evaluators", "cleanups"):
        if data.get(key) is not None and not isinstance(data[key], list):
            raise TaskError(f"{path}: {key} is a {type(data[key]).__name__}, not a list")
    servers = []
    for i, s in enumerate(data.get("mcp_servers") or []):
        name = s.get("name") if isinstance(s, dict) else s
        if not isinstance(name, str) or not name:
            raise TaskError(f"{path}: server {i} has no name")
        servers.append(name)
    servers = servers or list(default_servers or [])  # v1.0.0 financial and 3D tasks name none: the agent's
    evaluators = []
    for i, e in enumerate(data.get("evaluators") or []):
        if not isinstance(e, dict) or not isinstance(e.get("func"), str):
            raise TaskError(f"{path}: evaluator {i} has no func")
        if e.get("op") is not None and not isinstance(e.get("op"), str):
            raise TaskError(f"{path}: evaluator {i}: op is a {type(e['op']).__name__}, not a name")
        evaluators.append(dict(e))  # as the file has it: the official Evaluator renders its own placeholders
    return Task(id=f"{folder}/{path.stem}", path=path, folder=folder, suite=suite,
                question=render(data["question"], env), output_format=data.get("output_format"),
                mcp_servers=servers, evaluators=evaluators, cleanups=list(data.get("cleanups") or []),
                category=str(data.get("category") or "general"), instruction=instruction,
                env=None if env is None else dict(env))


def load_suite(root: Path | str, suite: str, env: Mapping[str, str] | None = None,
               problems: list[str] | None = None) -> list[Task]:
    """The suite's tasks. A suite entry or task file that cannot be read raises ``TaskError``, or, given a
    ``problems`` list, is described there and left out (the other tasks load)."""
    base = configs_dir(root)
    yaml_path = base / f"{suite}.yaml"
    if not yaml_path.is_file():
        raise TaskError(f"no suite {suite!r} in {base} (suites: {', '.join(available_suites(base))})")
    spec = read_suite(yaml_path)
    loaded = []
    for entry in spec.tasks:
        try:
            loaded.append(load_task(resolve_task_path(base, entry), suite, env, spec.servers, spec.instruction))
        except TaskError as exc:
            if problems is None:
                raise
            problems.append(f"{suite}: {exc}; left out")
    return loaded


def available_suites(base: Path) -> list[str]:
    return sorted(p.stem for p in base.glob("*.yaml"))


def suite_for_domain(name: str) -> str:
    """A suite from a suite name or a paper domain name (case-insensitive: ``web``, ``Location``, ``3d``…)."""
    low = name.lower()
    if low in SUITES or low.replace("-", "_") in SUITES:
        return low.replace("-", "_")
    for suite, domain in DOMAINS.items():
        if domain.lower() == low:
            return suite
    if low in ("multi", "multi-server", "multi_server"):
        return MULTI_FOLDER
    raise TaskError(f"unknown domain {name!r} (choose from {', '.join(SUITES)} or "
                    f"{', '.join(PAPER_COLUMNS)})")


def load_benchmark(root: Path | str, domains: list[str] | None = None,
                   env: Mapping[str, str] | None = None, problems: list[str] | None = None) -> list[Task]:
    """The tasks of the given domains (default: the six paper domains), each task once: a task listed by a
    domain suite and by ``multi_server.yaml`` keeps its domain suite (spec §1.1). Given a ``problems`` list, a
    suite, suite entry or task file that cannot be read is described there and left out instead of raising."""
    suites = [suite_for_domain(d) for d in domains] if domains else list(DOMAINS)
    tasks: dict[str, Task] = {}
    base = configs_dir(root)
    ordered = [s for s in suites if s != MULTI_FOLDER] + [s for s in suites if s == MULTI_FOLDER]
    for suite in ordered:
        try:
            if not (base / f"{suite}.yaml").is_file():
                raise TaskError(f"no suite {suite!r} in {base}")
            for task in load_suite(base, suite, env, problems):
                tasks.setdefault(task.id, task)
        except TaskError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
    return list(tasks.values())


def task_index(root: Path | str, env: Mapping[str, str] | None = None,
               problems: list[str] | None = None) -> dict[str, Task]:
    """Every task of the paper domains and the multi-server suite, by id (domain suites first)."""
    return {t.id: t for t in load_benchmark(root, [s for s in SUITES if (configs_dir(root) / f"{s}.yaml").is_file()],
                                             env, problems)}
