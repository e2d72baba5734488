"""BFCL runs in the evaluation dashboard: the per-category table, every entry with its verdict, and the
entry view (prompt, functions offered, raw output, decoded calls, the checker's verdict and reason; for
multi-turn entries each turn's steps and the backends' state next to the ground truth's)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from awm_engine.bench.bfcl import scores
from awm_engine.bench.bfcl.run import BfclConfig, is_bfcl_run
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runs import read_metadata

from ..actions import ENTRY_ACTIONS, bindings
from ..widgets.footer import KeyFooter

CATEGORY_COLUMNS = ["category", "group", "correct", "scored", "accuracy %", "errors"]
CATEGORY_WIDTHS = [24, 10, 8, 10, 10, 6]
ENTRY_COLUMNS = ["entry", "category", "sample", "status", "verdict", "error type"]
ENTRY_WIDTHS = [28, 22, 6, 6, 9, 30]

__all__ = ["BfclEntryScreen", "BfclRunView", "is_bfcl_run", "run_label"]


def run_label(run: Path) -> Text:
    config = BfclConfig.load(run)
    return Text.assemble((run.name, "bold"), f"\nBFCL · {config.model} · {config.mode}")


class BfclRunView:
    """What the dashboard knows about one BFCL run (refreshed incrementally, like an evaluation's)."""

    def __init__(self, path: Path):
        self.path = path
        self.config = BfclConfig.load(path)
        read_metadata(path)  # checks its format version
        self.index = ResultsIndex(path / "results.jsonl")
        self.error: str | None = None

    def refresh(self) -> dict[str, Any]:
        """Everything the dashboard shows (computed off the UI thread)."""
        new = self.index.refresh()
        summaries = list(self.index.summaries())
        c = self.config
        meta = scores.summarize(summaries, c.expected(), c.mode)
        try:
            running = bool((read_metadata(self.path) or {"running": True}).get("running"))
        except (OSError, ValueError):
            running = True
        done, expected = len(summaries), meta["totals"]["expected"]
        v3, cov = meta["v3"], meta["coverage"]
        fmt = scores.pct

        def group(name: str) -> str:
            return fmt(v3[name]) if cov[name]["any"] else "not run"

        head = Text.assemble((self.path.name, "bold"), f"  ·  BFCLv3  ·  {c.model}  ·  {c.mode} mode  ·  ",
                             ("running" if running and done < expected else "finished",
                              "yellow" if running and done < expected else "green"),
                             f"\nentries {done}/{expected}  ·  v3 Overall {fmt(v3['overall'])}  ·  Non-Live "
                             f"{group('non_live')}  ·  Live {group('live')}  ·  Multi-Turn {group('multi_turn')}"
                             f"  ·  v4 formula {fmt(meta['v4']['overall'])}",
                             f"\nirrelevance {fmt(v3['irrelevance'])}  ·  relevance {fmt(v3['relevance'])}  ·  "
                             f"errors {meta['totals']['errors']}")
        categories = [(name, r["group"], r["correct"], f"{r['scored']}/{r['expected']}", fmt(r["accuracy"]),
                       r["errors"] or "-") for name, r in meta["categories"].items()]
        entries = [(s["task_id"], s["scenario"], s["sample"], s["status"], s.get("label") or "-",
                    s.get("stop_reason") or s.get("error_kind") or "") for s in summaries]
        return {"new": new, "head": head, "done": done, "expected": expected, "categories": categories,
                "category_keys": list(meta["categories"]), "entries": entries,
                "entry_keys": [s["id"] for s in summaries]}


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _section(title: str, body: str | Text, style: str = "") -> Static:
    text = Text.assemble((title + "\n", "bold underline"), body if isinstance(body, Text) else Text(body, style))
    return Static(text, classes="bfcl-section")


class BfclEntryScreen(Screen):
    """One BFCL answer: what the model saw, what it said, how BFCL's checker decoded and judged it.
    escape goes back to the dashboard (ctrl+o: back to its entry list)."""

    SCOPE = "evals"
    BINDINGS = bindings("evals", only=ENTRY_ACTIONS)
    DEFAULT_CSS = """
    BfclEntryScreen .bfcl-section { padding: 0 1 1 1; }
    """

    def __init__(self, record: dict[str, Any]):
        super().__init__()
        self.record = record

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="bfcl-entry"):
            yield from self.sections()
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = f"BFCL · {self.record.get('entry_id')}"
        self.sub_title = f"{self.record.get('category')} · {self.record.get('mode')} mode · sample " \
                         f"{self.record.get('sample')}"

    def sections(self) -> list[Static]:
        r = self.record
        if r.get("status") != "ok":
            verdict = Text.assemble(("ERROR ", "bold red"), f"{r.get('error_kind')}: {r.get('error')}")
        else:
            v = r.get("verdict") or {}
            error = v.get("error")
            reason = error if isinstance(error, list) else (error or {}).get("error_message") if error else None
            verdict = Text.assemble(("VALID" if r.get("valid") else "INVALID", "bold green" if r.get("valid")
                                     else "bold red"),
                                    f"  {r.get('error_type') or ''}\n" + (_json(reason) if reason else ""))
        out = [_section("verdict (bfcl-eval's checker)", verdict)]
        if r.get("turns") is None:  # single-turn
            out += [_section("prompt", _json(r.get("messages", [])[:-1])),
                    _section("functions offered", _json(r.get("functions"))),
                    _section("raw output", _json(r.get("raw"))),
                    _section("decoded calls", _json(r.get("decoded")) + (f"\n{r['decode_error']}"
                                                                         if r.get("decode_error") else ""))]
            if (r.get("verdict") or {}).get("possible_answer") is not None:
                out.append(_section("possible answer", _json(r["verdict"]["possible_answer"])))
            return out
        out.append(_section("functions offered", ", ".join(r.get("functions") or []) +
                            "".join(f"\nheld out until turn {t}: {', '.join(n)}"
                                    for t, n in (r.get("held_out") or {}).items())))
        for number, turn in enumerate(r["turns"]):
            lines = Text()
            for message in turn.get("messages") or []:
                lines.append(f"{message.get('role')}: ", "bold")
                lines.append(str(message.get("content"))[:4000] + "\n")
            for i, step in enumerate(turn.get("steps") or []):
                lines.append(f"step {i} raw: ", "bold")
                lines.append(_json(step.get("raw")) + "\n")
                if step.get("decoded") is None:
                    lines.append(f"  no call ({step.get('decode_error')}): the turn ends\n", "dim")
                    continue
                for call, result in zip(step["decoded"], step.get("results") or []):
                    lines.append(f"  {call}", "cyan")
                    lines.append(f" → {result[:1000]}\n")
            state = turn.get("state") or {}
            if state:
                lines.append("state after the turn vs the ground truth's" +
                             ("" if state.get("checked") else " (not checked: no call expected)") + "\n", "bold")
                for name, cls in (state.get("classes") or {}).items():
                    lines.append(f"  {name}: ", "bold")
                    lines.append("same\n" if cls["match"] else "differs\n", "green" if cls["match"] else "red")
                    for attr, pair in cls.get("differences", {}).items():
                        lines.append(f"    {attr}\n      model:        {pair['model']}\n"
                                     f"      ground truth: {pair['ground_truth']}\n")
            out.append(_section(f"turn {number}", lines))
        return out

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_focus_rollouts(self) -> None:
        self.app.pop_screen()
        self.app.screen.action_focus_rollouts()
