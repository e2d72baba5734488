"""Environment workers as Ray actors, for when one machine is not enough (``--executor ray``).

Each actor hosts a local ``EnvPool`` — sandboxed worker processes on its node, many episodes each, as on
one machine — and ``RayEnvPool`` places episodes on the least-loaded actor. A ``RayEpisode`` implements
the episode interface (``runtime.episode.EpisodeHandle``): tool calls go to its actor; when it closes, its
``initial.db`` and ``final.db`` come back to the caller's run directory, so rollouts, verification,
results and resume work exactly as with the local executor. Ray is an optional dependency
(``pip install 'awm[ray]'``); the data directories must be readable at the same paths on every node.

An actor resolves scenario keys with its own catalog: the AWM catalog of ``data_dirs`` by default, or what
``catalog`` (a picklable function of no arguments, e.g. a ``functools.partial`` of a module-level function)
returns — anything with ``get(key)``, such as τ²-bench's domains (``bench.tau2.episode.domain_catalog``).
"""
from __future__ import annotations

import asyncio
import functools
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

from awm_engine.data.catalog import Scenario
from awm_engine.runtime.episode import DEFAULT_CALL_TIMEOUT, EnvLoadError, ToolResult
from awm_engine.sandbox import owned

CHUNK = 96 << 10  # bytes of a database per transfer from an actor: under Ray's 100 KiB for inline objects


def require_ray():
    try:
        import ray
    except ImportError:
        raise EnvLoadError("the ray executor needs Ray: pip install 'awm[ray]' (or make setup-ray)") from None
    return ray


def awm_catalog(data_dirs: list[str]):
    """The default catalog of an actor: the AWM scenarios of ``data_dirs`` (the sample environments if none)."""
    from awm_engine.data.catalog import Catalog

    return Catalog.load(data_dirs or None)


class PoolActor:
    """Runs inside a Ray worker process: a local pool and the episodes it hosts (awm's own code; the
    environment code runs in the pool's sandboxed workers)."""

    def __init__(self, catalog: Callable[[], Any], workers: int, call_timeout: float, schema_check: str):
        from awm_engine.sandbox.host import harden_parent

        harden_parent()
        self.catalog = catalog()
        self.scenarios: dict[str, Any] = {}
        self.settings = (workers, call_timeout, schema_check)
        self.pool = None
        self._starting = None  # one start, however many opens arrive at once
        self.episodes: dict[str, Any] = {}
        self.files: dict[str, Path] = {}  # databases offered to the caller (``close``, ``snapshot``), by token

    async def _ready(self):
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)
        return self.pool

    async def _start(self) -> None:
        from awm_engine.runtime.pool import EnvPool

        workers, call_timeout, schema_check = self.settings
        pool = EnvPool(workers=workers, call_timeout=call_timeout, schema_check=schema_check)
        await pool.start()
        self.pool = pool

    def _scenario(self, key: str):
        if key not in self.scenarios:
            self.scenarios[key] = self.catalog.get(key)
        return self.scenarios[key]

    async def open(self, key: str, task_idx: int | None, schema_check: str | None,
                   options: dict[str, Any] | None = None) -> dict[str, Any]:
        pool = await self._ready()
        try:
            episode = await pool.open_episode(self._scenario(key), task_idx=task_idx, schema_check=schema_check,
                                              options=options)
        except (EnvLoadError, KeyError, IndexError) as exc:
            return {"error": str(exc.args[0] if isinstance(exc, KeyError) else exc)}
        self.episodes[episode.id] = episode
        return {"id": episode.id, "tools": episode.list_tools(), "shared": episode.shared,
                "methods": episode.methods, "template": episode.template, "schema_check": episode.schema_check}

    async def call(self, episode_id: str, name: str, arguments: dict, timeout: float | None,
                   on_timeout: str = "interrupt") -> dict[str, Any]:
        episode = self.episodes.get(episode_id)
        if episode is None:
            return ToolResult(f"Episode {episode_id} is closed", True, error_kind="internal").to_dict()
        return (await episode.call_tool(name, arguments, timeout, on_timeout=on_timeout)).to_dict()

    async def reset(self, episode_id: str) -> None:
        await self.episodes[episode_id].reset()

    # A database goes to the caller a chunk at a time (``read``): whole, an environment's (up to its worker's 1 GB
    # quota) was one object in this process, Ray's object store and the caller, per episode closing at once.

    def _offer(self, path: Path) -> str:
        token = uuid.uuid4().hex
        self.files[token] = path
        return token

    async def snapshot(self, episode_id: str) -> str:
        """A snapshot of the episode's database, to ``read`` and then ``drop``."""
        tmp = Path(tempfile.mkdtemp(prefix="snap-", dir=str(self.pool.workdir)))
        return self._offer(await asyncio.to_thread(self.episodes[episode_id].snapshot, tmp / "snap.db"))

    async def close(self, episode_id: str) -> dict[str, str]:
        """Close the episode; its databases, by name, to ``read`` and then ``drop``."""
        episode = self.episodes.pop(episode_id, None)
        if episode is None:
            return {}
        await episode.close()  # the databases land in the episode's own directory on this node
        return {name: self._offer(episode.run_dir / name) for name in ("initial.db", "final.db")
                if (episode.run_dir / name).is_file()}

    def read(self, token: str, offset: int) -> bytes:
        with open(self.files[token], "rb") as fh:
            fh.seek(offset)
            return fh.read(CHUNK)

    def drop(self, token: str) -> None:
        path = self.files.pop(token, None)
        if path is not None:
            path.unlink(missing_ok=True)
            if path.parent.name.startswith("snap-"):
                shutil.rmtree(path.parent, ignore_errors=True)

    def load(self) -> int:
        return len(self.episodes)

    async def warm(self, key: str) -> dict[str, Any]:
        """Load ``key`` on every worker of this actor: seconds per worker (or the error)."""
        pool = await self._ready()
        try:
            return {"seconds": await pool.warm(self._scenario(key))}
        except (EnvLoadError, KeyError) as exc:
            return {"error": str(exc.args[0] if isinstance(exc, KeyError) else exc)}

    async def stop(self) -> None:
        if self.pool is not None:
            await self.pool.close()


