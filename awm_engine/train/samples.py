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
from awm_engine.data.jsonl import text_lines
from awm_engine.verify.rewards import RewardConfig

DEFAULT_WINDOW = 3  # the paper trains with w = 3 (spec/awm-format.md §5.5, §8)
EXCLUDED_STOPS = {"environment_error": "the environment failed", "llm_error": "the endpoint failed",
                  "abandoned": "stopped before it ended (the player left, or Ctrl-C)"}


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
    group_id: str = ""  # its GRPO group: the task (``scenario/task_id``), within its evaluation run if it has one
    run_id: str | None = None  # the evaluation run it belongs to (None: a rollout run on its own)

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
    for line in text_lines(path):
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


def load_rollout(run_dir: Path | str, rollout_id: str | None = None, group_id: str | None = None,
                 run_id: str | None = None) -> RolloutRecord:
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
        identity = _identity(run_dir.resolve(), scenario, task_id, sample)
        rollout_id, group_id, run_id = identity if identity else (run_dir.name, None, None)
    record = RolloutRecord(run_dir, rollout_id, scenario, task_id, sample, str(data.get("task") or ""),
                           list(data.get("messages") or []), list(data.get("trajectory") or []), config,
                           _tool_role(data, config), awm.get("stop_reason"), verification,
                           _read_events(run_dir / EVENTS.file))
    record.group_id = group_id or f"{scenario}/{task_id}"
    record.run_id = run_id
    return record


def _eval_run_of(run_dir: Path) -> Path | None:
    """The evaluation run holding ``run_dir`` when it is one of its ``rollouts/<scenario>/<task>_<sample>/``."""
    run = run_dir.parent.parent.parent
    if run_dir.parent.parent.name == "rollouts" and (run / RESULTS.file).is_file():
        return run
    return None


def _identity(run_dir: Path, scenario: str, task_id, sample: int | None) -> tuple[str, str, str] | None:
    """(rollout id, group id, run id) of an evaluation's rollout found on its own: the run's name as its id."""
    run = _eval_run_of(run_dir)
    if run is None or sample is None:
        return None
    return f"{run.name}/{scenario}/{task_id}/{sample}", f"{run.name}/{scenario}/{task_id}", run.name


@dataclass(frozen=True)
class FoundRollout:
    """A rollout to export with its identity: ``rollout_id`` unique in the export, ``group_id`` its GRPO group."""

    run_dir: Path
    rollout_id: str
    group_id: str | None  # None: the task (``scenario/task_id``), read from the rollout
    run_id: str | None  # the evaluation run it belongs to (None: a rollout run on its own)


def _run_name(run: Path, root: Path, root_is_run: bool) -> str:
    """An evaluation run's id in an export: its name when it is the exported path, else its path below it."""
    return run.name if root_is_run else run.relative_to(root).as_posix()


def _eval_rollouts(run: Path, run_id: str) -> list[FoundRollout]:
    """An evaluation run's rollouts in ``results.jsonl`` order (the last line of an id wins: resume); ids
    ``<run>/<scenario>/<task>/<sample>``, one GRPO group per task of the run."""
    results = run / RESULTS.file
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for line in text_lines(results):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        RESULTS.check(record, results)
        run_dir = record.get("run_dir")
        if isinstance(record.get("id"), str) and run_dir:
            run_dir = Path(run_dir)
            here = run / "rollouts" / run_dir.parent.name / run_dir.name  # the run's own copy (a moved or copied run)
            if (here / TRAJECTORY.file).is_file():
                run_dir = here
            elif not run_dir.is_absolute() and not run_dir.exists():
                run_dir = run / run_dir
            found[record["id"]] = (run_dir, record)
    out = []
    for rid, (run_dir, record) in found.items():
        if not (run_dir / TRAJECTORY.file).is_file():
            continue
        scenario, task_id = record.get("scenario"), record.get("task_id")
        group = f"{run_id}/{scenario}/{task_id}" if scenario is not None and task_id is not None else None
        out.append(FoundRollout(run_dir, f"{run_id}/{rid}", group, run_id))
    if not out:  # results that name no rollout on disk: the rollouts the run directory holds
        for path in sorted((run / "rollouts").glob(f"*/*/{TRAJECTORY.file}")):
            match = re.fullmatch(r"(\d+)_(\d+)", path.parent.name)
            if match:
                scenario, (task_id, sample) = path.parent.parent.name, match.groups()
                out.append(FoundRollout(path.parent, f"{run_id}/{scenario}/{task_id}/{sample}",
                                        f"{run_id}/{scenario}/{task_id}", run_id))
    return out


