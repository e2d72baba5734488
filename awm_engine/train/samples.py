"""Training samples from recorded rollouts, as the AWM paper trains (history-aware, step rewards).

For every action turn t of a rollout (every assistant turn, the final answer included) one sample:

* **context** — the system prompt, the task, the first ``list_tools`` exchange and the last w turns before t,
  chosen by the rollout's own window rule (``agent.rollout.window_groups``) and shaped as the endpoint received
  them (``agent.rollout.api_messages``): with the same w as the run, training sees exactly what inference saw;
* **target** — turn t's assistant message; the loss covers only it: ``loss_mask`` marks the target message
  (``loss_spans`` its characters), and when the endpoint returned token ids (``events.jsonl`` → ``model_turn``
  ``prompt_token_ids`` / ``token_ids``, recorded only if the run's window equals the export's) the sample carries
  them with ``completion_mask`` (all ones: every token of turn t, none of the context);
* **step reward** — the rollout's reward R (``verify.json``) broadcast to every action step; a rollout that
  stopped on a format error (``stop_reason`` ``format_error``: early termination) has R = −1.0 (``RewardConfig``),
  so the step of the format error — and the steps before it — get −1.0 even when the run was not verified;
  ``max_turns`` and ``timeout`` endings keep the task reward.

Rollouts that cannot teach the agent are left out, with the reason: no verdict (``judge_error``: exclude from
training), not verified, or ended by the environment or the endpoint (``environment_error``, ``llm_error``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from awm_engine.agent.meta_protocol import uses_vllm_extras
from awm_engine.agent.rollout import AgentConfig, api_messages, window_groups
from awm_engine.data.run_formats import EVENTS, RESULTS, TRAJECTORY
from awm_engine.verify.rewards import RewardConfig

DEFAULT_WINDOW = 3  # the paper trains with w = 3 (spec/awm-format.md §5.5, §8)
EXCLUDED_STOPS = {"environment_error": "the environment failed", "llm_error": "the endpoint failed"}


class TrainingDataError(ValueError):
    """A path that holds no rollouts, or a rollout awm cannot read."""


@dataclass
class RolloutRecord:
    """One recorded rollout, read from its run directory."""

    run_dir: Path
    rollout_id: str
    scenario: str
    task_id: int | None
    sample: int | None
    task: str
    messages: list[dict[str, Any]]
    trajectory: list[dict[str, Any]]
    config: AgentConfig
    tool_role: str
    stop_reason: str | None
    verification: dict[str, Any] | None
    model_turns: dict[int, dict[str, Any]] = field(default_factory=dict)  # iteration -> model_turn event

    @property
    def groups(self) -> list[list[dict[str, Any]]]:
        """The rollout's turns as ``Rollout.groups`` held them: an assistant message and its tool results."""
        groups: list[list[dict[str, Any]]] = []
        for message in self.messages[2:]:
            if message.get("role") == "assistant" or not groups:
                groups.append([message])
            else:
                groups[-1].append(message)
        return groups

    @property
    def first_list_group(self) -> int | None:
        """The turn of the first executed ``list_tools`` call (``Rollout.first_list_group``)."""
        for i, (entry, group) in enumerate(zip(self.trajectory, self.groups)):
            calls = entry.get("tool_calls") or []
            if calls and calls[0].get("name") == "list_tools" and any(m.get("role") == "tool" for m in group[1:]):
                return i
        return None

    def reward(self, rewards: RewardConfig | None = None) -> tuple[float | None, str | None]:
        """(R, None) when the rollout can be trained on; (None, why not) otherwise."""
        rewards = rewards or RewardConfig()
        if self.stop_reason in EXCLUDED_STOPS:
            return None, f"{self.stop_reason}: {EXCLUDED_STOPS[self.stop_reason]}"
        if self.stop_reason == "format_error":  # early termination: −1 whatever the verifier said
            return rewards.format_error, None
        if self.verification is None:
            return None, "not verified (no verify.json; run awm verify)"
        if not self.verification.get("has_verdict", True):
            return None, f"no verdict ({self.verification.get('label')}): excluded from training"
        reward = self.verification.get("reward")
        if not isinstance(reward, (int, float)):
            return None, "verify.json has no reward"
        return float(reward), None


def _read_events(path: Path) -> dict[int, dict[str, Any]]:
    turns: dict[int, dict[str, Any]] = {}
    if not path.is_file():
        return turns
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn last line (a killed writer)
        EVENTS.check(event, path)
        if event.get("type") == "model_turn" and isinstance(event.get("iteration"), int):
            turns[event["iteration"]] = event
    return turns


