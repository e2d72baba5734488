"""A generation run as a table: scenarios × stages with state, attempts and the last error, plus tokens and cost
per stage — what ``awm gen status`` prints and the TUI's generation view shows (read from the run's files, so
it works while the run is going and after it was killed)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.data.names import normalize_scenario_name
from awm_engine.gen.records import SCENARIO_STAGES, Usage
from awm_engine.gen.store import GenStore


@dataclass
class Cell:
    state: str = "pending"  # pending | running | done | kept | failed
    attempts: int = 0
    last_error: str | None = None


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


@dataclass
class GenStatus:
    out: str
    config: dict[str, Any]
    scenarios: list[ScenarioStatus]
    stage_usage: dict[str, Usage]
    scenario_batches: int = 0

    def cost(self, usage: Usage) -> float | None:
        return usage.cost(self.config.get("price_in"), self.config.get("price_out"))

    def to_dict(self) -> dict[str, Any]:
        def usage(u: Usage) -> dict[str, Any]:
            return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                    "requests": u.requests, "cost_usd": self.cost(u)}
        return {"out": self.out, "config": self.config,
                "scenarios": [{"scenario": s.key, "name": s.name, "finished": s.finished,
                               "stages": {k: vars(c) for k, c in s.cells.items()}, "usage": usage(s.usage),
                               "problems": s.problems, "problems_summary": s.problems_summary, "error": s.error}
                              for s in self.scenarios],
                "stages": {k: usage(u) for k, u in self.stage_usage.items()}}


def _stage_of(name: str) -> str:
    return "verifier" if str(name).startswith("verifier") else str(name)


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
    for event in store.events():
        stage = _stage_of(event.get("stage", ""))
        kind = event.get("kind")
        key = normalize_scenario_name(str(event.get("scenario", "")))
        status = by_key.get(key)
        if kind == "summary":  # the model's summary of errors before a retry: counted with its stage
            used = Usage(int(event.get("prompt_tokens") or 0), int(event.get("completion_tokens") or 0), 1)
            if stage in stage_usage:
                stage_usage[stage].add(used)
            if status is not None:
                status.usage.add(used)
        elif kind == "attempt":
            used = Usage(int(event.get("prompt_tokens") or 0), int(event.get("completion_tokens") or 0), 1)
            if stage in stage_usage:
                stage_usage[stage].add(used)
            if stage == "scenario":
                batches += 1
                continue
            if status is None or stage not in status.cells:
                continue
            status.usage.add(used)
            cell = status.cells[stage]
            cell.attempts += 1
            if cell.state == "pending":
                cell.state = "running"
            if event.get("errors"):
                cell.last_error = str(event["errors"][-1])[:500]
        elif kind == "stage" and status is not None and stage in status.cells:
            if event.get("stage") == "verifier" or stage != "verifier":
                status.cells[stage].state = str(event.get("status"))
                if event.get("last_error"):
                    status.cells[stage].last_error = str(event["last_error"])[:500]
        elif kind == "problems" and status is not None:
            status.problems = event.get("counts") if isinstance(event.get("counts"), dict) else None
            status.problems_summary = str(event.get("summary") or "")
        elif kind == "internal_error" and status is not None:
            status.error = str(event.get("error"))[:500]
    # rows on disk are the truth about what finished (events may be missing after a kill)
    for stage, kind in (("task", "task"), ("db", "db"), ("sample", "sample"), ("spec", "spec"), ("env", "env")):
        for row in store.rows(kind):
            status = by_key.get(normalize_scenario_name(str(row.get("scenario", ""))))
            if status is not None and status.cells[stage].state in ("pending", "running"):
                status.cells[stage].state = "done"
    return GenStatus(str(store.out), config, list(by_key.values()), stage_usage, batches)
