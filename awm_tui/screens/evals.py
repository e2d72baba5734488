"""Evaluation dashboard: runs, live progress, per-scenario metrics, every rollout, drill-down to replay."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Header, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from awm_engine.bench.tau2.run import is_tau2_run
from awm_engine.data.run_formats import RunFormatError
from awm_engine.eval.metrics import ERROR_CLASSES, failure_summary, summarize
from awm_engine.eval.runs import (
    NotAnEvalRun,
    find_eval_runs,
    load_eval_config,
)

from ..actions import bindings
from ..views.run_view import RunView
from ..widgets.footer import KeyFooter
from ..widgets.virtual_table import VirtualTable
from .bfcl import (
    CATEGORY_COLUMNS,
    CATEGORY_WIDTHS,
    ENTRY_COLUMNS,
    ENTRY_WIDTHS,
    BfclEntryScreen,
    BfclRunView,
    is_bfcl_run,
    run_label,
)
from .leaving import screen_left
from .mcp_universe import McpuRunView, McpuTaskScreen, is_mcpu_run
from .mcp_universe import run_label as mcpu_label

TABLE_VIEWS = (BfclRunView, McpuRunView)  # runs shown as two tables of their own (groups, then items)

# "failures": every rollout that did not complete, by cause (the word awm eval report uses, docs/exit-codes.md)
SCENARIO_COLUMNS = ["scenario", "rollouts", "reward", "complete", "pass@1", "pass@k", "failures"]
SCENARIO_WIDTHS = [24, 8, 7, 8, 7, 7, 12]  # least widths: the scenario and errors columns take the room left
ROLLOUT_COLUMNS = ["scenario", "task", "sample", "status", "label", "reward", "stop", "error"]
ROLLOUT_WIDTHS = [24, 4, 6, 6, 12, 6, 13, 12]  # a rollout is scenario / task / sample, each in its own column


def pass_k_shown(overall: dict, k: int) -> str:
    """The k of the summary's pass@k and pass^k: the largest measured, else the largest power of two up to the
    run's k (metrics are measured at powers of two)."""
    ks = sorted(overall["pass_at_k"], key=int)
    if ks:
        return ks[-1]
    shown = 1
    while shown * 2 <= max(1, int(k or 1)):
        shown *= 2
    return str(shown)


def _rollout_order(summary: dict) -> tuple:
    """Where a rollout goes in the dashboard's list: by scenario, then task, then sample (numbers as numbers; a
    value of another type, from a results file awm did not write, after them)."""
    def number(value) -> tuple:
        return (0, value, "") if isinstance(value, int) and not isinstance(value, bool) else (1, 0, str(value))
    return (str(summary.get("scenario")), number(summary.get("task_id")), number(summary.get("sample")))


