"""One table across benchmarks, the TUI's view of ``awm bench report RUN_DIR…``: one row per model, one column group
per benchmark (AWM environments, BFCLv3, τ²-bench, MCP-Universe), n and 95 % confidence intervals where they apply,
the notes (offline simulations, tasks needing a service, replaced runs) and the runs that could not be read.

The table is the engine's (``awm_engine.bench.report.build_table`` and ``layout``): nothing is computed here."""
from __future__ import annotations

import shlex
from pathlib import Path

from rich import box
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import Header, Static

from awm_engine.bench import report

from ..actions import bindings
from ..widgets.footer import KeyFooter
from .leaving import screen_left

GROUP_STYLES = ("cyan", "magenta", "green", "yellow", "blue")


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def cli_twin(run_dirs: list[Path]) -> str:
    return "awm bench report " + " ".join(shlex.quote(str(r)) for r in run_dirs)


def render_table(table: dict) -> Table:
    """The engine's layout as a Rich table: each column headed by its group's title (first column of the group)
    over its own name, a group's columns in one colour; a cell is value, [CI] and (n) on three lines."""
    shown = report.layout(table, sep="\n")
    grid = Table(box=box.SIMPLE_HEAVY, show_lines=True, pad_edge=False, header_style="bold")
    grid.add_column("Model", style="bold", no_wrap=True)
    for g, (title, columns) in enumerate(shown["groups"]):
        style = GROUP_STYLES[g % len(GROUP_STYLES)]
        for i, column in enumerate(columns):
            header = Text.assemble((title if i == 0 else "", f"bold {style}"), "\n", (column, style))
            grid.add_column(header, justify="right", no_wrap=True)
    for cells in shown["rows"]:
        grid.add_row(*cells)
    return grid


class BenchReportScreen(Screen):
    """The runs given (the evaluation dashboard's, or ``awm-tui --report RUN_DIR…``) in one table. c copies it as
    Markdown (``awm bench report … --markdown``), r reads the runs again, escape goes back."""

    SCOPE = "report"
    BINDINGS = bindings("report")
    DEFAULT_CSS = """
    BenchReportScreen #report-head { height: auto; padding: 0 1; }
    BenchReportScreen #report-scroll { height: 1fr; }
    BenchReportScreen #report-table { width: auto; padding: 0 1; }
    BenchReportScreen #report-notes { width: auto; padding: 0 1 1 1; }
    """

    def __init__(self, run_dirs: list[Path | str]):
        super().__init__()
        self.run_dirs = [Path(r) for r in run_dirs]
        self.table: dict | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="report-head")
        with ScrollableContainer(id="report-scroll"):
            yield Static("", id="report-table")
            yield Static("", id="report-notes")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = "Report across benchmarks"
        self.sub_title = _count(len(self.run_dirs), "run")
        self.query_one("#report-scroll").focus()  # arrows and page keys scroll the table
        self.action_reload()

    def action_reload(self) -> None:
        self.query_one("#report-head", Static).update(Text("reading the runs…", "dim"))
        self.build()

    @work(thread=True, exclusive=True, group="bench-report")
    def build(self) -> None:
        try:
            table = report.build_table(self.run_dirs)
        except Exception as exc:  # noqa: BLE001 - build_table skips unreadable runs; anything else is shown
            self.app.call_from_thread(self._failed, f"{type(exc).__name__}: {exc}")
            return
        self.app.call_from_thread(self._show, table)

    def _failed(self, message: str) -> None:
        if not screen_left(self):  # the reading ends after the screen was closed: nothing to fill
            self.query_one("#report-head", Static).update(Text(message, "red"))

    def _show(self, table: dict) -> None:
        if screen_left(self):
            return
        self.table = table
        head = Text.assemble((_count(len(table["rows"]), "model"), "bold"),
                             f" from {_count(len(self.run_dirs), 'run')} ({len(table['skipped'])} skipped)  ·  "
                             "←/→ scroll  ·  the same table in a shell: ",
                             (cli_twin(self.run_dirs) if self.run_dirs else "awm bench report RUN_DIR…", "cyan"))
        if not self.run_dirs:
            head.append("\nno runs here yet: awm eval run, awm bench bfcl|tau2|mcp-universe run … --out DIR", "yellow")
        self.query_one("#report-head", Static).update(head)
        self.query_one("#report-table", Static).update(render_table(table))
        notes = Text("\n".join(report.layout(table)["notes"]))
        runs = [(row["model"], bench, path) for row in table["rows"] for bench, path in row["runs"].items()]
        if runs:
            notes.append("\n\nruns", "bold")
            for model, bench, path in runs:
                notes.append(f"\n- {model} · {table['groups'][bench]['title']}: {path}")
        if table["skipped"]:
            notes.append("\n\nskipped", "bold red")
            for problem in table["skipped"]:
                notes.append(f"\n- {problem['run_dir']}: {problem['reason']}", "red")
        self.query_one("#report-notes", Static).update(notes)

    def action_copy_markdown(self) -> None:
        if self.table is None:
            return
        self.app.copy_to_clipboard(report.markdown(self.table))
        self.notify("the table as Markdown is on the clipboard (awm bench report … --markdown)", title="report")

    def action_back(self) -> None:
        self.app.pop_screen()
