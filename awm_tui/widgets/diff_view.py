"""A readable database diff: one table per changed database table, its key columns pinned on the left, wide
tables scrolling sideways, and ``enter`` on a row opening all of its columns (``before → after`` for updates)."""
from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from awm_engine.data.terminal import visible
from awm_engine.db.diff import DbDiff, TableDiff

MAX_ROWS = 500  # per kind of change and table: awm db diff shows all
CELL = 40
SIGNS = {"inserted": ("+", "green"), "deleted": ("-", "red"), "updated": ("~", "yellow")}


def _cell(value: Any, width: int = CELL) -> str:
    """A database value in a cell (control characters visible: the database is the environment's)."""
    text = "NULL" if value is None else visible(str(value).replace("\n", " "))
    return text if len(text) <= width else text[:width - 1] + "…"


def _full(value: Any) -> str:
    return "NULL" if value is None else visible(value)


def diff_summary(diff: DbDiff, title: str) -> str:
    counts = diff.counts()
    tables = f"{counts['tables']} table" + ("" if counts["tables"] == 1 else "s")
    return (f"{title}: {tables}, +{counts['inserted']} inserted, -{counts['deleted']} deleted, "
            f"~{counts['updated']} updated")


def key_columns(t: TableDiff) -> list[str]:
    """The key columns shown first (a table without a primary key is matched by rowid, which rows do not hold)."""
    return [k for k in t.key_columns if k != "rowid"]


def table_columns(t: TableDiff) -> list[str]:
    """Every column of the changed rows: keys first, then the columns an update changed, then the others, each in
    table order."""
    seen: list[str] = []
    for row in t.inserted + t.deleted + [u.after for u in t.updated] + [u.before for u in t.updated]:
        seen += [c for c in row if c not in seen]
    keys = key_columns(t)
    changed = {c for u in t.updated for c in u.changed}
    return keys + [c for c in seen if c in changed and c not in keys] + [c for c in seen
                                                                        if c not in changed and c not in keys]


class RowChange:
    """One changed row: its kind (inserted | deleted | updated) and values (before and after for updates)."""

    def __init__(self, table: TableDiff, kind: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
                 changed: list[str] | None = None):
        self.table, self.kind, self.before, self.after = table, kind, before, after
        self.changed = changed or []

    @property
    def values(self) -> dict[str, Any]:
        return self.after if self.after is not None else (self.before or {})

    def key_text(self) -> str:
        keys = key_columns(self.table)
        return ", ".join(f"{k}={_full(self.values.get(k))}" for k in keys) or "no primary key"

    def cells(self, columns: list[str], stacked: bool = False) -> list[Text]:
        """``stacked``: an updated value as ``before`` over ``→ after`` (a narrow pane shows both without scrolling
        sideways), else ``before → after`` on one line."""
        sign, style = SIGNS[self.kind]
        keys = key_columns(self.table)
        out = [Text(sign, style=f"bold {style}")]
        for c in columns:
            if self.kind != "updated":
                out.append(Text(_cell(self.values.get(c)), style="bold " + style if c in keys else style))
            elif c in self.changed:
                out.append(Text.assemble((_cell(self.before.get(c), 24), "strike dim"), "\n→ " if stacked else " → ",
                                         (_cell(self.after.get(c), 24), "bold yellow")))
            else:
                out.append(Text(_cell(self.values.get(c)), style="bold" if c in keys else "dim"))
        return out


def row_changes(t: TableDiff) -> list[RowChange]:
    return ([RowChange(t, "inserted", None, r) for r in t.inserted[:MAX_ROWS]]
            + [RowChange(t, "deleted", r, None) for r in t.deleted[:MAX_ROWS]]
            + [RowChange(t, "updated", u.before, u.after, u.changed) for u in t.updated[:MAX_ROWS]])


class DiffTable(DataTable):
    """The changed rows of one table; its key columns stay in view while the others scroll sideways."""

    DEFAULT_CSS = """
    DiffTable { height: auto; max-height: 16; margin: 0 0 1 0; }
    """

    def __init__(self, table: TableDiff, stacked: bool = False, **kwargs: Any):
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.table = table
        self.stacked = stacked
        self.changes = row_changes(table)

    def on_mount(self) -> None:
        columns = table_columns(self.table)
        self.add_column("", key="sign")
        for c in columns:
            self.add_column(Text(visible(c)), key=c)  # a column name: the environment's text, not markup
        self.fixed_columns = 1 + len(key_columns(self.table))
        for i, change in enumerate(self.changes):
            self.add_row(*change.cells(columns, self.stacked), key=str(i),
                         height=2 if self.stacked and change.kind == "updated" else 1)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.app.push_screen(RowDetail(self.changes[int(event.row_key.value)]))