def _tool_role(data: dict[str, Any], config: AgentConfig) -> str:
    recorded = (data.get("awm") or {}).get("tool_role")
    if recorded in ("user", "tool"):
        return recorded
    if config.tool_message_role != "auto":  # runs recorded before the role was: decide as the rollout did
        return config.tool_message_role
    vllm = config.protocol == "reference" and config.mode == "meta" and uses_vllm_extras(data.get("api_url") or None)
    return "tool" if vllm else "user"


def load_rollout(run_dir: Path | str, rollout_id: str | None = None) -> RolloutRecord:
    run_dir = Path(run_dir)
    path = run_dir / TRAJECTORY.file
    if not path.is_file():
        raise TrainingDataError(f"{run_dir} has no {TRAJECTORY.file}")
    data = TRAJECTORY.read(path)
    awm = data.get("awm") or {}
    config = AgentConfig.from_dict(awm.get("config"))
    verify_path = run_dir / "verify.json"
    verification = json.loads(verify_path.read_text()) if verify_path.is_file() else None
    match = re.fullmatch(r"(\d+)_(\d+)", run_dir.name)  # an evaluation's rollouts/<scenario>/<task>_<sample>/
    sample = int(match.group(2)) if match else None
    scenario = str(data.get("scenario") or "")
    task_id = data.get("task_id")
    if rollout_id is None:
        rollout_id = f"{scenario}/{task_id}/{sample}" if sample is not None else run_dir.name
    return RolloutRecord(run_dir, rollout_id, scenario, task_id, sample, str(data.get("task") or ""),
                         list(data.get("messages") or []), list(data.get("trajectory") or []), config,
                         _tool_role(data, config), awm.get("stop_reason"), verification,
                         _read_events(run_dir / EVENTS.file))


def find_rollouts(path: Path | str) -> list[tuple[Path, str | None]]:
    """The run directories under ``path`` with their rollout ids: ``path`` itself when it is a rollout, an
    evaluation's rollouts in ``results.jsonl`` order (ids ``scenario/task/sample``), else every directory below
    holding a ``trajectory.json``."""
    path = Path(path)
    if (path / TRAJECTORY.file).is_file():
        return [(path, None)]
    results = path / RESULTS.file
    if results.is_file():
        found: dict[str, Path] = {}
        for line in results.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            RESULTS.check(record, results)
            run_dir = record.get("run_dir")
            if record.get("id") and run_dir:
                run_dir = Path(run_dir)
                if not run_dir.is_absolute() and not run_dir.exists():
                    run_dir = path / run_dir
                found[record["id"]] = run_dir  # the last line of an id wins (resume)
        runs = [(run_dir, rid) for rid, run_dir in found.items() if (run_dir / TRAJECTORY.file).is_file()]
        if runs:
            return runs
    runs = [(p.parent, None) for p in sorted(path.rglob(TRAJECTORY.file))]
    if not runs:
        raise TrainingDataError(f"no rollouts under {path} (no {TRAJECTORY.file})")
    return runs


