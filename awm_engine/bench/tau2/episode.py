"""τ² domains as episodes of the engine: hosted by the environment workers (``runtime/hosted.py``), opened through
``EnvPool.open_episode`` like an AWM environment, behind the same ``EpisodeHandle``.

``DomainScenario`` is what the pool (and front ends) are handed for a domain: its catalog key (``tau2_retail``),
its tasks (one split) and the ``hosted`` spec naming ``load_domain``, which a worker calls once. An episode is
opened with ``options={"task_id": ID}`` to start from that task's initial state (initialization data and actions
applied); each task's initial state is built once per worker and copied for every episode (``reset`` copies it
back). Tool names are the agent's; the user's own tools (telecom's phone) are called as ``user:<name>``.
"""
from __future__ import annotations

import asyncio
import hashlib
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from awm_engine.bench.tau2.data import DEFAULT_SPLIT, Tau2Data, domain_key, domain_of_key
from awm_engine.bench.tau2.environment import TOOLKITS, Tau2Env, build_env
from awm_engine.bench.tau2.models import DB_MODELS, TelecomUserDB
from awm_engine.bench.tau2.store import StateStore, read_meta, read_state
from awm_engine.bench.tau2.tasks import Task
from awm_engine.bench.tau2.telecom import TelecomUserTools
from awm_engine.data.records import Task as CatalogTask
from awm_engine.data.run_formats import TRAJECTORY
from awm_engine.runtime.episode import ToolResult

USER_TOOL_PREFIX = "user:"
FACTORY = "awm_engine.bench.tau2.episode:load_domain"


def agent_tool_schemas(domain: str) -> list[dict[str, Any]]:
    return TOOLKITS[domain](None).schemas()


def user_tool_schemas(domain: str) -> list[dict[str, Any]]:
    """The user's own tools (telecom's phone; none elsewhere), under their plain names."""
    return TelecomUserTools(None).schemas() if domain == "telecom" else []


def split_user_tool(name: Any) -> tuple[str, Any]:
    """``user:toggle_data`` -> ("user", "toggle_data"); any other name -> ("assistant", name)."""
    if isinstance(name, str) and name.startswith(USER_TOOL_PREFIX):
        return "user", name[len(USER_TOOL_PREFIX):]
    return "assistant", name


class DomainScenario:
    """A τ² domain as the pool and the front ends see a scenario: key, name, tasks (of one split), the hosted
    spec. ``task(i)`` is the catalog's task record; ``tau2_task(i)`` the τ² task."""

    def __init__(self, data: Tau2Data, domain: str, split: str = DEFAULT_SPLIT):
        self.data = data
        self.domain = domain
        self.domain_data = data.domain(domain)
        self.key = domain_key(domain)
        self.name = f"τ²-bench {domain}"
        self.split = split
        self.data_dir = data.root
        self.hosted = {"factory": FACTORY, "config": {
            "domain": domain, "data_dir": str(Path(data.root).resolve()),
            "airline_db": str(Path(data.airline_db).resolve()) if data.airline_db else None}}
        try:
            self.tau2_tasks = self.domain_data.split_tasks(split)
        except KeyError:
            self.tau2_tasks = []
        self.task_ids = [t.id for t in self.tau2_tasks]
        self.tasks = [t.summary for t in self.tau2_tasks]
        self.description = (f"τ²-bench's {domain} domain ({split} split, {len(self.tasks)} tasks): a customer-service "
                            "agent following the domain policy, talking to a simulated user.")

    def __repr__(self) -> str:
        return f"DomainScenario({self.key!r}, tasks={len(self.tasks)})"

    def task(self, index: int) -> CatalogTask:
        if not 0 <= index < len(self.tasks):
            raise IndexError(f"{self.key} has {len(self.tasks)} tasks (0..{len(self.tasks) - 1}); no task {index}")
        return CatalogTask(self.key, index, self.tasks[index])

    def tau2_task(self, index: int) -> Task:
        self.task(index)
        return self.tau2_tasks[index]

    def index_of(self, task_id: str) -> int:
        try:
            return self.task_ids.index(task_id)
        except ValueError:
            raise KeyError(f"{self.key}: no task {task_id!r} in split {self.split!r}") from None

    def tools(self) -> list[dict[str, Any]]:
        return agent_tool_schemas(self.domain)

    def user_tools(self) -> list[dict[str, Any]]:
        return user_tool_schemas(self.domain)


