"""MCP-Universe runs in the evaluation dashboard: success rates per column (the paper's six domains, or the AWM
paper's columns with ``g``), the tasks whose evaluators need a live service counted apart from the scored ones, every
task with its verdict, and the task view (each evaluator's verdict and reason, the final answer, the transcript).
A run made against stand-in servers (``--simulation``) is marked as an offline simulation wherever it shows.

Everything shown is computed by the engine (``bench.mcp_universe.run.task_result`` / ``task_line``,
``bench.mcp_universe.scores.success_rates``): the CLI twins are ``awm bench mcp-universe report RUN_DIR
[--grouping paper|awm]`` and ``… report RUN_DIR --tasks``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from awm_engine.bench.mcp_universe import scores
from awm_engine.bench.mcp_universe.run import (
    McpuConfig,
    evaluator_verdicts,
    is_mcpu_run,
    task_line,
    task_result,
)
from awm_engine.data.run_formats import RunFormatError
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runs import read_metadata

from ..actions import ENTRY_ACTIONS, bindings
from ..widgets.footer import KeyFooter

__all__ = ["McpuRunView", "McpuTaskScreen", "is_mcpu_run", "run_label", "run_simulated"]

# SR % is the official rate (passed / all tasks); "decided SR %" leaves out the tasks not decided here
GROUP_COLUMNS = ["column", "tasks", "passed", "scored", "SR %", "95% CI", "needs", "errored", "eval %", "avg steps",
                 "decided SR %"]
GROUP_WIDTHS = [10, 5, 6, 6, 7, 13, 5, 7, 7, 9, 8]
TASK_COLUMNS = ["task", "domain", "verdict", "evaluators", "needs", "steps", "why not passed"]
TASK_WIDTHS = [32, 9, 7, 16, 14, 5, 8]
MULTI_PREFIX = "multi-server_task_"  # shown as "multi:" (the AWM paper's Multi column)
STATUS_STYLE = {"pass": "green", "fail": "red", "needs": "yellow", "error": "magenta"}
GROUPING_TITLE = {"paper": "the paper's six domains", "awm": "the AWM paper's columns"}
OFFLINE = ("OFFLINE SIMULATION", "bold black on yellow")
OFFLINE_NOTE = "stand-in MCP servers with fixed data: not comparable with the paper, the leaderboard or AWM"


def run_label(run: Path) -> Text | None:
    try:
        config = McpuConfig.load(run)
    except (OSError, ValueError, TypeError, RunFormatError):
        return None
    return Text.assemble((run.name, "bold"), f"\nMCP-Universe · {config.model} · {config.mode}",
                         (" · simulation", "yellow") if config.simulation else "")


def run_simulated(run: Path) -> bool:
    """Whether the run was made against stand-in servers (``--simulation``); False when it cannot be read."""
    try:
        return McpuConfig.load(run).simulation
    except (OSError, ValueError, TypeError, RunFormatError):
        return False


class McpuRunView:
    """What the dashboard knows about one MCP-Universe run. Each results line is read once (runs have at most 231
    tasks); a rewritten results file (``score`` again) is read afresh."""

    def __init__(self, path: Path):
        self.path = path
        self.config = McpuConfig.load(path)
        read_metadata(path)  # checks its format version
        self.index = ResultsIndex(path / "results.jsonl")
        self.error: str | None = None
        self.grouping = "paper"
        self._read: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {}  # id -> (offset, result, line)

    def tables(self) -> tuple[list[str], list[int], list[str], list[int]]:
        return GROUP_COLUMNS, GROUP_WIDTHS, TASK_COLUMNS, TASK_WIDTHS

    def _records(self) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
        """(results key, task result, task line) per task, in the file's order."""
        out = []
        for rid in self.index.order:
            entry = self.index.entries[rid]
            cached = self._read.get(rid)
            if cached is None or cached[0] != entry.offset:
                try:
                    record = self.index.record(rid)
                except (OSError, ValueError):  # rewritten under us: read again at the next refresh
                    continue
                if not isinstance(record, dict):
                    continue
                cached = self._read[rid] = (entry.offset, task_result(record), task_line(record))
            out.append((rid, *cached[1:]))
        return out

    def refresh(self) -> dict[str, Any]:
        """Everything the dashboard shows (computed off the UI thread)."""
        new = self.index.refresh()
        read = self._records()
        results = [r for _, r, _ in read]
        summary = scores.success_rates(results, self.grouping)
        try:
            meta = read_metadata(self.path) or {"running": True}
        except (OSError, ValueError):
            meta = {"running": True}
        done = len(results)
        expected = meta.get("expected") if isinstance(meta.get("expected"), int) else None
        running = bool(meta.get("running")) and (expected is None or done < expected)
        table, c = summary["table"], self.config
        overall = table["Overall"]
        fmt = scores.pct
        head = Text.assemble((self.path.name, "bold"), f"  ·  MCP-Universe  ·  {c.model}  ·  {c.mode} mode  ·  ",
                             ("running" if running else "finished", "yellow" if running else "green"))
        if c.simulation:
            head.append("\n")
            head.append_text(Text.assemble(OFFLINE, f"  {OFFLINE_NOTE}"))
        ci = overall["ci95"]
        head.append(f"\ntasks {done}" + (f"/{expected}" if expected else "") +
                    f"  ·  Overall SR {fmt(overall['sr'])} %" + (" (partial)" if overall["partial"] else "") +
                    f" ({overall['passed']}/{overall['tasks']} tasks, official"
                    + (f", 95% CI {fmt(ci[0])}–{fmt(ci[1])}" if ci else "") + ")"
                    f"  ·  decided here only {fmt(overall['sr_decidable'])} % ({overall['passed']}/"
                    f"{overall['scored']})  ·  columns: {GROUPING_TITLE[self.grouping]}")
        needs = summary["needs_by_service"]
        errored = sum(r["status"] == "error" for r in results)
        head.append("\nnot decided here, needs a service: ")
        head.append(", ".join(f"{s} {n}" for s, n in sorted(needs.items())) or "none",
                    "yellow" if needs else "")
        head.append(f"  ·  tasks needing one {sum(r['status'] == 'needs' for r in results)}  ·  errored {errored}")
        if any(t.get("partial") for t in table.values()):
            head.append("\n* partial: fewer tasks than the paper's count for that column; – : not in this run")
        groups = []
        for column in summary["columns"]:
            t = table.get(column)
            if t is None:  # not in this run: missing, never 0
                groups.append((column, *("–",) * (len(GROUP_COLUMNS) - 1)))
                continue
            groups.append((column, t["tasks"], t["passed"], t["scored"],
                           fmt(t["sr"]) + ("*" if t["partial"] else ""),
                           f"{fmt(t['ci95'][0])}–{fmt(t['ci95'][1])}" if t["ci95"] else "–", t["needs"],
                           t["errored"], fmt(t["avg_evaluator_score"]),
                           "–" if t["avg_steps"] is None else f"{t['avg_steps']:.1f}", fmt(t["sr_decidable"])))
        tasks = [(str(t["task"] or t["id"]).replace(MULTI_PREFIX, "multi:"), str(t["domain"] or "-"),
                  t["status"], t["evaluators"], ", ".join(t["needs"]) or "-",
                  "-" if t["steps"] is None else t["steps"], t["reason"] or "") for _, _, t in read]
        return {"new": new, "head": head, "done": done, "expected": expected or done,
                "categories": groups, "category_keys": [g[0] for g in groups], "entries": tasks,
                "entry_keys": [rid for rid, _, _ in read]}