class RayEpisode:
    """An episode hosted by a ``PoolActor`` (implements ``runtime.episode.EpisodeHandle``)."""

    def __init__(self, pool: "RayEnvPool", actor, actor_index: int, scenario: Scenario, run_dir: Path,
                 info: dict[str, Any], task_idx: int | None, options: dict[str, Any] | None = None):
        self.pool = pool
        self.actor = actor
        self.actor_index = actor_index
        self.scenario = scenario
        self.id = info["id"]
        self.run_dir = run_dir
        self.tools = info["tools"]
        self.shared = info["shared"]
        self.methods = info["methods"]
        self.template = info.get("template")
        self.schema_check = info.get("schema_check")
        self.task_idx = task_idx
        self.options = options
        self.closed = False

    @property
    def initial_db(self) -> Path:
        return self.run_dir / "initial.db"  # filled in when the episode closes

    @property
    def final_db(self) -> Path:
        return self.run_dir / "final.db"

    def list_tools(self) -> list[dict[str, Any]]:
        return self.tools

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        timeout: float | None = None, on_timeout: str = "interrupt") -> ToolResult:
        if self.closed:
            return ToolResult(f"Episode {self.id} is closed", True, error_kind="internal")
        try:
            data = await self.actor.call.remote(self.id, name, arguments or {}, timeout, on_timeout)
        except Exception as exc:  # noqa: BLE001 - the actor or its node failed: this episode's call fails
            return ToolResult(f"Error calling {name}: {type(exc).__name__}: {exc}", True, error_kind="internal")
        return ToolResult(**{k: v for k, v in data.items() if k in ToolResult.__dataclass_fields__})

    async def reset(self) -> None:
        await self.actor.reset.remote(self.id)

    def snapshot(self, dest: Path | str) -> Path:
        ray = require_ray()
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        token = ray.get(self.actor.snapshot.remote(self.id))
        with open(dest, "wb") as fh:
            while chunk := ray.get(self.actor.read.remote(token, fh.tell())):
                fh.write(chunk)
        ray.get(self.actor.drop.remote(token))
        return dest

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.pool.loads[self.actor_index] -= 1
        try:
            files = await self.actor.close.remote(self.id)
        except Exception:  # noqa: BLE001 - a lost actor: the databases are gone with it
            files = {}
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for name, token in files.items():
            await _fetch(self.actor, token, self.run_dir / name)


