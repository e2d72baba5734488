"""GRPO groups: the G rollouts of one task (``awm eval run -k G`` records them), and their advantages.

A group is one task of one evaluation run, keyed ``<run>/<scenario>/<task_id>`` (groups of two runs never mix);
rollout runs recorded on their own (not by an evaluation) are grouped by task, ``<scenario>/<task_id>``. Each rollout's advantage is ``(R − mean) / (std + eps)`` over the
rewards R of its group's rollouts, with the unbiased standard deviation (n − 1; as TRL's and verl's GRPO
compute it) and ``eps`` = 1e-6 (verl's default). A group whose rewards are all equal — or that has a single
rollout — carries no learning signal: its advantages are 0.0 and it is flagged ``zero_variance``. Every
sample of a rollout gets that rollout's advantage.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from awm_engine.train.samples import Sample

EPS = 1e-6


@dataclass
class GroupStats:
    group_id: str
    rollouts: list[str]
    rewards: list[float]
    mean: float
    std: float
    zero_variance: bool
    advantages: dict[str, float]  # rollout id -> advantage

    def to_dict(self) -> dict:
        return {"group_id": self.group_id, "size": len(self.rollouts), "rewards": self.rewards, "mean": self.mean,
                "std": self.std, "zero_variance": self.zero_variance, "advantages": self.advantages}


def group_advantages(group_id: str, rewards: dict[str, float], eps: float = EPS) -> GroupStats:
    """Advantages of one group from its rollouts' rewards (rollout id -> R)."""
    ids = list(rewards)
    values = [rewards[i] for i in ids]
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    zero = n < 2 or std < 1e-12
    advantages = {i: 0.0 if zero else (rewards[i] - mean) / (std + eps) for i in ids}
    return GroupStats(group_id, ids, values, mean, std, zero, advantages)


def assign_advantages(samples: list[Sample], eps: float = EPS) -> list[GroupStats]:
    """Group the samples' rollouts by task, compute each group's advantages and write them into the samples."""
    by_group: dict[str, dict[str, float]] = {}
    for s in samples:
        by_group.setdefault(s.group_id, {})[s.rollout_id] = s.episode_reward
    stats = {gid: group_advantages(gid, rewards, eps) for gid, rewards in by_group.items()}
    for s in samples:
        g = stats[s.group_id]
        s.advantage = g.advantages[s.rollout_id]
        s.group_size = len(g.rollouts)
        s.zero_variance = g.zero_variance
    return list(stats.values())