def _section(title: str, body: str | Text) -> Static:
    text = Text.assemble((title + "\n", "bold underline"), body if isinstance(body, Text) else Text(body))
    return Static(text, classes="mcpu-section")


def _clip(text: Any, limit: int = 2000) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def _pretty(answer: Any) -> str:
    if isinstance(answer, str):
        try:
            return json.dumps(json.loads(answer), indent=2, ensure_ascii=False)
        except ValueError:
            return answer
    return json.dumps(answer, indent=2, ensure_ascii=False, default=str)


class McpuTaskScreen(Screen):
    """One MCP-Universe task of a run: the verdict, each evaluator's verdict and reason, the final answer and the
    transcript (each step's call and observation). escape goes back to the dashboard (ctrl+o: its task list)."""

    SCOPE = "evals"
    BINDINGS = bindings("evals", only=ENTRY_ACTIONS)
    DEFAULT_CSS = """
    McpuTaskScreen .mcpu-section { padding: 0 1 1 1; }
    """

    def __init__(self, record: dict[str, Any], simulation: bool = False):
        super().__init__()
        self.record = record if isinstance(record, dict) else {}
        self.simulation = simulation

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="mcpu-task"):
            yield from self.sections()
        yield KeyFooter()

    def on_mount(self) -> None:
        line = task_line(self.record)
        self.title = f"MCP-Universe · {line['id']}"
        servers = self.record.get("servers") if isinstance(self.record.get("servers"), list) else []
        self.sub_title = f"{line['domain'] or '-'} · AWM column {line['awm_column'] or '-'} · servers " \
                         f"{', '.join(map(str, servers)) or '-'}"

    def sections(self) -> list[Static]:
        r, line = self.record, task_line(self.record)
        status = line["status"]
        verdict = Text.assemble((status.upper(), f"bold {STATUS_STYLE.get(status, '')}"),
                                f"  evaluators: {line['evaluators']}")
        if status == "needs":
            verdict.append(f"\nnot decided here: MCP-Universe's evaluators reached {', '.join(line['needs'])} "
                           "(not passed in the official rate; left out of the decided-here rate)", "yellow")
        if line["reason"]:
            verdict.append("\n" + _clip(line["reason"]), "red" if status in ("fail", "error") else "")
        if self.simulation:
            verdict.append("\n")
            verdict.append_text(Text.assemble(OFFLINE, f"  {OFFLINE_NOTE}"))
        out = [_section("verdict (a task passes only if every evaluator passes)", verdict)]
        evaluators = Text()
        for v in evaluator_verdicts(r):
            s = str(v.get("status"))
            evaluators.append({"pass": "✓ ", "fail": "✗ ", "needs": "? "}.get(s, "  "), STATUS_STYLE.get(s, ""))
            evaluators.append(str(v.get("func")), "cyan")
            if v.get("op"):
                evaluators.append(f"  op {v['op']}", "bold")
            evaluators.append(f"  {s}", STATUS_STYLE.get(s, ""))
            if v.get("reason"):
                evaluators.append(f"  {_clip(v['reason'], 600)}")
            if v.get("desc"):
                evaluators.append(f"\n    {_clip(v['desc'], 300)}", "dim")
            evaluators.append("\n")
        out.append(_section("evaluators", evaluators if evaluators.plain else Text("none recorded", "dim")))
        if r.get("status") == "ok":
            out.append(_section("final answer (what the evaluators read)", _clip(_pretty(r.get("final_answer")),
                                                                                 6000)))
        out.append(_section("transcript", self.transcript()))
        facts = [f"stop: {r.get('stop_reason') or '-'}", f"steps: {r.get('steps', '-')}",
                 f"tool calls: {r.get('tool_calls', '-')}"]
        usage = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        if usage.get("total_tokens"):
            facts.append(f"tokens: {usage['total_tokens']}")
        out.append(_section("rollout", "  ·  ".join(facts) + f"\nrun directory: {r.get('run_dir') or '-'}"))
        return out

    def transcript(self) -> Text:
        run_dir = self.record.get("run_dir")
        if not isinstance(run_dir, str) or not Path(run_dir, "trajectory.json").is_file():
            return Text("no transcript: " + ("the task failed before its rollout started"
                                             if self.record.get("status") == "error" and not run_dir
                                             else "none recorded for this task"), "dim")
        from awm_engine.agent.replay import RunReplay

        try:
            steps = RunReplay(run_dir).steps
        except Exception as exc:  # noqa: BLE001 - an unreadable transcript: say why, the verdict stays
            return Text(f"the transcript could not be read: {exc}", "red")
        text = Text()
        for s in steps:
            text.append(f"step {s.index}", "bold")
            if s.content:
                text.append(f"  {_clip(s.content, 1500)}")
            if s.name:
                text.append(f"\n  → {s.tool or s.name} ", "green")
                text.append(_clip(s.arguments, 600))
            if s.observation is not None:
                text.append("\n  ← ", "red bold" if s.is_error else "bold")
                text.append(_clip(s.observation, 1500), "red" if s.is_error else "")
            if s.is_final:
                text.append("\n  (final answer)", "bold")
            text.append("\n")
        return text if text.plain else Text("no steps recorded", "dim")

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_focus_rollouts(self) -> None:
        self.app.pop_screen()
        self.app.screen.action_focus_rollouts()