class EvalScreen(Screen):
    SCOPE = "evals"
    BINDINGS = bindings("evals")
    DEFAULT_CSS = """
    EvalScreen #runs { width: 40; }
    EvalScreen #run-head { height: auto; padding: 0 1; }
    EvalScreen #progress { height: 1; padding: 0 1; }
    EvalScreen #scenario-table { height: 12; border: round $primary-background; }
    EvalScreen #rollout-table { height: 1fr; border: round $primary-background; }
    """

    def __init__(self, root: Path, selected: Path | None = None):
        super().__init__()
        self.root = root
        self.selected = selected
        self.runs: list[Path] = []
        self.view: RunView | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield OptionList(id="runs")
            with Vertical():
                yield Static("", id="run-head")
                yield ProgressBar(id="progress", show_eta=False)
                yield VirtualTable(id="scenario-table")
                yield VirtualTable(id="rollout-table")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = "Evaluations"
        self.sub_title = str(self.root)
        self.query_one("#scenario-table", VirtualTable).set_columns(SCENARIO_COLUMNS, SCENARIO_WIDTHS, grow=(0, 6), key=0,
                                                                    shrink=(5, 4, 3))
        self.query_one("#rollout-table", VirtualTable).set_columns(ROLLOUT_COLUMNS, ROLLOUT_WIDTHS, grow=(0, 7), key=0,
                                                                  shrink=(6, 5))
        self.reload_runs()
        self.set_interval(1.0, self.poll)
        self.set_interval(2.0, self.rescan)  # runs started by other processes while the dashboard is open

    def rescan(self) -> None:
        """List runs that appeared under the root since (another process's ``awm eval run``), keeping the run shown."""
        if screen_left(self):
            return
        found = {r.resolve() for r in find_eval_runs(self.root)}
        if found - {r.resolve() for r in self.runs}:
            if self.view is not None:
                self.selected = self.view.path
            self.reload_runs()

    def reload_runs(self) -> None:
        found = find_eval_runs(self.root, newest_first=True)
        if self.selected is not None and self.selected.resolve() not in [r.resolve() for r in found]:
            found.insert(0, self.selected)
        options = self.query_one("#runs", OptionList)
        options.clear_options()
        self.runs = []
        for run in found:
            if is_tau2_run(run):  # a τ²-bench run (awm bench tau2 run): shown as an evaluation (screens/tau2.py)
                from .tau2 import Tau2RunView

                if (label := Tau2RunView.label(run)) is not None:
                    options.add_option(Option(label, id=str(run)))
                    self.runs.append(run)
                continue
            if is_mcpu_run(run):  # an MCP-Universe run (awm bench mcp-universe run): screens/mcp_universe.py
                if (label := mcpu_label(run)) is not None:
                    options.add_option(Option(label, id=str(run)))
                    self.runs.append(run)
                continue
            if is_bfcl_run(run):  # a BFCL run (awm bench bfcl run): its own table and entry view
                try:
                    options.add_option(Option(run_label(run), id=str(run)))
                    self.runs.append(run)
                except (OSError, ValueError, TypeError) as exc:  # a newer awm's run among them
                    self.notify(str(exc), title="evaluations", severity="error", markup=False)
                continue
            try:
                config = load_eval_config(run)
            except RunFormatError as exc:  # a newer awm's run: say so, and leave it out
                self.notify(str(exc), title="evaluations", severity="error", markup=False)
                continue
            except (OSError, ValueError, TypeError):
                continue
            self.runs.append(run)
            options.add_option(Option(Text.assemble((run.name, "bold"), f"\n{config.model} · k={config.k}"),
                                      id=str(run)))
        if self.runs:
            selected = self.selected.resolve() if self.selected is not None else None
            target = next((r for r in self.runs if r.resolve() == selected), self.runs[0])
            self.open_run(target)
            options.highlighted = self.runs.index(target)
        else:
            self.query_one("#run-head", Static).update(f"no evaluation runs under {self.root} yet — start one with "
                                                       "`awm eval run ... --out outputs/eval/<name>`")

    def open_run(self, path: Path) -> None:
        if self.view is not None and self.view.path.resolve() == Path(path).resolve():
            return
        try:
            if is_tau2_run(path):
                from .tau2 import Tau2RunView

                view = Tau2RunView(Path(path))
            elif is_mcpu_run(path):
                view = McpuRunView(Path(path))
            else:
                view = BfclRunView(Path(path)) if is_bfcl_run(path) else RunView(Path(path))
        except (RunFormatError, NotAnEvalRun, OSError, ValueError, TypeError) as exc:
            self.notify(str(exc), title="evaluations", severity="error", markup=False)
            return
        self.view = view
        self.refresh_bindings()  # the MCP-Universe column switch shows only for its runs
        rollouts = self.query_one("#rollout-table", VirtualTable)
        if not isinstance(view, TABLE_VIEWS) and rollouts.columns != ROLLOUT_COLUMNS:  # after a BFCL run
            rollouts.set_columns(ROLLOUT_COLUMNS, ROLLOUT_WIDTHS, grow=(0, 7), key=0,
                                                                  shrink=(6, 5))
        rollouts.set_rows([], [])
        self.poll()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "runs":
            self.open_run(Path(event.option.id))

    # -- live refresh -----------------------------------------------------------------------------
    def poll(self) -> None:
        if self.view is not None and self.view.error is None and not screen_left(self):
            self.refresh_run()

    @work(thread=True, exclusive=True, group="eval-refresh")
    def refresh_run(self) -> None:
        view = self.view
        if view is None:
            return
        if isinstance(view, TABLE_VIEWS):
            try:
                shown = view.refresh()
            except (RunFormatError, OSError, ValueError) as exc:
                view.error = str(exc)
                self.app.call_from_thread(self._failed, view)
                return
            self.app.call_from_thread(self._show_bfcl, view, shown)
            return
        try:
            new = view.index.refresh()
        except RunFormatError as exc:  # a newer awm appended to the results file
            view.error = str(exc)
            self.app.call_from_thread(self._failed, view)
            return
        expected = view.expected_total()
        summaries = list(view.index.summaries())
        metrics = summarize(summaries, view.config.pass_threshold)
        self.app.call_from_thread(self._show, view, summaries, metrics, expected, new)

    def _failed(self, view: RunView) -> None:
        if view is self.view and not screen_left(self):
            self.notify(view.error, title="evaluations", severity="error", markup=False)

    def _show(self, view: RunView, summaries, metrics, expected, new: int) -> None:
        if view is not self.view or screen_left(self):  # closed meanwhile, or as it is removed (its widgets go first)
            return
        overall = metrics["overall"]
        done = len(summaries)
        state = "running" if view.running() and (expected is None or done < expected) else "finished"
        kmax = pass_k_shown(overall, view.config.k)
        fmt = (lambda v: "-" if v is None else f"{v:.3f}")  # noqa: E731
        passes = f"  ·  pass@1 {fmt(overall['pass_at_k'].get('1'))}"
        if kmax != "1":  # with k = 1, pass@k and pass^k are pass@1
            passes += (f"  ·  pass@{kmax} {fmt(overall['pass_at_k'].get(kmax))}"
                       f"  ·  pass^{kmax} {fmt(overall['pass_hat_k'].get(kmax))}")
        head = Text.assemble((f"{view.path.name}", "bold"), f"  ·  {view.config.model}  ·  k={view.config.k}  ·  ",
                             (state, "green" if state == "finished" else "yellow"),
                             f"\nrollouts {done}" + (f"/{expected}" if expected else ""),
                             f"  ·  mean reward {fmt(overall['mean_reward'])}",
                             f"  ·  completion {fmt(overall['completion_rate'])}", passes,
                             "\nfailures: " + (", ".join(f"{c} {overall['errors'][c]}" for c in ERROR_CLASSES
                                                       if overall["errors"][c]) or "none"))
        self.query_one("#run-head", Static).update(head)
        bar = self.query_one(ProgressBar)
        bar.update(total=expected or max(done, 1), progress=done)
        rows = []
        for name, agg in metrics["scenarios"].items():
            errors = ", ".join(f"{c} {n}" for c, n in agg["errors"].items() if n) or "-"
            row = [name, agg["rollouts"], fmt(agg["mean_reward"]), fmt(agg["completion_rate"]),
                   fmt(agg["pass_at_k"].get("1")), fmt(agg["pass_at_k"].get(kmax)), errors]
            rows.append(tuple(row[:5] + row[6:]) if kmax == "1" else tuple(row))
        scenarios = self.query_one("#scenario-table", VirtualTable)
        columns = [f"pass@{kmax}" if c == "pass@k" else c for c in SCENARIO_COLUMNS]
        if kmax == "1":  # a second pass@1 column says nothing
            columns, widths = columns[:5] + columns[6:], SCENARIO_WIDTHS[:5] + SCENARIO_WIDTHS[6:]
        else:
            widths = SCENARIO_WIDTHS
        if columns != scenarios.columns:
            scenarios.set_columns(columns, widths, grow=(0, len(columns) - 1))
        scenarios.set_rows(rows, list(metrics["scenarios"]))
        if new or self.query_one("#rollout-table", VirtualTable).row_count != done:
            table = self.query_one("#rollout-table", VirtualTable)
            ordered = sorted(summaries, key=_rollout_order)  # by scenario, task and sample, not as they finished
            table.set_rows([(s["scenario"], s["task_id"], s["sample"], s.get("status"), s.get("label") or "-",
                             "-" if s.get("reward") is None else f"{s['reward']:.2f}", s.get("stop_reason") or "-",
                             failure_summary(s)) for s in ordered], [s["id"] for s in ordered])

    def _show_bfcl(self, view: BfclRunView | McpuRunView, shown: dict) -> None:
        if view is not self.view or screen_left(self):
            return
        self.query_one("#run-head", Static).update(shown["head"])
        self.query_one(ProgressBar).update(total=max(shown["expected"], 1), progress=shown["done"])
        group_columns, group_widths, item_columns, item_widths = view.tables() if isinstance(view, McpuRunView) \
            else (CATEGORY_COLUMNS, CATEGORY_WIDTHS, ENTRY_COLUMNS, ENTRY_WIDTHS)
        for table_id, columns, widths, rows, keys in (
                ("#scenario-table", group_columns, group_widths, shown["categories"], shown["category_keys"]),
                ("#rollout-table", item_columns, item_widths, shown["entries"], shown["entry_keys"])):
            table = self.query_one(table_id, VirtualTable)
            if table.columns != columns:
                table.set_columns(columns, widths, grow=(0, len(columns) - 1))
            if table_id == "#scenario-table" or shown["new"] or table.row_count != len(rows):
                table.set_rows(rows, keys)

    # -- drill-down ---------------------------------------------------------------------------------
    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        if event.table.id == "rollout-table" and event.key:  # a click (enter is read at once: action_open_rollout)
            self.open_rollout(event.key)

    def action_open_rollout(self) -> None:
        """Enter in the rollouts, read as the app reads it (after the rollouts' keys typed before it, read the same
        way): the screen it opens is on top at once, so the keys typed after enter wait for it and land in it."""
        key = self.query_one("#rollout-table", VirtualTable).cursor_key
        if key:
            self.open_rollout(key)

    def action_move_row(self, key: str) -> None:
        self.query_one("#rollout-table", VirtualTable).move(key)

    def open_rollout(self, key: str) -> None:
        """The rollout's replay (a BFCL entry's or an MCP-Universe task's own screen)."""
        if isinstance(self.view, BfclRunView):
            self.app.push_screen(BfclEntryScreen(self.view.index.record(key)))
            return
        if isinstance(self.view, McpuRunView):
            try:
                record = self.view.index.record(key)
            except (OSError, ValueError, KeyError) as exc:  # rewritten meanwhile (score again): the next poll
                self.notify(f"{key}: {exc}", title="evaluations", severity="warning", markup=False)
                return
            self.app.push_screen(McpuTaskScreen(record, self.view.config.simulation))
            return
        if self.view is not None:
            record = self.view.index.entries[key].summary
            if record.get("run_dir") and Path(record["run_dir"], "trajectory.json").is_file():
                self.app.open_replay(record["run_dir"])
            else:
                self.notify(f"{key} has no run directory (it failed before starting)", severity="warning")

    def action_focus_rollouts(self) -> None:
        self.set_focus(self.query_one("#rollout-table", VirtualTable))  # now: the keys after ctrl+o are the table's

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_grouping":  # only an MCP-Universe run has two column sets
            return isinstance(self.view, McpuRunView)
        if action in ("open_rollout", "move_row"):  # elsewhere enter and the arrows are the focused widget's
            return self.focused is self.query_one("#rollout-table", VirtualTable)
        return True

    def action_toggle_grouping(self) -> None:
        """MCP-Universe: the paper's six domains ⇄ the AWM paper's columns (``report --grouping paper|awm``)."""
        if isinstance(self.view, McpuRunView):
            self.view.grouping = "awm" if self.view.grouping == "paper" else "paper"
            self.refresh_run()

    def action_bench_report(self) -> None:
        """Every run under this dashboard's folder in one table across benchmarks (``awm bench report RUN_DIR…``;
        a run the report cannot read is listed with the reason), oldest first so that a model's newest run of a
        benchmark is the one shown."""
        runs = list(reversed(find_eval_runs(self.root, newest_first=True)))
        if self.selected is not None and self.selected.resolve() not in [r.resolve() for r in runs]:
            runs.append(self.selected)
        self.app.open_report(runs)

    def action_back(self) -> None:
        self.app.pop_screen()