def row_detail(change: RowChange) -> RichTable:
    sign, style = SIGNS[change.kind]
    grid = RichTable(title=escape(visible(f"{change.table.table} · {change.kind} row · {change.key_text()}")),
                     title_justify="left",
                     title_style=f"bold {style}", expand=True, show_edge=False, box=None, padding=(0, 2))
    grid.add_column("column", style="bold", no_wrap=True)
    grid.add_column("before → after" if change.kind == "updated" else "value", overflow="fold")
    for c in table_columns(change.table):
        if change.kind == "updated" and c in change.changed:
            grid.add_row(Text(visible(c), style="bold yellow"), Text.assemble((_full(change.before.get(c)), "strike"), " → ",
                                                                     (_full(change.after.get(c)), "bold yellow")))
        elif change.kind == "updated":
            grid.add_row(Text(visible(c)), Text(_full(change.values.get(c)), style="dim"))
        else:
            grid.add_row(Text(visible(c)), Text(_full(change.values.get(c)), style=style))
    return grid


class RowDetail(ModalScreen):
    """All the columns of one changed row, whole."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    RowDetail { align: center middle; }
    RowDetail > VerticalScroll { width: 90%; max-width: 120; height: auto; max-height: 90%;
                                 border: round $accent; background: $surface; padding: 0 1; }
    """

    def __init__(self, change: RowChange):
        super().__init__()
        self.change = change

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(row_detail(self.change), id="row-detail")
            yield Static(Text("escape or enter closes", style="dim"))


NARROW = 30  # a diff pane narrower than this lists each changed row as lines instead of a table


def narrow_rows(t: TableDiff) -> Text:
    """The changed rows of one table for a narrow pane: the sign and key, then an update's changed columns as
    ``column: before → after`` (an insert's or a delete's every column), wrapped, never cut at the pane edge."""
    keys = key_columns(t)
    out = Text()
    for change in row_changes(t):
        sign, style = SIGNS[change.kind]
        values = change.values
        key = ", ".join(f"{visible(k)} {_cell(values.get(k))}" for k in keys) or "(no key)"
        out.append(f"{sign} ", style=f"bold {style}")
        out.append(key + "\n", style="bold")
        shown = change.changed if change.kind == "updated" else [c for c in table_columns(t) if c not in keys]
        for c in shown:
            out.append(f"  {visible(c)}: ", style="bold yellow" if change.kind == "updated" else "")
            if change.kind == "updated":
                out.append(_cell(change.before.get(c), 24), style="strike dim")
                out.append(" → ")
                out.append(_cell(change.after.get(c), 24) + "\n", style="bold yellow")
            else:
                out.append(_cell(values.get(c)) + "\n", style=style)
    out.rstrip()
    return out


class DiffView(VerticalScroll):
    """A database diff (``show``); ``computing…`` until it is known; an error, whole, when it cannot be."""

    DEFAULT_CSS = """
    DiffView > .diff-title { text-style: bold; }
    DiffView > .diff-table-title { color: $accent; text-style: bold; }
    DiffView > .diff-note { color: $text-muted; }
    DiffView > .diff-error { color: $error; }
    """

    def __init__(self, *, id: str | None = None, title: str = "Database changes"):
        super().__init__(id=id)
        self.diff: DbDiff | None = None
        self.heading = title
        self.error: str | None = None

    def show(self, diff: DbDiff | None, title: str | None = None, error: str | None = None) -> None:
        self.diff, self.error = diff, error
        if title is not None:
            self.heading = title
        self.refresh(recompose=True)

    def compose(self) -> ComposeResult:
        diff = self.diff
        if diff is None:
            yield Static(Text(self.heading), classes="diff-title")
            yield (Static(Text(self.error), classes="diff-error") if self.error
                   else Static(Text("computing…"), classes="diff-note"))
            return
        yield Static(Text(diff_summary(diff, self.heading)), classes="diff-title")
        if diff.is_empty:
            yield Static(Text("no rows changed"), classes="diff-note")
        for t in diff.tables:
            keys = key_columns(t)
            yield Static(Text(visible(t.table) + (f" ({t.status})" if t.status != "changed" else "")
                              + (f"  key: {', '.join(keys)}" if keys else "  (no primary key)")),
                         classes="diff-table-title")
            if t.columns_added or t.columns_removed:
                yield Static(Text("columns " + ", ".join([f"+{c}" for c in t.columns_added]
                                                         + [f"-{c}" for c in t.columns_removed])), classes="diff-note")
            if (t.inserted or t.deleted or t.updated) and 0 < self.size.width < NARROW:
                yield Static(narrow_rows(t), classes="diff-rows")  # a narrow pane: each row as lines, wrapped
            elif t.inserted or t.deleted or t.updated:
                yield DiffTable(t)
            hidden = sum(max(0, len(g) - MAX_ROWS) for g in (t.inserted, t.deleted, t.updated))
            if hidden:
                yield Static(Text(f"… {hidden} more rows (awm db diff shows all)"), classes="diff-note")
        if diff.tables and not 0 < self.size.width < NARROW:
            yield Static(Text("enter on a row shows all its columns · ←/→ scroll a wide table"), classes="diff-note")
