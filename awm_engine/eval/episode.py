"""Task → rollout → verification → reward, in one call: what ``awm agent run`` and evaluations use."""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import (
    HumanPolicy,
    ImmediatePolicy,
    LLMPolicy,
    OraclePolicy,
    Policy,
    PolicyError,
    ReplayPolicy,
    TerminalHumanPolicy,
)
from awm_engine.agent.rollout import AgentConfig, Rollout, RolloutFinished
from awm_engine.data.catalog import Catalog, Scenario
from awm_engine.runtime.pool import EnvPool
from awm_engine.verify.rewards import RewardConfig
from awm_engine.verify.verification import VerifyReport, verify_run

POLICIES = ("llm", "oracle", "replay", "immediate", "human")


def default_run_dir(scenario: Scenario, task_idx: int, root: Path | str = "outputs/agents") -> Path:
    return Path(root) / f"{time.strftime('%Y%m%d_%H%M%S')}_{scenario.key}_task_{task_idx}_{secrets.token_hex(2)}"


def make_policy(kind: str, scenario: Scenario, task_idx: int, mode: str = "meta", endpoint: Endpoint | None = None,
                replay_from: Path | str | None = None, style: str = "reference") -> Policy:
    if kind == "llm":
        if endpoint is None:
            raise PolicyError("the llm policy needs a model endpoint", "config")
        return LLMPolicy(endpoint)
    if kind == "oracle":
        solution = scenario.solution(task_idx)
        if solution is None:
            raise PolicyError(f"{scenario.key} has no reference solution for task {task_idx} "
                              "(reference_solutions.jsonl)", "config")
        return OraclePolicy(solution, mode, style)
    if kind == "replay":
        if replay_from is None:
            raise PolicyError("the replay policy needs a run directory or trajectory.json", "config")
        path = Path(replay_from)
        path = path / "trajectory.json" if path.is_dir() else path
        return ReplayPolicy(json.loads(path.read_text()))
    if kind == "immediate":
        return ImmediatePolicy()
    if kind == "human":
        return HumanPolicy()
    if kind == "terminal":
        return TerminalHumanPolicy()
    raise PolicyError(f"unknown policy {kind!r} (choose from {', '.join(POLICIES)})", "config")


@dataclass
class EpisodeOutcome:
    run_dir: Path
    finished: RolloutFinished
    verification: VerifyReport | None
    rollout: Rollout | None = None

    @property
    def reward(self) -> float | None:
        return self.verification.reward if self.verification else None


async def run_episode(catalog: Catalog, scenario: Scenario, task_idx: int, policy: Policy,
                      config: AgentConfig | None = None, run_dir: Path | str | None = None,
                      pool: EnvPool | None = None, verify_mode: str | None = "code",
                      judge: Endpoint | None = None, rewards: RewardConfig | None = None,
                      meta: dict[str, Any] | None = None, on_event=None) -> EpisodeOutcome:
    """Open an episode, run the policy, close the episode, verify (unless ``verify_mode`` is None)."""
    config = config or AgentConfig()
    task = scenario.task(task_idx).text
    run_dir = Path(run_dir) if run_dir else default_run_dir(scenario, task_idx)
    run_dir = run_dir.resolve()
    own_pool = pool is None
    if own_pool:
        pool = EnvPool(workers=1)
        await pool.start()
    try:
        episode = await pool.open_episode(scenario, run_dir=run_dir, task_idx=task_idx)
        info = {"data_dirs": [str(Path(d).resolve()) for d in catalog.dirs], **(meta or {})}
        rollout = Rollout(episode, scenario.key, task_idx, task, policy, config, info)
        try:
            async for event in rollout.events():
                if on_event is not None:
                    on_event(event)
        finally:
            await episode.close()
    finally:
        if own_pool:
            await pool.close()
    report = None
    if verify_mode:
        report = await verify_run(run_dir, verify_mode, catalog, judge, rewards)
    return EpisodeOutcome(run_dir, rollout.finished, report, rollout)
