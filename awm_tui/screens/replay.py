"""Replay a run directory: step forwards and backwards; the database diff at every step; the verdict."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual import work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from awm_engine.agent.replay import RunReplay
from awm_engine.data.error_text import error_title
from awm_engine.data.terminal import visible
from awm_engine.runtime.episode import is_environment_error

from ..actions import bindings
from ..widgets.diff_view import DiffTable, DiffView
from ..widgets.footer import KeyFooter
from ..widgets.verdict import SideBySide
from .leaving import screen_left


def steps_text(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def diff_or_error(diff):
    """``diff()``, or why it could not be made: the databases are what the environment left in its files (any bytes),
    and an exception here would end the TUI."""
    try:
        return diff(), None
    except (sqlite3.Error, OSError, ValueError) as exc:
        return None, visible(f"the databases could not be compared: {exc}")


class ReplayScreen(Screen):
    SCOPE = "replay"
    BINDINGS = bindings("replay")
    DEFAULT_CSS = """
    ReplayScreen #replay-tabs { height: 1fr; }
    ReplayScreen #steps { width: 44; }
    ReplayScreen #step-detail { width: 1fr; padding: 0 1; border: round $primary-background; }
    ReplayScreen #step-diff { width: 1fr; padding: 0 1; border: round $primary-background; }
    ReplayScreen #replay-state { height: auto; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, run_dir: Path | str):
        super().__init__()
        self.run = RunReplay(run_dir)
        self.current = 0
        self.rebuild_error: str | None = None  # why the intermediate states could not be rebuilt

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="replay-state")
        with TabbedContent(id="replay-tabs", initial="steps-tab"):
            with TabPane("Steps", id="steps-tab"):
                with Horizontal():
                    yield OptionList(id="steps")
                    yield VerticalScroll(Static(id="step-text"), id="step-detail")
                    yield DiffView(id="step-diff")
            with TabPane("Verdict", id="verdict-tab"):
                yield SideBySide(id="side")
        yield KeyFooter()

    def on_mount(self) -> None:
        run = self.run
        self.title = f"Replay · {run.scenario} task {run.task_id}"
        self.sub_title = str(run.run_dir)
        options = []
        for s in run.steps:
            what = "final answer" if s.is_final else (s.tool or s.name or "format error")
            mark = " ✗" if s.is_error else ""
            options.append(Option(Text(visible(f"{s.index:>2}. {what}{mark}")), id=str(s.index)))
        self.query_one("#steps", OptionList).add_options(options)
        self.state(f"{steps_text(len(run.steps))} · stop: {run.stop_reason} · rebuilding the database after each "
                   "step…")
        self.show_step(0)
        verdict = run.verification()
        env_errors = sum(1 for s in run.steps if is_environment_error(s.error_kind))
        final, error = diff_or_error(run.final_diff)
        self.query_one(SideBySide).show(final, verdict, env_errors, run.stop_reason,
                                        title="Database changes (the run's final.db)",
                                        traced=[s for s in run.steps if s.traceback])
        if error is not None:
            self.query_one(SideBySide).query_one(DiffView).show(None, error=error)
        self.materialize()

    def state(self, text: str | Text) -> None:
        if not screen_left(self):  # a worker may finish after the screen was closed, or as it is removed
            # the run's record (its stop reason) is in it: text, never markup
            self.query_one("#replay-state", Static).update(text if isinstance(text, Text) else Text(visible(text)))

    @work(exclusive=True, group="replay")
    async def materialize(self) -> None:
        catalog = self.replay_catalog()
        try:
            pool = await self.app.get_pool()
            await self.run.materialize(pool, catalog)
        except Exception as exc:  # noqa: BLE001 - shown whole, the steps stay readable
            self.rebuild_error = f"could not rebuild the intermediate states: {exc}"
            self.state(Text(self.rebuild_error, style="red"))
            if not screen_left(self):
                self.show_step(self.current)
            return
        try:
            same = "reproduces the run's final.db" if self.run.final_matches() else \
                "differs from the run's final.db (time-dependent values)"
        except (sqlite3.Error, OSError, ValueError):
            same = "cannot be compared with the run's final.db (it is not a database awm can read)"
        self.state(f"{steps_text(len(self.run.steps))} · stop: {self.run.stop_reason} · re-execution {same} · "
                   "←/→ or j/k step")
        if not screen_left(self):
            self.show_step(self.current)

    def replay_catalog(self):
        """Where the run's scenario is found: the data directories recorded in the run (as awm verify and awm
        replay), unless --data was given (then the TUI's catalog)."""
        return self.app.catalog if self.app.data_dirs else None

    def show_step(self, index: int) -> None:
        if not self.run.steps:  # said as awm replay says it; the database as the run left it (no step to rebuild)
            self.query_one("#step-text", Static).update(Text(visible(
                f"0 steps: this run recorded no turn (stop reason: {self.run.stop_reason or 'none: not finished'})"),
                style="bold"))
            diff, error = diff_or_error(self.run.final_diff)
            self.query_one("#step-diff", DiffView).show(diff, "Database changes (the run's final.db)", error)
            return
        self.current = max(0, min(index, len(self.run.steps) - 1))
        s = self.run.steps[self.current]
        # the run's record (the model's words, the environment's results): control characters made visible
        parts: list = [Text(visible(f"step {s.index} · turn {s.iteration}"), style="bold")]
        if s.content:
            parts += [Text("assistant", style="bold cyan"), Text(visible(s.content if len(s.content) < 4000
                                                                         else s.content[:4000] + "…"))]
        if s.name:
            parts += [Text.assemble(("\n→ ", "bold green"), (visible(s.tool or s.name), "green"), " ",
                                    visible(json.dumps(s.arguments, ensure_ascii=False, default=str)))]
        if s.observation is not None:
            parts += [Text("\n← observation", style="bold red" if s.is_error else "bold")]
            if s.traceback:  # the environment's exception first: its type and message, from the environment's code
                parts.append(Text(visible(error_title(s.observation, s.traceback)), style="bold magenta"))
            parts += [
                      Text(visible(s.observation if len(s.observation) < 4000 else s.observation[:4000] + "…"),
                           style="red" if s.is_error else "")]
        if s.traceback:
            parts += [Text("\ntraceback (the environment's; the model saw only the observation)", style="bold"),
                      Text(visible(s.traceback.rstrip()), style="dim")]
        for problem in s.format_errors or []:
            parts.append(Text(visible(f"format error: {problem}"), style="yellow"))
        if s.is_final:
            parts.append(Text("\n(final answer)", style="bold"))
        self.query_one("#step-text", Static).update(Group(*parts))
        diff, error = diff_or_error(lambda: self.run.diff_at(self.current)) if self.run.states else (None, None)
        self.query_one("#step-diff", DiffView).show(diff, f"After step {self.current}", error or self.rebuild_error)
        steps = self.query_one("#steps", OptionList)
        if steps.highlighted != self.current:
            steps.highlighted = self.current

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        # a highlight the list has already moved on from (→ typed again before it arrived) is not followed: it
        # would move the replay back, whose own highlight would move it forward again, for ever
        if event.option_list.highlighted != event.option_index:
            return
        if event.option_list.id == "steps" and int(event.option.id) != self.current:
            self.show_step(int(event.option.id))

    def action_step(self, delta: int) -> None:
        if isinstance(self.focused, DiffTable):  # ←/→ scroll the diff table sideways
            raise SkipAction()
        self.show_step(self.current + delta)

    def action_show_verdict(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = "verdict-tab" if tabs.active != "verdict-tab" else "steps-tab"

    def on_unmount(self) -> None:
        """However the screen goes (back, or the app quits), the re-executed states go with it; a rebuild still
        running is cancelled with the screen and removes its own directory."""
        self.run.cleanup()

    def action_back(self) -> None:
        self.app.pop_screen()
