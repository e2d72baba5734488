"""A generation run as a table: scenarios × stages with state, attempts (each with its errors, whole) and the
last error, plus tokens and cost per stage — what ``awm gen status`` prints and the TUI's generation view shows.
It is read from the run's files, so it works while the run is going and after it was killed; every field of every
record is read on its own (a malformed one is left out, never an exception)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.data.names import normalize_scenario_name
from awm_engine.gen.records import GEN_FORMAT_VERSION, SCENARIO_STAGES, Usage
from awm_engine.gen.store import GenStore

ERROR_LIMIT = 20_000  # characters of one error kept for display


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError, OverflowError):
        return 0


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _errors(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(e)[:ERROR_LIMIT] for e in value]
    return [str(value)[:ERROR_LIMIT]]


@dataclass
class AttemptView:
    """One attempt of a stage (``stage`` as recorded: ``verifier-code`` etc.; ``task`` for verifier attempts)."""

    stage: str
    number: int
    ok: bool
    errors: list[str]
    prompt_tokens: int
    completion_tokens: int
    seconds: float | None
    task: int | None


@dataclass
class Cell:
    state: str = "pending"  # pending | running | done | kept | failed
    attempts: int = 0
    last_error: str | None = None
    history: list[AttemptView] = field(default_factory=list)


@dataclass
class ScenarioStatus:
    key: str
    name: str
    cells: dict[str, Cell] = field(default_factory=lambda: {s: Cell() for s in SCENARIO_STAGES})
    usage: Usage = field(default_factory=Usage)
    problems: dict[str, int] | None = None
    problems_summary: str | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return all(c.state in ("done", "kept") for c in self.cells.values())

    def missing(self) -> str | None:
        """Why the scenario cannot be opened yet (its first unfinished stage), or None."""
        for stage, cell in self.cells.items():
            if cell.state not in ("done", "kept"):
                return f"its {stage} stage is {cell.state}"
        return None


@dataclass
class GenStatus:
    out: str
    config: dict[str, Any]
    scenarios: list[ScenarioStatus]
    stage_usage: dict[str, Usage]
    scenario_batches: int = 0
    skipped_records: int = 0  # event lines that could not be read or used (not JSON, not objects, unknown kinds)
    warning: str | None = None  # e.g. a configuration written by a newer awm

    def cost(self, usage: Usage) -> float | None:
        try:
            return usage.cost(_float(self.config.get("price_in")), _float(self.config.get("price_out")))
        except (TypeError, ValueError):
            return None

    def to_dict(self) -> dict[str, Any]:
        def usage(u: Usage) -> dict[str, Any]:
            return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                    "requests": u.requests, "cost_usd": self.cost(u)}
        return {"out": self.out, "config": self.config,
                "scenarios": [{"scenario": s.key, "name": s.name, "finished": s.finished,
                               "stages": {k: {"state": c.state, "attempts": c.attempts, "last_error": c.last_error,
                                              "history": [asdict(a) for a in c.history]}
                                          for k, c in s.cells.items()},
                               "usage": usage(s.usage), "problems": s.problems,
                               "problems_summary": s.problems_summary, "error": s.error}
                              for s in self.scenarios],
                "stages": {k: usage(u) for k, u in self.stage_usage.items()}, "skipped_records": self.skipped_records,
                "warning": self.warning}


def _stage_of(name: str) -> str:
    return "verifier" if str(name).startswith("verifier") else str(name)


def _verifiers_on_disk(store: GenStore, config: dict[str, Any], by_key: dict[str, ScenarioStatus],
                       task_rows: list[dict[str, Any]]) -> None:
    """A scenario whose every task has a verifier row in each configured mode's file (``sql`` when no config says
    otherwise) has its verifier stage done, events or not: AWM-1K as downloaded has rows and no events. (Only the
    events tell a verifier that passed its checks from one kept after its attempts ran out.)"""
    setting = config.get("verifier_mode")
    modes = ["sql", "code"] if setting == "both" else [setting if setting in ("sql", "code") else "sql"]
    tasks: dict[str, int] = {}
    for row in task_rows:
        listed = row.get("tasks")
        if isinstance(listed, list):
            tasks[normalize_scenario_name(str(row.get("scenario", "")))] = len(listed)
    for key, status in by_key.items():
        cell = status.cells.get("verifier")
        count = tasks.get(key, 0)
        if cell is None or cell.state not in ("pending", "running") or not count:
            continue
        if all(set(range(count)) <= store.task_indices(f"verifier_{mode}", key) for mode in modes):
            cell.state = "done"


def load_status(out: Path | str) -> GenStatus:
    store = GenStore(out)
    if not store.out.is_dir():
        raise FileNotFoundError(f"no generation run at {out}")
    try:
        config = json.loads((store.meta / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    if not isinstance(config, dict):
        config = {}
    by_key: dict[str, ScenarioStatus] = {}
    for row in store.rows("scenario"):
        name = row.get("name")
        if isinstance(name, str) and name.strip():
            key = normalize_scenario_name(name)
            by_key.setdefault(key, ScenarioStatus(key, name))
    stage_usage: dict[str, Usage] = {s: Usage() for s in ("scenario", *SCENARIO_STAGES)}
    batches = 0
    events = store.events()
    skipped = store.unreadable_events
    for event in events:
        raw_stage = str(event.get("stage", ""))
        stage = _stage_of(raw_stage)
        kind = event.get("kind")
        status = by_key.get(normalize_scenario_name(str(event.get("scenario", ""))))
        if kind in ("summary", "attempt"):
            used = Usage(_int(event.get("prompt_tokens")), _int(event.get("completion_tokens")), 1)
            if stage in stage_usage:
                stage_usage[stage].add(used)
            else:
                skipped += 1
            if kind == "attempt" and stage == "scenario":
                batches += 1
                continue
            if status is None or stage not in status.cells:
                continue
            status.usage.add(used)
            if kind == "summary":  # the model's summary of errors before a retry: counted, not an attempt
                continue
            cell = status.cells[stage]
            errors = _errors(event.get("errors"))
            task = event.get("task")
            cell.history.append(AttemptView(raw_stage, _int(event.get("attempt")), event.get("ok") is True, errors,
                                            used.prompt_tokens, used.completion_tokens, _float(event.get("seconds")),
                                            task if isinstance(task, int) and not isinstance(task, bool) else None))
            cell.attempts += 1
            if cell.state == "pending":
                cell.state = "running"
            if errors:
                cell.last_error = errors[-1]
        elif kind == "stage" and status is not None and stage in status.cells:
            if raw_stage == "verifier" or stage != "verifier":  # per-task verifier records do not end the stage
                state = str(event.get("status"))
                status.cells[stage].state = state if state in ("done", "kept", "failed") else "failed"
                if event.get("last_error"):
                    status.cells[stage].last_error = str(event["last_error"])[:ERROR_LIMIT]
        elif kind == "problems" and status is not None:
            counts = event.get("counts")
            status.problems = {str(k): _int(v) for k, v in counts.items()} if isinstance(counts, dict) else None
            status.problems_summary = str(event.get("summary") or "")
        elif kind == "internal_error" and status is not None:
            status.error = str(event.get("error"))[:ERROR_LIMIT]
        elif kind not in ("stage", "problems", "internal_error"):
            skipped += 1
    # rows on disk are the truth about what finished (events may be missing after a kill)
    task_rows: list[dict[str, Any]] = []
    for stage in ("task", "db", "sample", "spec", "env"):
        rows = store.rows(stage)
        if stage == "task":
            task_rows = rows
        for row in rows:
            status = by_key.get(normalize_scenario_name(str(row.get("scenario", ""))))
            if status is not None and status.cells[stage].state in ("pending", "running"):
                status.cells[stage].state = "done"
    _verifiers_on_disk(store, config, by_key, task_rows)
    warning = None
    version = config.get("format_version", 1)
    if not isinstance(version, int) or version > GEN_FORMAT_VERSION:
        warning = (f"the run's config.json has format_version {version!r}; this awm reads up to {GEN_FORMAT_VERSION}: "
                   "upgrade awm to read it fully")
    if skipped:
        note = f"{skipped} record(s) of .awm-gen/events.jsonl could not be read and were left out"
        warning = f"{warning}; {note}" if warning else note
    return GenStatus(str(store.out), config, list(by_key.values()), stage_usage, batches, skipped, warning)
