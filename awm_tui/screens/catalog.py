"""The catalog: every loaded environment, filtered as you type, sortable, with counts, health and problems."""
from __future__ import annotations

import asyncio

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from awm_engine.data.catalog import Catalog
from awm_engine.data.catalog_rows import CatalogRow
from awm_engine.data.terminal import visible

from ..actions import bindings
from ..views.catalog_rows import Row, health_cell, problem_cell
from ..widgets.footer import KeyFooter
from ..widgets.virtual_table import VirtualTable

COLUMNS = ("scenario", "name", "tables", "tools", "tasks", "sql", "code", "health", "problems")
SHRINK = (1, 2, 3, 5, 6, 4)  # the order columns give way in a narrow terminal (never the key, health, problems)
WIDTHS = (30, 24, 6, 5, 5, 7, 7, 14, 12)  # least widths: scenario, then name widen to their longest cell when there is room


def catalog_rows(catalog: Catalog) -> list[Row]:
    return [Row(CatalogRow.from_scenario(s), health_cell(s), problem_cell(s)) for s in catalog]


class CatalogScreen(Screen):
    SCOPE = "catalog"
    BINDINGS = bindings("catalog")

    def __init__(self, data_dirs: list[str] | None):
        super().__init__()
        self.data_dirs = data_dirs
        self.catalog: Catalog | None = None
        self.rows: list[Row] = []
        self.sort_column = 0
        self.sort_reverse = False
        self.needle = ""
        self.empty_reason: str | None = None  # why nothing is listed (said in the status line, not "0 of 0")
        self._cells_timer = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="type to filter environments (name, key)…", id="search")
        yield VirtualTable(id="catalog")
        yield Static("loading…", id="status")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one(VirtualTable)
        # at 80 columns the key, tasks, code, health and problems stay; the name and counts give way first
        table.set_columns(list(COLUMNS), list(WIDTHS), grow=(0, 1), key=0, shrink=SHRINK)
        if not getattr(self.app, "cursor_blink", True):
            for field in self.query(Input):
                field.cursor_blink = False
        table.focus()
        self.load_catalog()

    @work(thread=True, exclusive=True, group="catalog")
    def load_catalog(self) -> None:
        try:
            catalog = Catalog.load(self.data_dirs)
        except Exception as exc:  # noqa: BLE001 - a data directory that cannot be read: said, not a crash
            self.app.call_from_thread(self._unusable, f"the data cannot be read: {type(exc).__name__}: {exc}")
            return
        rows = catalog_rows(catalog)
        if getattr(self.app, "tau2_data", None) is not None:  # τ²-bench's domains (awm-tui --tau2-data)
            from .tau2 import tau2_rows

            rows += tau2_rows(self.app.tau2_data)
        self.app.call_from_thread(self._loaded, catalog, rows)

    def on_screen_resume(self) -> None:
        """Back from an environment: its health and problems may have been computed there (ctrl+d)."""
        key = self.selected_key()
        row = next((r for r in self.rows if r.key == key), None)
        if row is not None and self.catalog is not None and key in self.catalog:
            scenario = self.catalog.get(key)
            row.health, row.problems = health_cell(scenario), problem_cell(scenario)
            self.refill()
        elif row is not None and getattr(self.app, "tau2_data", None) is not None:  # a τ² domain (its ctrl+d)
            from .tau2 import tau2_rows

            fresh = next((r for r in tau2_rows(self.app.tau2_data) if r.key == key), None)
            if fresh is not None:
                row.problems = fresh.problems
                self.refill()

    def _unusable(self, why: str) -> None:
        self.empty_reason = why
        self.query_one("#status", Static).update(Text(visible(why), style="bold red"))
        self.notify(visible(why), title="catalog", severity="error", markup=False, timeout=15)

    def _loaded(self, catalog: Catalog, rows: list[Row]) -> None:
        self.catalog = catalog
        self.app.catalog = catalog
        self.rows = rows
        self.refill()
        if not rows:
            where = ", ".join(str(d) for d in catalog.dirs) or "the data directories"
            why = (f"no AWM environments in {where}: an AWM data directory holds gen_envs.jsonl, gen_scenario.jsonl, "
                   "gen_tasks.jsonl … (awm catalog list --data DIR says what is wrong)")
            self._unusable(why)
        if self._cells_timer is None:
            self._cells_timer = self.set_interval(5.0, self.refresh_cells)

    @work(thread=True, exclusive=True, group="catalog-cells")
    def refresh_cells(self) -> None:
        """Health and problems written by other processes (``awm env test``, ``awm env doctor``) while open."""
        catalog = self.catalog
        if catalog is None:
            return
        changed = []
        for row in list(self.rows):
            if row.key not in catalog:
                continue
            scenario = catalog.get(row.key)
            cells = (health_cell(scenario), problem_cell(scenario))
            if cells != (row.health, row.problems):
                changed.append((row, cells))
        if changed:
            self.app.call_from_thread(self._cells_changed, changed)

    def _cells_changed(self, changed) -> None:
        for row, (health, problems) in changed:
            row.health, row.problems = health, problems
        self.refill()

    # -- table --------------------------------------------------------------------------------
    def visible_rows(self) -> list[Row]:
        needle = self.needle.lower().strip()
        rows = [r for r in self.rows if not needle or needle in r.key or needle in r.name.lower()]
        return sorted(rows, key=lambda r: r.cells()[self.sort_column], reverse=self.sort_reverse)

    def refill(self) -> None:
        table = self.query_one(VirtualTable)
        listed = self.visible_rows()
        table.set_rows([r.cells() for r in listed], [r.key for r in listed])
        catalog = self.catalog
        errors = len(catalog.errors) if catalog else 0
        names = ", ".join(getattr(d, "name", str(d)) for d in (catalog.dirs if catalog else []))
        arrow = "↓" if self.sort_reverse else "↑"
        if self.empty_reason and not self.rows:
            self.query_one("#status", Static).update(Text(visible(self.empty_reason), style="bold red"))
            return
        self.query_one("#status", Static).update(
            f"{len(listed)} of {len(self.rows)} environments · {names} · sorted by {COLUMNS[self.sort_column]} "
            f"{arrow}" + (f" · {errors} data errors (awm catalog list shows them)" if errors else ""))

    def selected_key(self) -> str | None:
        return self.query_one(VirtualTable).cursor_key

    # -- events and actions ---------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        self.needle = event.value
        self.refill()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("focus_search", "cycle_sort", "reverse_sort", "move_row") and \
                self.focused is self.query_one("#search", Input):
            return False  # in the search box the key is typed (a letter, "/", the arrows and home/end of the box)
        return True

    def action_move_row(self, key: str) -> None:
        """↑ ↓ PgUp PgDn Home End in the list, handled as the key is read (an enter typed after them opens the row
        they moved to)."""
        self.query_one(VirtualTable).move(key)

    async def _searched(self) -> Input:
        """The search box once it has handled every key typed into it (enter is read before them), the list
        filtered by all of it."""
        search = self.query_one("#search", Input)
        done = asyncio.Event()
        search.call_later(done.set)
        await done.wait()
        if self.needle != search.value:
            self.needle = search.value
            self.refill()
        return search

    async def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        await self.action_open_selected()

    def on_virtual_table_header_selected(self, event: VirtualTable.HeaderSelected) -> None:
        index = event.column_index
        self.sort_reverse = (not self.sort_reverse) if index == self.sort_column else False
        self.sort_column = index
        self.refill()

    def action_focus_search(self) -> None:
        self.set_focus(self.query_one("#search", Input))  # now: the keys after / are the search's

    async def action_clear_search(self) -> None:
        search = await self._searched()
        search.value = ""
        self.needle = ""
        self.refill()
        self.set_focus(self.query_one(VirtualTable))

    def action_cycle_sort(self) -> None:
        self.sort_column = (self.sort_column + 1) % len(COLUMNS)
        self.refill()

    def action_reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.refill()

    def action_evaluations(self) -> None:
        self.app.open_evaluations()

    async def action_open_selected(self) -> None:
        """Enter: open the highlighted environment; in the search box, open it when only one matches, else go to
        the list (at once: the keys typed after enter are the list's)."""
        if self.focused is self.query_one("#search", Input):
            await self._searched()
            table = self.query_one(VirtualTable)
            if table.row_count != 1:
                self.set_focus(table)
                return
        key = self.selected_key()
        if key and self.catalog is not None:
            self.app.open_environment(key)
