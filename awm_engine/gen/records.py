"""Typed records of a generation run: its configuration and one event per stage attempt (versioned)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

GEN_FORMAT_VERSION = 1

STAGES = ("scenario", "task", "db", "sample", "spec", "env", "verifier")
# the stages that run once per scenario, in order (``scenario`` produces the scenarios themselves)
SCENARIO_STAGES = STAGES[1:]


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.requests += other.requests

    def cost(self, price_in: float | None, price_out: float | None) -> float | None:
        """USD, from prices per million tokens; None when no price is configured."""
        if price_in is None and price_out is None:
            return None
        return (self.prompt_tokens * (price_in or 0.0) + self.completion_tokens * (price_out or 0.0)) / 1e6


@dataclass
class GenConfig:
    model: str
    base_url: str
    retries: int = 4  # the reference's max_retry: 5 attempts in all
    num_tasks: int = 10
    error_threshold: float = 0.1
    verifier_mode: str = "sql"  # sql | code | both
    concurrency: int = 4  # scenarios in flight
    max_requests: int = 16  # LLM requests in flight
    temperature: float = 1.0
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    similarity: float | None = None  # the diversity threshold (None: the method's default)
    price_in: float | None = None
    price_out: float | None = None
    endpoint_waits: int = 5  # waits (2, 4, 8 … s) for a rate-limited or unreachable endpoint before an attempt fails
    format_version: int = GEN_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GenConfig":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class AttemptEvent:
    """One attempt of one stage for one scenario (``task`` set for per-task verifier attempts)."""

    scenario: str
    stage: str
    attempt: int
    ok: bool
    errors: list[str] = field(default_factory=list)
    score: float | None = None  # the stage's error measure (lower is better), e.g. an error ratio
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    task: int | None = None
    time: float = 0.0
    kind: str = "attempt"
    format_version: int = GEN_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StageEvent:
    """A stage finished for a scenario: ``status`` done (an attempt passed), kept (none passed; the best attempt
    was written, as the reference does) or failed (nothing usable)."""

    scenario: str
    stage: str
    status: str
    attempts: int
    chosen: int | None = None
    last_error: str | None = None
    time: float = 0.0
    kind: str = "stage"
    format_version: int = GEN_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
