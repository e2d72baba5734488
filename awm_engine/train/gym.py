"""A Gym-style API over the engine's own episode lifecycle: ``reset(scenario, task)`` → (observation, info) and
``step(action)`` → (observation, reward, terminated, truncated, info).

``AWMEnv`` runs ``eval.episode.run_episode`` — the call behind ``awm agent run`` — with a policy fed from a
queue: ``reset`` starts the episode (a worker of an ``EnvPool``, the run directory, the rollout) and returns as
soon as the rollout asks for the first turn; ``step`` hands it one assistant turn and returns when it asks for
the next one or has ended. The protocol, limits, format errors, the run directory and verification are
therefore exactly those of ``awm agent run`` with the same ``AgentConfig``: the same turns give the same
trajectory and the same reward.

* **observation** — the chat messages the model is to answer next, as an OpenAI-compatible endpoint would
  receive them (history window applied); ``info["new_messages"]`` holds only those the environment added in
  this step (the tool result), ``info["tool_response"]`` its text.
* **action** — the assistant turn: its text (meta mode: a ``<tool_call>…</tool_call>``, or the final answer),
  or an ``AssistantTurn``, or ``{"content": …, "tool_calls": [{"id", "name", "arguments"}]}`` (native mode).
* **reward** — 0.0 until the episode ends; then the verified reward (``verify.json``; −1.0 for a format error
  with early termination). ``terminated``: final answer, format error, environment failure; ``truncated``:
  ``max_turns`` or the episode timeout. ``info`` then has ``stop_reason``, ``label``, ``has_verdict``,
  ``run_dir`` and the verification.

Reset is explicit (Gymnasium's autoreset DISABLED): after the end, ``step`` raises until the next ``reset``.
``AWMVectorEnv`` batches several environments over one pool (``reset``/``step`` take and return lists);
``SyncAWMEnv`` is the blocking form, over a background event loop, for callers without one (TRL).
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Coroutine

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import AssistantTurn, NativeCall
from awm_engine.agent.rollout import AgentConfig
from awm_engine.data.catalog import Catalog, Scenario
from awm_engine.data.run_formats import FormatError, Observation, RolloutFinished
from awm_engine.eval.episode import EpisodeOutcome, run_episode
from awm_engine.runtime.pool import EnvPool
from awm_engine.verify.rewards import RewardConfig

TERMINATED = ("final_answer", "format_error", "environment_error", "llm_error")
TRUNCATED = ("max_turns", "timeout")


class EpisodeNotRunning(RuntimeError):
    """``step`` without a running episode (never reset, or already ended)."""


class EpisodeOpenError(RuntimeError):
    """The environment of the episode could not be started (``EpisodeLoadFailure``'s message)."""


class _QueuePolicy:
    """The trainer's turns: ``next_turn`` publishes the messages the model is to answer and waits for its turn."""

    def __init__(self, name: str, base_url: str | None):
        self.name = name
        # the rollout reads the endpoint's URL to choose the request shape (spec §5.5: local vLLM)
        self.endpoint = SimpleNamespace(base_url=base_url) if base_url else None
        self.requests: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
        self.actions: asyncio.Queue[AssistantTurn] = asyncio.Queue()

    async def next_turn(self, messages, tools, mode) -> AssistantTurn:
        await self.requests.put(messages)
        return await self.actions.get()


def _after_last_assistant(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return messages[i + 1:]
    return []


def as_turn(action: Any) -> AssistantTurn:
    """An action as the rollout's ``AssistantTurn``."""
    if isinstance(action, AssistantTurn):
        return action
    if isinstance(action, str):
        return AssistantTurn(action)
    if isinstance(action, dict):
        calls = []
        for i, c in enumerate(action.get("tool_calls") or []):
            fn = c.get("function") or c  # the OpenAI shape or a flat {"name", "arguments"}
            args = fn.get("arguments")
            calls.append(NativeCall(c.get("id") or f"call_{i}", fn.get("name") or "",
                                    args if isinstance(args, str) else json.dumps(args or {})))
        return AssistantTurn(action.get("content") or "", calls)
    raise TypeError(f"an action is a string, an AssistantTurn or a message dict, not {type(action).__name__}")


@dataclass
class _Episode:
    scenario: str
    task_id: int
    policy: _QueuePolicy
    task: asyncio.Task
    run_dir: Path
    tools: list[dict[str, Any]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    turns: int = 0


class AWMEnv:
    """One episode at a time of any scenario of ``catalog`` (async).

    ``pool``: the ``EnvPool`` whose workers host the episodes (shared by many environments; without one, the
    environment starts its own with one worker and closes it in ``close``). ``config``: the ``AgentConfig``
    (protocol, mode, limits, history window…) — as ``awm agent run`` flags would build it. ``verify``: code |
    sql | both | None. ``meta``: what ``trajectory.json`` records about the model (``model``, ``api_url``,
    ``temperature``). ``base_url``: the model server's URL when the request shape depends on it (the reference
    protocol sends tool results as role ``tool`` to local vLLM URLs)."""

    def __init__(self, catalog: Catalog | None = None, *, pool: EnvPool | None = None,
                 config: AgentConfig | None = None, verify: str | None = "code", judge: Endpoint | None = None,
                 rewards: RewardConfig | None = None, out_dir: Path | str = "outputs/train",
                 meta: dict[str, Any] | None = None, base_url: str | None = None, backend: str = "pool",
                 policy_name: str = "llm"):
        self.catalog = catalog or Catalog.load()
        self.pool = pool
        self._own_pool = pool is None and backend == "pool"
        self.config = config or AgentConfig()
        self.verify = verify
        self.judge = judge
        self.rewards = rewards or RewardConfig()
        self.out_dir = Path(out_dir)
        self.meta = dict(meta or {})
        self.base_url = base_url
        self.backend = backend
        self.policy_name = policy_name
        self.episode: _Episode | None = None
        self.outcome: EpisodeOutcome | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    async def _ensure_pool(self) -> None:
        if self._own_pool and self.pool is None:
            self.pool = EnvPool(workers=1)
            await self.pool.start()

    async def reset(self, scenario: str | Scenario, task: int, *, run_dir: Path | str | None = None,
                    seed: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start a new episode of ``scenario`` task ``task`` (an index); ends any episode still running."""
        await self.abort()
        await self._ensure_pool()
        s = scenario if isinstance(scenario, Scenario) else self.catalog.get(scenario)
        if run_dir is None:
            stamp = time.strftime("%Y%m%d_%H%M%S")
            run_dir = self.out_dir / f"{stamp}_{s.key}_task_{task}_{id(self):x}_{time.monotonic_ns() % 10**9}"
        policy = _QueuePolicy(self.policy_name, self.base_url)
        meta = {"model": self.policy_name, "api_url": self.base_url or "", **self.meta}
        episode_holder: dict[str, Any] = {}

        def on_open(handle) -> None:
            episode_holder["tools"] = handle.list_tools()

        def on_event(event) -> None:
            if self.episode is not None:
                self.episode.events.append(event)

        coro = run_episode(self.catalog, s, task, policy, self.config, run_dir, pool=self.pool,
                           verify_mode=self.verify, judge=self.judge, rewards=self.rewards, meta=meta,
                           on_event=on_event, on_open=on_open, backend=self.backend)
        self.outcome = None
        self.episode = _Episode(s.key, task, policy, asyncio.ensure_future(coro), Path(run_dir).resolve())
        messages = await self._next(self.episode)
        if messages is None:  # ended before the first turn: it could not be opened
            outcome = self.outcome
            self.episode = None
            if outcome is not None and outcome.failure is not None:
                raise EpisodeOpenError(str(outcome.failure))
            raise EpisodeOpenError(f"the episode of {s.key} task {task} ended before its first turn")
        ep = self.episode
        ep.tools = episode_holder.get("tools", [])
        ep.events.clear()
        info = {"scenario": s.key, "task_id": task, "task": messages[1]["content"] if len(messages) > 1 else "",
                "tools": ep.tools, "run_dir": str(ep.run_dir), "turn": 1, "mode": self.config.mode}
        return messages, info

    async def _next(self, ep: _Episode) -> list[dict[str, Any]] | None:
        """The messages of the rollout's next request, or None when the episode ended (``self.outcome`` set)."""
        request = asyncio.ensure_future(ep.policy.requests.get())
        done, _ = await asyncio.wait({request, ep.task}, return_when=asyncio.FIRST_COMPLETED)
        if request in done:
            return request.result()
        request.cancel()
        self.outcome = ep.task.result()  # raises what run_episode raised (awm's own bugs)
        return None

    async def step(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        ep = self.episode
        if ep is None:
            raise EpisodeNotRunning("no episode is running: call reset(scenario, task) first")
        await ep.policy.actions.put(as_turn(action))
        ep.turns += 1
        messages = await self._next(ep)
        events, ep.events = ep.events, []
        observations = [e for e in events if isinstance(e, Observation)]
        info: dict[str, Any] = {
            "turn": ep.turns + 1, "run_dir": str(ep.run_dir),
            "tool_response": observations[-1].text if observations else None,
            "format_errors": [{"kind": e.kind, "detail": e.detail} for e in events if isinstance(e, FormatError)],
        }
        if messages is not None:
            info["new_messages"] = _after_last_assistant(messages)  # the tool result(s) of this step
            return messages, 0.0, False, False, info
        outcome = self.outcome
        self.episode = None
        finished = outcome.finished or next((e for e in events if isinstance(e, RolloutFinished)), None)
        stop = finished.stop_reason if finished else None
        report = outcome.verification
        reward = report.reward if report is not None else (self.rewards.format_error if stop == "format_error"
                                                           else 0.0)
        info.update({"stop_reason": stop, "reward": reward if report is not None or stop == "format_error" else None,
                     "label": report.label if report else None,
                     "has_verdict": report.has_verdict if report else None,
                     "verification": report.to_dict() if report else None,
                     "final_answer": finished.final_answer if finished else None,
                     "new_messages": []})
        final_messages = outcome.rollout._api_messages() if outcome.rollout is not None else []
        return final_messages, float(reward), stop in TERMINATED, stop in TRUNCATED, info

    async def abort(self) -> None:
        """End a running episode without verifying it (its run directory keeps what happened)."""
        ep, self.episode = self.episode, None
        if ep is not None and not ep.task.done():
            ep.task.cancel()
            try:
                await ep.task
            except (asyncio.CancelledError, Exception):
                pass

    async def close(self) -> None:
        await self.abort()
        if self._own_pool and self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def __aenter__(self) -> "AWMEnv":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def running(self) -> bool:
        return self.episode is not None


class AWMVectorEnv:
    """``num_envs`` environments over one shared pool: batched ``reset`` and ``step`` (lists in, lists out).
    An environment whose episode has ended takes ``None`` as its action and answers
    ``(None, 0.0, True, False, {"done": True})`` until it is reset."""

    def __init__(self, num_envs: int, catalog: Catalog | None = None, *, workers: int | None = None,
                 pool: EnvPool | None = None, **env_kwargs: Any):
        self.catalog = catalog or Catalog.load()
        self.num_envs = num_envs
        self.pool = pool
        self._own_pool = pool is None
        self.workers = workers
        self.env_kwargs = env_kwargs
        self.envs: list[AWMEnv] = []

    async def start(self) -> "AWMVectorEnv":
        if self.pool is None:
            self.pool = EnvPool(workers=self.workers)
            await self.pool.start()
        self.envs = [AWMEnv(self.catalog, pool=self.pool, **self.env_kwargs) for _ in range(self.num_envs)]
        return self

    async def reset(self, tasks: list[tuple[str | Scenario, int]], run_dirs: list[Path | str] | None = None):
        if not self.envs:
            await self.start()
        if len(tasks) != self.num_envs:
            raise ValueError(f"{len(tasks)} tasks for {self.num_envs} environments")
        results = await asyncio.gather(*(env.reset(s, t, run_dir=run_dirs[i] if run_dirs else None)
                                         for i, (env, (s, t)) in enumerate(zip(self.envs, tasks))))
        return [r[0] for r in results], [r[1] for r in results]

    async def step(self, actions: list[Any]):
        async def one(env: AWMEnv, action: Any):
            if action is None or not env.running:
                return None, 0.0, True, False, {"done": True}
            return await env.step(action)

        results = await asyncio.gather(*(one(e, a) for e, a in zip(self.envs, actions)))
        return tuple(list(x) for x in zip(*results))

    async def close(self) -> None:
        await asyncio.gather(*(env.close() for env in self.envs))
        if self._own_pool and self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def __aenter__(self) -> "AWMVectorEnv":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


# -- blocking use, for callers without an event loop -------------------------------------------------

class LoopThread:
    """An event loop in a daemon thread; ``run(coro)`` blocks until the coroutine is done there."""

    _shared: "LoopThread | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="awm-train-loop", daemon=True)
        self.thread.start()

    @classmethod
    def shared(cls) -> "LoopThread":
        with cls._lock:
            if cls._shared is None or not cls._shared.thread.is_alive():
                cls._shared = cls()
            return cls._shared

    def submit(self, coro: Coroutine) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine, timeout: float | None = None) -> Any:
        return self.submit(coro).result(timeout)


class SharedPool:
    """One ``EnvPool`` per loop thread, started on first use (the environments of a process share it)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers
        self.pool: EnvPool | None = None
        self._lock: asyncio.Lock | None = None

    async def get(self) -> EnvPool:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.pool is None:
                pool = EnvPool(workers=self.workers)
                await pool.start()
                self.pool = pool
            return self.pool

    async def close(self) -> None:
        if self.pool is not None:
            pool, self.pool = self.pool, None
            await pool.close()


class SyncAWMEnv:
    """``AWMEnv`` with blocking ``reset``/``step``/``close``, run on a background loop (``LoopThread``) with a pool
    shared by every ``SyncAWMEnv`` given the same ``SharedPool``."""

    def __init__(self, catalog: Catalog | None = None, *, loop: LoopThread | None = None,
                 shared_pool: SharedPool | None = None, **env_kwargs: Any):
        self.loop = loop or LoopThread.shared()
        self.shared_pool = shared_pool or SharedPool()
        self.env = AWMEnv(catalog, pool=None, backend="pool", **env_kwargs)
        self.env._own_pool = False  # the pool is the shared one

    async def _reset(self, scenario, task, run_dir):
        self.env.pool = await self.shared_pool.get()
        return await self.env.reset(scenario, task, run_dir=run_dir)

    def reset(self, scenario: str | Scenario, task: int, *, run_dir: Path | str | None = None):
        return self.loop.run(self._reset(scenario, task, run_dir))

    def step(self, action: Any):
        return self.loop.run(self.env.step(action))

    def abort(self) -> None:
        self.loop.run(self.env.abort())

    def close(self) -> None:
        self.loop.run(self.env.abort())

    @property
    def running(self) -> bool:
        return self.env.running