class DomainCatalog:
    """Resolves ``tau2_<domain>`` keys to ``DomainScenario``s, where a replay looks its scenario up in a catalog
    (``RunReplay.materialize``, ``awm replay``, the TUI, a Ray actor of ``--executor ray``)."""

    def __init__(self, data: Tau2Data, split: str = DEFAULT_SPLIT):
        self.data = data
        self.split = split

    def get(self, key: str) -> DomainScenario:
        domain = domain_of_key(key)
        if domain is None:
            raise KeyError(f"{key} is not a τ²-bench domain")
        return DomainScenario(self.data, domain, self.split)


def domain_catalog(data_dir: str, airline_db: str | None = None, split: str = DEFAULT_SPLIT) -> DomainCatalog:
    """The domains of a τ² data directory, built where it is called (``RayEnvPool(catalog=partial(...))``: on
    each actor's node, which must see the directory at the same path)."""
    return DomainCatalog(Tau2Data(Path(data_dir), Path(airline_db) if airline_db else None), split)


def run_tau2_data(run_dir: Path | str) -> Tau2Data | None:
    """The τ² data directory a τ² rollout recorded (its ``trajectory.json``), or None for any other run."""
    try:
        awm = TRAJECTORY.read(Path(run_dir) / TRAJECTORY.file).get("awm") or {}
    except (OSError, ValueError):
        return None
    dirs = awm.get("data_dirs")
    if awm.get("benchmark") != "tau2" or not isinstance(dirs, list) or not dirs or not isinstance(dirs[0], str):
        return None
    airline = awm.get("airline_db") if isinstance(awm.get("airline_db"), str) else None
    return Tau2Data(Path(dirs[0]), Path(airline) if airline else None)


def load_domain(key: str, workdir: str | None, domain: str, data_dir: str, airline_db: str | None = None) -> "DomainHost":
    """The hosted factory (called once per worker)."""
    return DomainHost(key, Path(workdir or "."), Tau2Data(Path(data_dir), Path(airline_db) if airline_db else None)
                      .domain(domain))


class DomainHost:
    """One domain in a worker: builds each task's initial state once and hands out episodes."""

    template_built_at = None

    def __init__(self, key: str, workdir: Path, domain_data):
        self.key = key
        self.domain_data = domain_data
        self.domain = domain_data.name
        self.workdir = Path(workdir) / key
        self.workdir.mkdir(parents=True, exist_ok=True)
        domain_data.fresh_db()  # fail now (load error) when the database is absent or malformed
        self._initial: dict[str | None, tuple[Path, dict[str, str], dict[str, str]]] = {}
        self._lock = threading.Lock()

    def mcp_tools(self) -> list[dict[str, Any]]:
        return agent_tool_schemas(self.domain)

    def initial_state(self, task_id: str | None) -> tuple[Path, dict[str, str], dict[str, str]]:
        """(the initial.db to copy, each database's JSON, the environment's hidden state) of a task (None: the
        domain's databases as they are)."""
        with self._lock:
            if task_id not in self._initial:
                task = self.domain_data.task(task_id) if task_id is not None else None
                env = build_env(self.domain_data, task)
                tag = hashlib.sha1(str(task_id).encode()).hexdigest()[:16]
                path = self.workdir / f"initial-{tag}.db"
                meta = {"domain": self.domain, "task_id": task_id, **hidden_state(env)}
                StateStore(path).write_all(env.databases(), meta)
                dumps = {name: db.model_dump_json(warnings=False) for name, db in env.databases().items()}
                self._initial[task_id] = (path, dumps, meta)
            return self._initial[task_id]

    def open_episode(self, run_dir: str, episode_id: str, attach: bool,
                     options: dict[str, Any] | None) -> "DomainEpisode":
        task_id = (options or {}).get("task_id")
        return DomainEpisode(self, Path(run_dir), episode_id, attach, task_id if isinstance(task_id, str) else None)

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def hidden_state(env: Tau2Env) -> dict[str, str]:
    """What an environment holds outside its databases: the VPN default's performance (the break_vpn quirk)."""
    if env.user_tools is None:
        return {}
    return {"vpn_default_performance": env.user_tools.default_vpn_details.server_performance.value}