def find_rollouts(path: Path | str) -> list[FoundRollout]:
    """The rollouts under ``path`` with ids unique across everything found:

    * ``path`` a rollout run directory: itself (an evaluation's rollout keeps its evaluation's identity);
    * ``path`` an evaluation run (``results.jsonl``): its rollouts, ids ``<run>/<scenario>/<task>/<sample>`` with
      ``<run>`` the run directory's name, grouped per task of that run;
    * any other directory: every evaluation run below it (``<run>`` its path below ``path``, so two runs never
      share ids or groups) and every rollout run outside them (id: its path below ``path``; grouped by task).
    """
    path = Path(path)
    if (path / TRAJECTORY.file).is_file():
        return [_single(path)]
    if (path / RESULTS.file).is_file():
        runs = _eval_rollouts(path, _run_name(path, path, True))
        if runs:
            return runs
    eval_runs = sorted(p.parent for p in path.rglob(RESULTS.file) if (p.parent / "rollouts").is_dir()
                       or not (p.parent / TRAJECTORY.file).is_file())
    eval_runs = [r for r in eval_runs if not any(o != r and o in r.parents for o in eval_runs)]
    out: list[FoundRollout] = []
    for run in eval_runs:
        out += _eval_rollouts(run, _run_name(run, path, run == path))
    for marker in sorted(path.rglob(TRAJECTORY.file)):
        run_dir = marker.parent
        if any(r == run_dir or r in run_dir.parents for r in eval_runs):
            continue
        out.append(FoundRollout(run_dir, run_dir.relative_to(path).as_posix(), None, None))
    if not out:
        raise TrainingDataError(f"no rollouts under {path} (no {TRAJECTORY.file})")
    return out


def _single(run_dir: Path) -> FoundRollout:
    record = TRAJECTORY.read(run_dir / TRAJECTORY.file)
    match = re.fullmatch(r"(\d+)_(\d+)", run_dir.name)
    identity = _identity(run_dir.resolve(), str(record.get("scenario") or ""), record.get("task_id"),
                         int(match.group(2)) if match else None)
    if identity:
        return FoundRollout(run_dir, *identity)
    return FoundRollout(run_dir, run_dir.name, None, None)


class DuplicateRolloutError(TrainingDataError):
    """Two rollouts of one export with one id: their samples would be mixed in one group."""


def check_unique(found: list[FoundRollout]) -> None:
    seen: dict[str, Path] = {}
    for f in found:
        if f.rollout_id in seen:
            raise DuplicateRolloutError(
                f"duplicate rollout id {f.rollout_id!r}: {seen[f.rollout_id]} and {f.run_dir} (a run given twice, or "
                "two runs with one name): export them separately or rename one run directory")
        seen[f.rollout_id] = f.run_dir


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
    run_id: str | None = None  # the evaluation run of the rollout (None: a rollout run on its own)
    tools: list[dict[str, Any]] | None = None  # the tool schemas the endpoint received (train.tool_schemas)

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
            "id": self.id, "group_id": self.group_id, "rollout_id": self.rollout_id, "run_id": self.run_id,
            "scenario": self.scenario, "task_id": self.task_id, "sample": self.sample, "turn": self.turn,
            "num_turns": self.num_turns, "task": self.task,
            "prompt": self.prompt, "completion": self.completion, "messages": self.messages,
            "loss_mask": self.loss_mask, "loss_spans": self.loss_spans,
            "reward": self.reward, "episode_reward": self.episode_reward,
            "advantage": self.advantage, "group_size": self.group_size, "zero_variance": self.zero_variance,
            "stop_reason": self.stop_reason, "label": self.label, "is_final": self.is_final,
            "is_format_error": self.is_format_error, "window": self.window, "inference_window": self.inference_window,
            "tools": self.tools if self.tools is not None else [],
            "prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids,
            "completion_mask": [1] * len(self.completion_ids) if self.completion_ids is not None else None,
            "data_source": f"awm/{self.scenario}", "agent_name": "awm_agent",
            "extra_info": {"scenario": self.scenario, "task_id": self.task_id, "rollout_id": self.rollout_id,
                           "group_id": self.group_id,
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
            completion_ids=completion_ids, group_id=record.group_id or f"{record.scenario}/{record.task_id}",
            run_id=record.run_id))
    return samples, None


