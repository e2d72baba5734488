"""awm-tui: the Textual front end over awm_engine (a first catalog view; richer screens come later)."""
from __future__ import annotations

import argparse
import sys

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Input, Static

from awm_engine.catalog import Catalog


class AwmApp(App):
    """Lists every loaded environment; type to filter."""

    TITLE = "awm"
    CSS = """
    #search { dock: top; }
    #status { dock: bottom; height: 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="app.quit"),
        Binding("slash", "focus_search", "Search", id="catalog.search"),
    ]

    def __init__(self, data_dirs: list[str] | None = None):
        super().__init__()
        self.data_dirs = data_dirs
        self.catalog: Catalog | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter environments…", id="search")
        yield DataTable(id="catalog", cursor_type="row", zebra_stripes=True)
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.catalog = Catalog.load(self.data_dirs)
        table = self.query_one(DataTable)
        table.add_columns("scenario", "tables", "tools", "tasks", "sql verifiers", "code verifiers")
        self.refill("")
        table.focus()
        errors = len(self.catalog.errors)
        self.query_one("#status", Static).update(
            f"{len(self.catalog)} environments from {', '.join(map(str, self.catalog.dirs))}"
            + (f" — {errors} data errors (see `awm catalog list`)" if errors else ""))

    def refill(self, needle: str) -> None:
        table = self.query_one(DataTable)
        table.clear()
        needle = needle.lower().strip()
        for s in self.catalog or []:
            if needle and needle not in s.key and needle not in s.name.lower():
                continue
            n = len(s.tasks)
            table.add_row(s.key, s.table_count, s.tool_count, n, f"{s.verifier_coverage('sql')}/{n}",
                          f"{s.verifier_coverage('code')}/{n}", key=s.key)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.refill(event.value)

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="awm-tui", description="Browse AWM environments.")
    parser.add_argument("--data", action="append", metavar="DIR",
                        help="AWM data directory (repeatable); default: the bundled sample_envs/")
    args = parser.parse_args(argv)
    AwmApp(args.data).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
