"""The side-by-side view: what changed in the database next to what the verifiers and the judge concluded."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from awm_engine.agent.replay import traced_steps
from awm_engine.data.error_text import error_title
from awm_engine.data.terminal import visible
from awm_engine.db.diff import DbDiff, diff_databases

from .diff_view import DiffView
from .safe import shown

LABEL_STYLE = {"complete": "bold green", "incomplete": "bold yellow", "others": "bold red", "agent_error": "bold red",
               "server_error": "bold magenta", "judge_error": "bold white on red"}


def code_verdict(outcome: dict[str, Any] | None) -> str | None:
    """complete | others from a code-mode verifier's outcome; a verifier that failed to run counts as ``others``
    (what the reference records); None when there was none."""
    if not outcome:
        return None
    label = str(outcome.get("label") or "").strip().lower()
    if label in ("complete", "others"):
        return label
    result = outcome.get("result")
    said = str(result.get("result") or "").strip().lower() if isinstance(result, dict) else ""
    return said if said in ("complete", "others") else None


def flags(report: dict[str, Any], env_errors: int) -> list[Text]:
    out = []
    code = code_verdict(report.get("code"))
    judge = str((report.get("judge") or {}).get("classification") or "").strip().lower() or None
    if code in ("complete", "others") and judge and judge != "judge_error":
        if (code == "complete") != (judge == "complete"):
            out.append(Text(f"⚠ the code verifier says {code} but the judge says {judge}: look at both before "
                            "trusting either", style="bold yellow"))
    if env_errors:
        out.append(Text(f"⚠ {env_errors} environment error(s) (HTTP 5xx or a failing environment) during the "
                        "episode: a failure may be the environment's bug rather than the agent's",
                        style="bold magenta"))
    return out


def traceback_title(step: Any) -> str:
    """``turn 3 · get_vehicle → 500 · IntegrityError: UNIQUE constraint failed: …`` for a step or an observation
    that carries a traceback: the exception's type and message from the environment's code first."""
    what = getattr(step, "status", None) or getattr(step, "error_kind", None) or "error"
    line = error_title(getattr(step, "text", None) or getattr(step, "observation", None),
                       getattr(step, "traceback", None))
    turn = getattr(step, "iteration", None)
    tool = getattr(step, "tool", None) or "?"
    return (f"turn {turn} · " if turn is not None else "") + f"{tool} → {what}" + (f" · {line}" if line else "")


def render_tracebacks(steps: list[Any]) -> list[Text]:
    """The environment's exceptions behind the episode's errors (what the model saw was only the error text)."""
    parts: list = []
    for step in steps:
        parts += [shown(traceback_title(step), style="bold magenta"),
                  shown(step.traceback.rstrip(), style="dim")]
    return parts


def render_verdict(report: dict[str, Any] | None, env_errors: int = 0, stop_reason: str | None = None,
                   traced: list[Any] | None = None) -> Group:
    """``report`` is a verification report (``verify.json``: label, reward, code, sql, judge); ``traced`` the
    steps whose environment error came with a traceback (``agent.replay.traced_steps``). Everything in it is
    untrusted (verifier and judge output, a run's record): shown with its control characters visible."""
    if not report:
        if stop_reason in ("abandoned", "llm_error"):  # never verified: nothing will come (run_episode's rule)
            why = "the episode was abandoned" if stop_reason == "abandoned" else "the model's endpoint failed"
            return Group(Text("Verdict", style="bold"), Text(f"never verified: {why} (stop: {stop_reason})",
                                                             style="dim"))
        return Group(Text("Verdict", style="bold"), Text("not verified yet", style="dim"))
    label = visible(report.get("label", "?"))
    # label and reward first, at any size; then the warnings, each environment error's first line (its
    # exception), and the tracebacks only after everything else (folded to the end)
    parts: list = [Text.assemble(("Verdict  ", "bold"), "label ", (label, LABEL_STYLE.get(label, "bold")),
                                 visible(f"   reward {report.get('reward')}"),
                                 "" if report.get("has_verdict", True) else "   (no verdict)",
                                 visible(f"   stop: {stop_reason}") if stop_reason else "")]
    parts += flags(report, env_errors)
    parts += [shown(traceback_title(step), style="bold magenta") for step in traced or []]
    if report.get("note"):
        parts.append(shown(report["note"], style="dim"))
    outcome = report.get("code")
    if outcome:
        code_label = visible(outcome["label"])
        parts += [Text("\nCode verifier", style="bold"),
                  Text.assemble("result ", (code_label, LABEL_STYLE.get(code_label, "bold")),
                                visible(f"   ({outcome.get('function') or '-'}, {outcome.get('seconds', 0):.2f}s)"))]
        if outcome.get("error"):
            parts.append(shown(f"{outcome.get('error_kind')}: {outcome['error']}", style="red"))
    sql = report.get("sql")
    if sql:
        info = visible(json.dumps(sql.get("result"), indent=2, ensure_ascii=False, default=str))
        parts += [Text("\nSQL verifier output (what the judge saw)", style="bold"),
                  Text(info if len(info) < 3000 else info[:3000] + "\n…", style="dim")]
    judge = report.get("judge")
    if judge:
        result = judge.get("judge_result") or {}
        classification = visible(judge["classification"])
        parts += [Text("\nJudge", style="bold"),
                  Text.assemble("classification ", (classification, LABEL_STYLE.get(classification, "bold")),
                                *([visible(f"  confidence {result['confidence_score']}")]
                                  if result.get("confidence_score") is not None else []))]
        if result.get("reasoning"):
            parts.append(shown(result["reasoning"]))
        if result.get("evidence"):
            parts += [Text("evidence", style="bold"),
                      shown(json.dumps(result["evidence"], indent=2, ensure_ascii=False, default=str))]
        if result.get("error"):
            parts.append(shown(result["error"], style="red"))
    if traced:
        parts.append(Text("\nTracebacks (the environment's; the model saw only the observation)", style="bold"))
        parts += render_tracebacks(traced)
    return Group(*parts)


class SideBySide(Horizontal):
    """Left: the database diff. Right: verifier results, judge verdict, reward and warnings."""

    DEFAULT_CSS = """
    SideBySide { height: 1fr; }
    SideBySide > VerticalScroll { width: 1fr; padding: 0 1; border: round $primary-background; }
    """

    def compose(self) -> ComposeResult:
        yield DiffView(id="diff-pane")
        with VerticalScroll(id="verdict-pane"):
            yield Static(render_verdict(None), id="verdict")

    def show(self, diff: DbDiff | None, report: dict[str, Any] | None = None, env_errors: int = 0,
             stop_reason: str | None = None, title: str = "Database changes", traced: list[Any] | None = None) -> None:
        self.diff = diff
        if traced is not None:
            self.traced = traced
        self.query_one(DiffView).show(diff, title)
        self.query_one("#verdict", Static).update(render_verdict(report, env_errors, stop_reason,
                                                                 getattr(self, "traced", None)))

    def show_finished(self, run_dir: Path, env_errors: int, stop_reason: str | None) -> None:
        """A rollout just ended: its database diff at once, the verdict once verification is done. The databases are
        the environment's to write: one that cannot be read (a final.db of garbage) is said so in the diff's place —
        raising here (in the rollout's last event) ended the rollout's worker before its verification ran."""
        try:
            diff, error = diff_databases(run_dir / "initial.db", run_dir / "final.db"), None
        except (sqlite3.Error, OSError, ValueError) as exc:
            diff, error = None, visible(f"the episode's databases could not be compared: {exc}")
        self.show(diff, None, env_errors, stop_reason, traced=traced_steps(run_dir))
        if error is not None:
            self.query_one(DiffView).show(None, error=error)
        self.query_one("#verdict", Static).update(Group(Text("Verdict", style="bold"), Text("verifying…",
                                                                                           style="dim")))

    def show_report(self, report: dict[str, Any] | None, env_errors: int, stop_reason: str | None) -> None:
        self.show(getattr(self, "diff", None), report, env_errors, stop_reason)