ROW_KINDS = ("turn", "rollout")


def rollout_record(samples: list[Sample]) -> dict[str, Any]:
    """One row for a whole rollout (``awm train export --rows rollout``): ``messages`` the full conversation
    (the last request and its answer) with every assistant turn trained — what verl's ``MultiTurnSFTDataset`` and
    TRL's ``messages`` path do with it; ``loss_mask`` marks the assistant messages. Right only when every turn saw
    the whole history (history window none at inference and export), which the caller checks."""
    last = samples[-1]
    record = last.to_record()
    for key in ("prompt", "completion", "loss_spans", "prompt_ids", "completion_ids", "completion_mask", "turn",
                "is_final", "is_format_error"):
        record.pop(key, None)
    messages = last.messages
    record.update({"id": last.rollout_id, "messages": messages,
                   "loss_mask": [1 if m.get("role") == "assistant" else 0 for m in messages],
                   "reward": last.episode_reward})
    record["extra_info"] = {k: v for k, v in record["extra_info"].items() if k != "turn"}
    return record


def rollout_records(result: "SampleSet") -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The rows of ``--rows rollout`` and the rollouts left out (id, why): those that ran with a history
    window, whose turns did not see the whole conversation a rollout row trains them on."""
    by_rollout: dict[str, list[Sample]] = {}
    for sample in result.samples:
        by_rollout.setdefault(sample.rollout_id, []).append(sample)
    rows, left_out = [], []
    for rid, samples in by_rollout.items():
        window = samples[-1].inference_window
        if window is not None or samples[-1].window is not None:
            left_out.append((rid, f"ran with history window {window}: a whole-rollout row would train its turns on "
                                  "a history they did not see (export it with --rows turn)"))
            continue
        rows.append(rollout_record(sorted(samples, key=lambda x: x.turn)))
    return rows, left_out


@dataclass
class SampleSet:
    samples: list[Sample]
    rollouts: list[RolloutRecord]
    skipped: list[tuple[str, str]]  # (rollout id, why)
    window_mismatch: list[str]  # rollouts that ran with another window than the export's


def build_samples(path: Path | str | Iterable[Path | str], window: int | None = DEFAULT_WINDOW,
                  rewards: RewardConfig | None = None) -> SampleSet:
    """Every sample of every rollout under ``path`` (a rollout run directory, an evaluation run, a directory of
    runs, or a list of those). ``DuplicateRolloutError`` when two of the rollouts found share an id."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    found: list[FoundRollout] = []
    for p in paths:
        found += find_rollouts(p)
    check_unique(found)
    out = SampleSet([], [], [], [])
    for f in found:
        record = load_rollout(f.run_dir, f.rollout_id, f.group_id, f.run_id)
        out.rollouts.append(record)
        samples, why = rollout_samples(record, window, rewards)
        if why is not None:
            out.skipped.append((record.rollout_id, why))
            continue
        if record.config.history_window != window:
            out.window_mismatch.append(record.rollout_id)
        out.samples += samples
    return out
