"""The on-disk run formats: every file awm writes into a run directory that awm reads back.

Each format has a ``format_version``, stamped into every file (every line, for the JSONL formats):

========== ======================= ======================================================================
kind       file                    holds
========== ======================= ======================================================================
trajectory ``trajectory.json``     one rollout: AWM's keys plus ``awm`` (policy, config, stop reason …)
events     ``events.jsonl``        one rollout's step events, one per line, appended live
results    ``results.jsonl``       one line per finished rollout of an evaluation
config     ``config.json``         an evaluation's resolved configuration (``EvalConfig``)
metadata   ``metadata.json``       an evaluation's aggregates, rewritten as it runs
========== ======================= ======================================================================

Readers call ``check_format`` (or ``read_json``): a file without ``format_version`` is version 0 (written
before versions existed) and is read as before; a file from a newer awm is refused with
``NewerFormatError``, whose message says which file and what to do. The step-event dataclasses
(``events.jsonl``) and ``EvalConfig`` (``config.json``) live here too, so that this module is the one
definition of what goes on disk.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

VERSION_KEY = "format_version"


class RunFormatError(ValueError):
    """A run file awm cannot read (its format version is newer than this awm's, or not a version at all)."""


class NewerFormatError(RunFormatError):
    def __init__(self, path: Path | str, kind: str, version: int, supported: int):
        super().__init__(f"{path} was written by a newer awm ({kind} format {version}; this awm reads up to "
                         f"{supported}): upgrade awm")
        self.path, self.kind, self.version, self.supported = str(path), kind, version, supported


@dataclass(frozen=True)
class RunFormat:
    kind: str
    file: str
    version: int  # the version this awm writes, and the newest it reads
    holds: str

    def stamp(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with this format's version as its first key."""
        return {VERSION_KEY: self.version, **{k: v for k, v in data.items() if k != VERSION_KEY}}

    def check(self, data: Any, path: Path | str) -> Any:
        """``data`` itself when this awm can read it; a missing version is 0 (legacy)."""
        version = data.get(VERSION_KEY, 0) if isinstance(data, dict) else 0
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise RunFormatError(f"{path}: {VERSION_KEY} {version!r} is not a version number")
        if version > self.version:
            raise NewerFormatError(path, self.kind, version, self.version)
        return data

    def read(self, path: Path | str) -> dict[str, Any]:
        """Parse a JSON file of this format and check its version."""
        return self.check(json.loads(Path(path).read_text()), path)


TRAJECTORY = RunFormat("trajectory", "trajectory.json", 1, "one rollout: AWM's keys plus awm's own under `awm`")
EVENTS = RunFormat("events", "events.jsonl", 1, "one typed step event per line, appended live")
RESULTS = RunFormat("results", "results.jsonl", 1, "one line per finished rollout of an evaluation")
CONFIG = RunFormat("config", "config.json", 1, "an evaluation's resolved configuration")
METADATA = RunFormat("metadata", "metadata.json", 1, "an evaluation's aggregates")
FORMATS: dict[str, RunFormat] = {f.kind: f for f in (TRAJECTORY, EVENTS, RESULTS, CONFIG, METADATA)}


def check_format(data: Any, kind: str, path: Path | str) -> Any:
    """Return ``data`` if this awm reads it; ``NewerFormatError`` if a newer awm wrote it."""
    return FORMATS[kind].check(data, path)


def read_json(path: Path | str, kind: str) -> dict[str, Any]:
    return FORMATS[kind].read(path)


# -- events.jsonl: the step events of a rollout ---------------------------------------------------

@dataclass
class StepEvent:
    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        return {VERSION_KEY: EVENTS.version, "type": self.type, "time": time.time(), **asdict(self)}


@dataclass
class RolloutStarted(StepEvent):
    type: ClassVar[str] = "rollout_started"
    scenario: str
    task_id: int | None
    task: str
    policy: str
    mode: str
    tools: int
    run_dir: str


@dataclass
class ModelTurn(StepEvent):
    type: ClassVar[str] = "model_turn"
    iteration: int
    content: str
    native_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    latency_ms: float = 0.0
    reasoning: str | None = None
    # the token ids of the request's prompt and of this turn, when the endpoint returns them (vLLM:
    # ``"return_token_ids": true`` in the endpoint's extra_body): what training uses as its exact tokens
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None


@dataclass
class ToolCall(StepEvent):
    type: ClassVar[str] = "tool_call"
    iteration: int
    call_id: str
    name: str  # list_tools | call_tool | a native tool name
    tool: str | None
    arguments: Any


@dataclass
class Observation(StepEvent):
    type: ClassVar[str] = "observation"
    iteration: int
    call_id: str
    tool: str | None
    text: str
    is_error: bool = False
    error_kind: str | None = None
    status: int | None = None
    elapsed_ms: float = 0.0
    traceback: str | None = None  # the exception behind an environment error (the model never sees it)
    truncated: bool = False  # the text was cut at the result cap (it ends with a marker saying so)
    original_bytes: int | None = None  # its size before the cut


@dataclass
class FormatError(StepEvent):
    type: ClassVar[str] = "format_error"
    iteration: int
    kind: str
    detail: str


@dataclass
class RolloutFinished(StepEvent):
    type: ClassVar[str] = "rollout_finished"
    stop_reason: str
    final_answer: str
    iterations: int
    tool_calls: int
    format_errors: int
    env_errors: int
    elapsed_s: float
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


# -- config.json: an evaluation's configuration -----------------------------------------------------

@dataclass
class EvalConfig:
    data_dirs: list[str]
    scenarios: list[str] | None = None
    tasks: list[int] | None = None
    policy: str = "llm"
    endpoint: dict[str, Any] | None = None  # Endpoint.public() and max_retries (never the key)
    k: int = 1
    concurrency: int = 8
    workers: int | None = None
    verify: str = "code"  # code | sql | none
    judge: dict[str, Any] | None = None
    agent: dict[str, Any] = field(default_factory=dict)  # AgentConfig.to_dict(); empty: the defaults
    rewards: dict[str, float] = field(default_factory=dict)  # RewardConfig.to_dict(); empty: the defaults
    pass_threshold: float = 0.5
    executor: str = "local"  # local (worker processes here) | ray (environment workers as Ray actors)
    ray_address: str | None = None  # a running cluster's address (None: start or join a local Ray)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))

    def to_dict(self) -> dict[str, Any]:
        return CONFIG.stamp(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path | str = CONFIG.file) -> EvalConfig:
        CONFIG.check(data, path)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @classmethod
    def load(cls, run_dir: Path | str) -> EvalConfig:
        """The ``config.json`` of an evaluation run directory (``FileNotFoundError`` if it has none)."""
        path = Path(run_dir) / CONFIG.file
        return cls.from_dict(json.loads(path.read_text()), path)

    @property
    def model(self) -> str:
        return (self.endpoint or {}).get("model") or self.policy
