"""Labels to rewards (spec/awm-format.md §6.4), configurable."""
from __future__ import annotations

from dataclasses import asdict, dataclass

LABELS = ("complete", "incomplete", "server_error", "agent_error", "judge_error", "others")


@dataclass
class RewardConfig:
    complete: float = 1.0
    incomplete: float = 0.1
    server_error: float = 0.0
    agent_error: float = 0.0
    others: float = 0.0
    judge_error: float = 0.0  # no verdict: recorded with has_verdict = False (exclude from training)
    format_error: float = -1.0  # the rollout stopped on malformed output (training setting)

    def reward(self, label: str, stop_reason: str | None = None) -> float:
        if stop_reason == "format_error":
            return self.format_error
        return float(getattr(self, label, 0.0)) if label in LABELS else 0.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)