async def _fetch(actor, token: str, dest: Path) -> None:
    """A database an actor offers, into ``dest`` a chunk at a time."""
    with open(dest, "wb") as fh:
        while chunk := await actor.read.remote(token, fh.tell()):
            await asyncio.to_thread(fh.write, chunk)
    await actor.drop.remote(token)


class RayEnvPool:
    """``EnvPool``'s interface over Ray actors: ``async with RayEnvPool(data_dirs, actors=4) as pool`` (or
    ``RayEnvPool(catalog=factory)`` for scenarios that are not in an AWM catalog)."""

    def __init__(self, data_dirs: list[str] | None = None, actors: int | None = None, workers_per_actor: int = 1,
                 address: str | None = None, call_timeout: float = DEFAULT_CALL_TIMEOUT,
                 schema_check: str = "reference", workdir: Path | str | None = None,
                 catalog: Callable[[], Any] | None = None):
        self.data_dirs = [str(d) for d in data_dirs or []]
        self.catalog = catalog or functools.partial(awm_catalog, self.data_dirs)
        self.n_actors = actors
        self.workers_per_actor = workers_per_actor
        self.address = address
        self.call_timeout = call_timeout
        self.schema_check = schema_check
        # episodes opened without a run directory keep their databases here (a private temporary directory,
        # removed at close, unless one is given) — never the current directory
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else owned.owned_dir("awm_raypool_")
        self.actors: list[Any] = []
        self.loads: list[int] = []
        self._started_ray = False

    async def __aenter__(self) -> "RayEnvPool":
        try:
            await self.start()
        except BaseException:  # ray missing or failing to start: the pool's own directory goes anyway
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self) -> None:
        ray = require_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address:
                kwargs["address"] = self.address
            await asyncio.to_thread(ray.init, **kwargs)
            self._started_ray = True
        count = self.n_actors or max(1, int(ray.cluster_resources().get("CPU", 1)) // max(1, self.workers_per_actor))
        remote = ray.remote(num_cpus=0)(PoolActor)
        self.actors = [remote.remote(self.catalog, self.workers_per_actor, self.call_timeout, self.schema_check)
                       for _ in range(count)]
        self.loads = [0] * count

    async def open_episode(self, scenario: Scenario, run_dir: Path | str | None = None,
                           episode_id: str | None = None, task_idx: int | None = None,
                           attach: bool = False, schema_check: str | None = None,
                           options: dict[str, Any] | None = None) -> RayEpisode:
        if attach:
            raise EnvLoadError("the ray executor cannot continue an episode from existing databases", scenario.key)
        index = min(range(len(self.actors)), key=lambda i: self.loads[i])
        self.loads[index] += 1
        try:
            info = await self.actors[index].open.remote(scenario.key, task_idx, schema_check or self.schema_check,
                                                        options)
        except Exception as exc:  # noqa: BLE001
            self.loads[index] -= 1
            raise EnvLoadError(f"{scenario.key}: the ray actor failed: {exc}", scenario.key) from None
        if "error" in info:
            self.loads[index] -= 1
            raise EnvLoadError(info["error"], scenario.key)
        run_dir = Path(run_dir) if run_dir else self.workdir / "episodes" / info["id"]
        return RayEpisode(self, self.actors[index], index, scenario, run_dir, info, task_idx, options)

    async def warm(self, scenario: Scenario) -> dict[int, float]:
        """Load ``scenario`` on every worker of every actor before episodes need it: seconds per worker, keyed
        ``actor * workers_per_actor + worker`` (``EnvLoadError`` when it cannot load)."""
        answers = await asyncio.gather(*(a.warm.remote(scenario.key) for a in self.actors))
        out: dict[int, float] = {}
        for i, answer in enumerate(answers):
            if "error" in answer:
                raise EnvLoadError(answer["error"], scenario.key)
            for w, seconds in answer["seconds"].items():
                out[i * self.workers_per_actor + int(w)] = seconds
        return out

    async def close(self) -> None:
        ray = require_ray() if self.actors or self._started_ray else None
        if self.actors:
            await asyncio.gather(*(a.stop.remote() for a in self.actors), return_exceptions=True)
            for actor in self.actors:
                ray.kill(actor)
            self.actors = []
        if self._started_ray:
            await asyncio.to_thread(ray.shutdown)
            self._started_ray = False
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