def restore_hidden_state(env: Tau2Env, meta: dict[str, str]) -> None:
    value = meta.get("vpn_default_performance")
    if env.user_tools is not None and value:
        try:
            env.user_tools.default_vpn_details.server_performance = type(
                env.user_tools.default_vpn_details.server_performance)(value)
        except ValueError:
            pass


def env_from_dumps(domain: str, dumps: dict[str, str]) -> Tau2Env:
    db = DB_MODELS[domain].model_validate_json(dumps["db"])
    user_db = TelecomUserDB.model_validate_json(dumps["user_db"]) if "user_db" in dumps else None
    return Tau2Env(domain, db, user_db)


class DomainEpisode:
    """One episode of a domain in a worker (``runtime.hosted.HostedEpisode``)."""

    def __init__(self, host: DomainHost, run_dir: Path, episode_id: str | None, attach: bool, task_id: str | None):
        self.id = episode_id or uuid.uuid4().hex[:12]
        self.env = host
        self.host = host
        self.task_id = task_id
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.initial_db = self.run_dir / "initial.db"
        self.final_db = self.run_dir / "final.db"
        self.store = StateStore(self.final_db)
        self.stuck = False
        self.closed = False
        self.calls = 0
        self._lock = threading.Lock()
        self.state: Tau2Env
        if attach and self.final_db.exists() and self.initial_db.exists():
            self._attach()
        else:
            self._fresh()

    def _fresh(self) -> None:
        template, dumps, meta = self.host.initial_state(self.task_id)
        shutil.copyfile(template, self.initial_db)
        shutil.copyfile(template, self.final_db)
        self.state = env_from_dumps(self.host.domain, dumps)
        restore_hidden_state(self.state, meta)
        self.store.adopt(self.state.databases(), meta)

    def _attach(self) -> None:
        meta = read_meta(self.final_db)
        models = {"db": DB_MODELS[self.host.domain]}
        if self.host.domain == "telecom":
            models["user_db"] = TelecomUserDB
        databases = read_state(self.final_db, models)
        self.state = Tau2Env(self.host.domain, databases["db"], databases.get("user_db"))
        restore_hidden_state(self.state, meta)
        self.task_id = self.task_id or meta.get("task_id")
        self.store.adopt(self.state.databases(), meta)

    def list_tools(self) -> list[dict[str, Any]]:
        return self.host.mcp_tools()

    def call_now(self, name: str, arguments: Any) -> ToolResult:
        started = time.perf_counter()
        with self._lock:
            if self.closed:
                return ToolResult(f"Episode {self.id} is closed", True, error_kind="internal")
            requestor, tool = split_user_tool(name)
            response = self.state.get_response(tool, arguments if arguments is not None else {}, requestor)
            if response.error:
                try:  # τ² syncs after every orchestrator step, whatever the call did
                    self.state.sync_tools()
                except Exception:  # noqa: BLE001
                    pass
            self.calls += 1
            self.store.update(self.state.databases(), hidden_state(self.state))
        known = self.state.user_tools if requestor == "user" else self.state.tools
        kind = None
        if response.error:
            kind = "tool_error" if known is not None and known.has_tool(tool) else "unknown_tool"
        return ToolResult(response.content, response.error, None, kind, (time.perf_counter() - started) * 1000)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = None, on_timeout: str = "interrupt") -> ToolResult:
        return await asyncio.to_thread(self.call_now, name, arguments)

    def reset_now(self) -> None:
        with self._lock:
            self._fresh()
            self.calls = 0

    async def reset(self) -> None:
        await asyncio.to_thread(self.reset_now)

    def close_now(self) -> None:
        self.closed = True

    async def close(self) -> None:
        self.close_now()

    def databases(self) -> dict[str, BaseModel]:
        return self.state.databases()