@dataclass
class Sample:
    """One action turn of one rollout: what the model saw, what it wrote, and its step reward."""

    rollout_id: str
    scenario: str
    task_id: int | None
    sample: int | None
    task: str
    turn: int  # the 1-based iteration of the rollout
    num_turns: int
    prompt: list[dict[str, Any]]  # the context, as the endpoint received it
    completion: list[dict[str, Any]]  # [turn t's assistant message]
    reward: float  # the step reward
    episode_reward: float
    stop_reason: str | None
    label: str | None
    is_final: bool  # the last action of the rollout
    is_format_error: bool  # this step is the format error that ended the rollout
    window: int | None
    inference_window: int | None  # the window the rollout ran with
    run_dir: str
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    group_id: str = ""
    advantage: float | None = None
    group_size: int | None = None
    zero_variance: bool | None = None

    @property
    def id(self) -> str:
        return f"{self.rollout_id}#{self.turn}"

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.prompt + self.completion

    @property
    def loss_mask(self) -> list[int]:
        """Per message of ``messages``: 1 for the target (turn t), 0 for the context."""
        return [0] * len(self.prompt) + [1] * len(self.completion)

    @property
    def loss_spans(self) -> list[list[int]]:
        """``[message index, start, end]`` character spans of ``messages`` the loss covers (turn t's text)."""
        i = len(self.prompt)
        return [[i, 0, len(self.completion[0].get("content") or "")]]

    def to_record(self) -> dict[str, Any]:
        """The exported row: TRL's conversational ``prompt``/``completion`` (and ``messages``), verl's
        ``data_source``/``extra_info``/``agent_name``, rewards, GRPO group and advantage, and token ids."""
        record: dict[str, Any] = {
            "id": self.id, "group_id": self.group_id, "rollout_id": self.rollout_id,
            "scenario": self.scenario, "task_id": self.task_id, "sample": self.sample, "turn": self.turn,
            "num_turns": self.num_turns, "task": self.task,
            "prompt": self.prompt, "completion": self.completion, "messages": self.messages,
            "loss_mask": self.loss_mask, "loss_spans": self.loss_spans,
            "reward": self.reward, "episode_reward": self.episode_reward,
            "advantage": self.advantage, "group_size": self.group_size, "zero_variance": self.zero_variance,
            "stop_reason": self.stop_reason, "label": self.label, "is_final": self.is_final,
            "is_format_error": self.is_format_error, "window": self.window, "inference_window": self.inference_window,
            "prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids,
            "completion_mask": [1] * len(self.completion_ids) if self.completion_ids is not None else None,
            "data_source": f"awm/{self.scenario}", "agent_name": "awm_agent",
            "extra_info": {"scenario": self.scenario, "task_id": self.task_id, "rollout_id": self.rollout_id,
                           "turn": self.turn, "run_dir": self.run_dir},
        }
        return record


def rollout_samples(record: RolloutRecord, window: int | None = DEFAULT_WINDOW,
                    rewards: RewardConfig | None = None) -> tuple[list[Sample], str | None]:
    """The samples of one rollout, or ([], why it is left out)."""
    reward, why = record.reward(rewards)
    if reward is None:
        return [], why
    groups = record.groups
    if not groups:
        return [], "no assistant turns"
    first_list = record.first_list_group
    mode, role = record.config.mode, record.tool_role
    inference_window = record.config.history_window
    same_window = inference_window == window
    label = (record.verification or {}).get("label")
    samples = []
    for t, group in enumerate(groups):
        # what the rollout's visible_messages() returned when it asked for turn t: groups[:t], and the first
        # list_tools exchange only once it had happened
        keep = window_groups(t, first_list if first_list is not None and first_list < t else None, window)
        context = record.messages[:2] + [m for i in keep for m in groups[i]]
        last = t == len(groups) - 1
        turn_event = record.model_turns.get(t + 1) or {}
        prompt_ids = turn_event.get("prompt_token_ids") if same_window else None
        completion_ids = turn_event.get("token_ids") if same_window else None
        if prompt_ids is None or completion_ids is None:
            prompt_ids = completion_ids = None
        samples.append(Sample(
            rollout_id=record.rollout_id, scenario=record.scenario, task_id=record.task_id, sample=record.sample,
            task=record.task, turn=t + 1, num_turns=len(groups),
            prompt=api_messages(context, mode, role), completion=api_messages([group[0]], mode, role),
            reward=reward, episode_reward=reward, stop_reason=record.stop_reason, label=label, is_final=last,
            is_format_error=last and record.stop_reason == "format_error", window=window,
            inference_window=inference_window, run_dir=str(record.run_dir), prompt_ids=prompt_ids,
            completion_ids=completion_ids, group_id=f"{record.scenario}/{record.task_id}"))
    return samples, None


@dataclass
class SampleSet:
    samples: list[Sample]
    rollouts: list[RolloutRecord]
    skipped: list[tuple[str, str]]  # (rollout id, why)
    window_mismatch: list[str]  # rollouts that ran with another window than the export's


def build_samples(path: Path | str | Iterable[Path | str], window: int | None = DEFAULT_WINDOW,
                  rewards: RewardConfig | None = None) -> SampleSet:
    """Every sample of every rollout under ``path`` (a rollout run directory, an evaluation run, a directory of
    runs, or a list of those)."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    found: list[tuple[Path, str | None]] = []
    for p in paths:
        found += find_rollouts(p)
    out = SampleSet([], [], [], [])
    for run_dir, rid in found:
        record = load_rollout(run_dir, rid)
        out.rollouts.append(record)
        samples, why = rollout_samples(record, window, rewards)
        if why is not None:
            out.skipped.append((record.rollout_id, why))
            continue
        if record.config.history_window != window:
            out.window_mismatch.append(record.rollout_id)
        out.samples += samples
    return out
