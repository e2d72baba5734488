"""Replaying a run directory step by step, with the database state after every step.

A run stores only ``initial.db`` and ``final.db``; the states in between are rebuilt by executing
the run's tool calls again, in order, on a copy of its ``initial.db`` (in a worker process, like any
environment code). The last state can be compared with the run's own ``final.db``: time-dependent
handlers may differ slightly on re-execution, which ``final_matches`` reports.
"""
from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from awm_engine.agent.meta_protocol import parse_meta_turn
from awm_engine.data.catalog import Catalog
from awm_engine.data.jsonl import text_lines
from awm_engine.data.run_formats import EVENTS, TRAJECTORY
from awm_engine.db.diff import DbDiff, diff_databases
from awm_engine.sandbox.owned import owned_dir


@dataclass
class ReplayStep:
    index: int
    iteration: int
    content: str
    name: str | None = None  # list_tools | call_tool | None
    tool: str | None = None  # the environment tool, for call_tool
    arguments: Any = None
    observation: str | None = None
    is_error: bool = False
    error_kind: str | None = None
    is_final: bool = False
    format_errors: list[str] | None = None
    status: int | None = None  # the HTTP status behind the observation, when a request was made
    traceback: str | None = None  # the exception behind an environment error (events.jsonl only)

    @property
    def changes_db(self) -> bool:
        return self.tool is not None and self.name == "call_tool"


def _steps_from_events(path: Path) -> list[ReplayStep]:
    steps: dict[int, ReplayStep] = {}
    for line in filter(str.strip, text_lines(path)):
        event = EVENTS.check(json.loads(line), path)
        kind, it = event.get("type"), event.get("iteration")
        if kind == "model_turn":
            steps[it] = ReplayStep(len(steps), it, event.get("content") or "")
        elif it in steps:
            step = steps[it]
            if kind == "tool_call":
                step.name, step.tool, step.arguments = event.get("name"), event.get("tool"), event.get("arguments")
            elif kind == "observation":
                step.observation, step.is_error, step.error_kind = event["text"], event["is_error"], event.get(
                    "error_kind")
                step.status = event.get("status") if isinstance(event.get("status"), int) else None
                step.traceback = event.get("traceback") if isinstance(event.get("traceback"), str) else None
            elif kind == "format_error":
                step.format_errors = (step.format_errors or []) + [f"{event['kind']}: {event['detail']}"]
    ordered = [steps[k] for k in sorted(steps)]
    for step in ordered:
        step.is_final = step.observation is None and step.name is None and not step.format_errors
    return ordered


def traced_steps(run_dir: Path | str) -> list[ReplayStep]:
    """The steps of a run whose observation came with the environment's traceback (``events.jsonl``); none
    when the file is missing or unreadable."""
    path = Path(run_dir) / EVENTS.file
    try:
        return [s for s in _steps_from_events(path) if s.traceback] if path.is_file() else []
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def _steps_from_trajectory(trajectory: dict[str, Any]) -> list[ReplayStep]:
    steps = []
    for i, entry in enumerate(trajectory.get("trajectory", [])):
        step = ReplayStep(i, entry.get("iteration", i + 1), entry.get("content") or "")
        step.is_final = bool(entry.get("is_final"))
        calls = entry.get("tool_calls") or []
        if calls and calls[0].get("name"):
            parsed = parse_meta_turn(step.content)
            call = parsed.calls[0] if parsed.calls else None
            step.name = call.name if call else calls[0]["name"]
            recorded = calls[0].get("tool")  # a native call's entry names its tool (the arguments are the tool's)
            step.tool = call.tool if call else recorded if isinstance(recorded, str) else None
            step.arguments = call.tool_arguments if call and call.name == "call_tool" else calls[0].get("arguments")
        response = entry.get("tool_response") or {}
        step.observation = response.get("content")
        step.is_error = bool(step.observation and step.observation.startswith("Error"))
        steps.append(step)
    return steps


def no_trajectory(run_dir: Path) -> str:
    """Why ``run_dir`` cannot be replayed or verified; a session directory of ``awm env serve`` (its clients' calls,
    no agent's trajectory) says where its calls and changes are."""
    if (run_dir / "session.json").is_file() and (run_dir / "calls.jsonl").is_file():
        return (f"{run_dir} is the session directory of an awm env serve, not an agent run (no trajectory.json): its "
                f"tool calls are in {run_dir / 'calls.jsonl'}, and awm db diff {run_dir / 'initial.db'} "
                f"{run_dir / 'final.db'} shows what they changed")
    return f"{run_dir} has no trajectory.json"


class RunReplay:
    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        path = self.run_dir / TRAJECTORY.file
        if not path.is_file():
            raise FileNotFoundError(no_trajectory(self.run_dir))
        self.trajectory = TRAJECTORY.read(path)
        events = self.run_dir / EVENTS.file
        self.steps = _steps_from_events(events) if events.is_file() else _steps_from_trajectory(self.trajectory)
        self.scenario = self.trajectory.get("scenario")
        self.task_id = self.trajectory.get("task_id")
        self.task = self.trajectory.get("task", "")
        awm = self.trajectory.get("awm") or {}
        self.stop_reason = awm.get("stop_reason")
        self.data_dirs = awm.get("data_dirs")
        self.initial_db = self.run_dir / "initial.db"
        self.final_db = self.run_dir / "final.db"
        self.states: list[Path] = []
        self.workdir: Path | None = None

    def verification(self) -> dict[str, Any] | None:
        path = self.run_dir / "verify.json"
        return json.loads(path.read_text()) if path.is_file() else None

    async def materialize(self, pool, catalog: Catalog | None = None) -> list[Path]:
        """Re-execute the run's tool calls; ``states[i]`` is the database after step i. The states live in a
        private directory until ``cleanup``; when re-execution fails or is cancelled, it is removed at once."""
        catalog = catalog or Catalog.load(self.data_dirs or None)
        scenario = catalog.get(self.scenario)
        self.cleanup()  # a previous materialization's
        workdir = self.workdir = owned_dir("awm_replay_")
        try:
            shutil.copyfile(self.initial_db, workdir / "initial.db")
            shutil.copyfile(self.initial_db, workdir / "final.db")
            episode = await pool.open_episode(scenario, run_dir=workdir, attach=True)
            states: list[Path] = []
            current = workdir / "initial.db"
            try:
                for step in self.steps:
                    if step.changes_db:
                        await episode.call_tool(step.tool, step.arguments if isinstance(step.arguments, dict) else {})
                        # the episode's own snapshot: the live database opened through a checked descriptor
                        # (what the environment left there may be a symlink to a file of the host), off the event loop: the
                        # environment may keep it locked (the copy gives up after a while: SnapshotLocked)
                        current = await asyncio.to_thread(episode.snapshot, workdir / f"state_{step.index:03d}.db")
                    states.append(current)
            finally:
                await episode.close()  # its databases are moved into workdir (made again if it was removed)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            if self.workdir == workdir:
                self.workdir = None
            raise
        self.states = states
        return states

    def diff_at(self, index: int) -> DbDiff:
        return diff_databases(self.initial_db, self.states[index])

    def final_diff(self) -> DbDiff:
        return diff_databases(self.initial_db, self.final_db)

    def final_matches(self) -> bool:
        """Whether re-execution reproduced the run's own final.db (ignoring nothing)."""
        if not self.states:
            return True
        return diff_databases(self.final_db, self.states[-1]).is_empty

    def cleanup(self) -> None:
        """Remove the re-executed states (the run's own files are not touched); ``states`` is empty after."""
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        self.states = []
