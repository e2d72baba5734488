"""One environment, in tabs: Overview, Schema, Data, Tools, Tasks."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rich.cells import cell_len
from rich.console import Group
from rich.constrain import Constrain
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table as RichTable
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, OptionList, Static, TabbedContent, TabPane, Tree
from textual.widgets.option_list import Option

from awm_engine.data import codeinfo, sql_box
from awm_engine.data.catalog import Scenario
from awm_engine.data.sql_guard import Deadline
from awm_engine.data.terminal import visible
from awm_engine.db.templates import TemplateCache
from awm_engine.runtime.health import cached_health, invalid_schemas
from awm_engine.runtime.openapi_tools import schema_problem_note
from awm_engine.verify.doctor import Diagnosis, diagnose, quick_diagnosis

from ..actions import bindings
from ..widgets.footer import KeyFooter
from ..widgets.problems import problems_view
from ..widgets.safe import shown
from .leaving import screen_left

PAGE = 50
SQL_SECONDS = sql_box.SECONDS  # the box's deadline: executing, fetching and rendering (engine: data/sql_box.py)
THEME = "ansi_dark"
TAB_FOCUS = {"overview": "#overview-scroll", "schema": "#schema-tree", "data": "#data-tables", "tools": "#tool-list",
             "tasks": "#task-list"}  # the widget each tab's number key focuses


def code_block(code: str, lexer: str) -> Syntax:
    """Code from environment data (DDL, handlers, verifiers), its control characters visible. Python and JSON lines
    are never wrapped (``fit_to_pane`` makes the pane scroll sideways instead: nothing is cut mid-token); SQL
    DDL, one long line per table, wraps between words."""
    return Syntax(visible(code), lexer, theme=THEME, line_numbers=False, word_wrap=lexer == "sql")


def fit_to_pane(parts: list, width: int) -> tuple[Group, int]:
    """A detail pane's content and the width to give it: prose and tables wrap at the pane's ``width``; code keeps
    every line whole, so the content is as wide as its widest code line (the pane scrolls sideways)."""
    whole = [p for p in parts if isinstance(p, Syntax) and not p.word_wrap]
    widest = max([cell_len(line) for p in whole for line in p.code.splitlines()] + [0])
    return Group(*(p if any(p is w for w in whole) else Constrain(p, width) for p in parts)), max(width, widest)


def parameters_view(params, narrow: bool = False):
    """A tool's parameters: a table in a wide terminal; in a narrow one a list (name, where, type, required, then
    the description below), so that no name or header is ever cut."""
    if not params:
        return Text("No parameters.")
    if not narrow:
        table = RichTable(title="Parameters", title_justify="left", expand=True)
        for col in ("name", "in", "type", "required", "description"):
            table.add_column(col)
        for p in params:
            table.add_row(shown(p.name), shown(p.location), shown(p.type), "yes" if p.required else "",
                          shown(p.description))
        return table
    lines: list = [Text("Parameters", style="bold")]
    for p in params:
        lines.append(Text.assemble((visible(p.name), "bold"), (" required" if p.required else "", "bold red"),
                                   (visible(f"  {p.location} · {p.type}"), "dim")))
        if p.description:
            lines.append(Text("    " + visible(p.description)))
    return Group(*lines)


def _shown_path(path) -> str:
    """Relative to the working directory when below it (stable across checkouts), else absolute."""
    import os

    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else str(path)


class EnvironmentScreen(Screen):
    SCOPE = "environment"
    BINDINGS = bindings("environment")

    def __init__(self, scenario: Scenario):
        super().__init__()
        self.scenario = scenario
        self._shown: dict[str, tuple[list, int]] = {}  # detail pane -> (parts, the width they were fitted to)
        self.tables = scenario.tables()
        self.tools = scenario.tools() if scenario.code else []
        self.schema_errors = invalid_schemas(scenario) if scenario.code else {}
        self.db_path = None
        self.data_table: str | None = None
        self.page = 0
        self.total = 0
        self.build_note = ""
        self.show_source = False
        self.current_tool = 0
        self.diagnosis: Diagnosis | None = None  # from ctrl+d (awm env doctor); else the cached or static one
        self.diagnosing = False

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="tabs", initial="overview"):
            with TabPane("1 Overview", id="overview"):
                yield VerticalScroll(Static(id="overview-body"), id="overview-scroll")
            with TabPane("2 Schema", id="schema"):
                with Horizontal():
                    yield Tree("schema", id="schema-tree")
                    yield VerticalScroll(Static(id="schema-detail"), id="schema-right")
            with TabPane("3 Data", id="data"):
                with Horizontal():
                    yield OptionList(id="data-tables")
                    with Vertical(id="data-right"):
                        yield DataTable(id="data-grid", zebra_stripes=True)
                        yield Static("", id="data-status")
                        yield Input(placeholder="read-only SQL (enter runs)", id="sql")
            with TabPane("4 Tools", id="tools"):
                with Horizontal():
                    yield OptionList(id="tool-list")
                    yield VerticalScroll(Static(id="tool-detail"), id="tool-right")
            with TabPane("5 Tasks", id="tasks"):
                with Horizontal():
                    yield OptionList(id="task-list")
                    yield VerticalScroll(Static(id="task-detail"), id="task-right")
        yield KeyFooter()

    def on_mount(self) -> None:
        if not getattr(self.app, "cursor_blink", True):
            for field in self.query(Input):
                field.cursor_blink = False
        self.title = self.scenario.name
        self.sub_title = self.scenario.key
        self.query_one("#overview-body", Static).update(self.overview())
        self.fill_schema()
        self.query_one("#tool-list", OptionList).add_options(
            [Option(shown(f"{t.method:6} {t.name}" + (" ⚠" if t.name in self.schema_errors else "")), id=str(i))
             for i, t in enumerate(self.tools)])
        self.query_one("#task-list", OptionList).add_options(
            [Option(shown(f"{i}. {text[:90]}" + ("…" if len(text) > 90 else "")), id=str(i))
             for i, text in enumerate(self.scenario.tasks)])
        if self.tools:
            self.show_tool(0)
        if self.scenario.tasks:
            self.show_task(0)
        self.prepare_database()

    # -- overview -----------------------------------------------------------------------------
    def overview(self) -> Group:
        s = self.scenario
        n = len(s.tasks)
        facts = RichTable.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        health = cached_health(s)
        health_text = "not tested yet (awm env test)" if not health else (
            f"{health['status']}: {'loads' if health['loads'] else 'does not load'}, {health['tools']} tools, "
            f"GET calls {health['calls_ok']} ok / {health['calls_5xx']} 5xx / {health['calls_4xx']} 4xx"
            + (f" — {health['error']}" if health.get("error") else ""))
        for label, value in (("scenario", s.key), ("data", _shown_path(s.data_dir)), ("tables", s.table_count),
                             ("sample rows", s.insert_count), ("tools", s.tool_count), ("tasks", n),
                             ("verifiers", f"sql {s.verifier_coverage('sql')}/{n}, code {s.verifier_coverage('code')}/{n}"),
                             ("reference solutions", len(s.solution_refs) or "none"), ("health", health_text)):
            facts.add_row(label, shown(value))
        diagnosis = self.diagnosis or quick_diagnosis(s, getattr(self.app, "catalog", None))
        return Group(shown(s.name, style="bold"), Text(""), shown(s.description or "(no description)"), Text(""), facts,
                     Text(""), problems_view(diagnosis, self.diagnosing))

    def action_diagnose(self) -> None:
        """Every check of ``awm env doctor`` (its CLI twin) on this environment, in the app's worker pool."""
        self.action_show_tab("overview")
        if not self.diagnosing:
            self.diagnosing = True
            self.query_one("#overview-body", Static).update(self.overview())
            self.run_doctor()

    @work(exclusive=True, group="doctor")
    async def run_doctor(self) -> None:
        try:
            pool = await self.app.get_pool()
            self.diagnosis = await diagnose(self.scenario, pool, getattr(self.app, "catalog", None))
        except Exception as exc:  # noqa: BLE001 - diagnose never raises for a bad scenario; the pool might
            self.notify(escape(visible(f"{type(exc).__name__}: {exc}")), title="awm env doctor", severity="error")
        finally:
            self.diagnosing = False
            if not self.left():
                self.query_one("#overview-body", Static).update(self.overview())

    # -- schema -------------------------------------------------------------------------------
    def fill_schema(self) -> None:
        tree = self.query_one("#schema-tree", Tree)
        tree.show_root = False
        tree.root.expand()
        tables_node = tree.root.add(f"Tables ({len(self.tables)})", expand=True)
        for table in self.tables:
            fks = {f.column: f for f in table.foreign_keys}
            node = tables_node.add(escape(visible(table.name)) + (" [red](DDL failed)[/red]" if table.error else ""),
                                   data=table.name)
            for c in table.columns:
                label = f"{escape(visible(c.name))} [dim]{escape(visible(c.type))}[/dim]" + (" [bold]PK[/bold]" if c.primary_key else "") \
                    + (" NOT NULL" if c.notnull else "")
                if c.name in fks:
                    label += escape(visible(f" → {fks[c.name].other_table}.{fks[c.name].other_column}"))
                node.add_leaf(label, data=table.name)
            for index in table.indexes:
                node.add_leaf(f"[dim]{escape(visible(index))}[/dim]", data=table.name)
        graph = tree.root.add("Foreign-key graph (referenced table → tables that reference it)", expand=True)
        children: dict[str, list[str]] = {t.name: [] for t in self.tables}
        referencing = set()
        for t in self.tables:
            for fk in t.foreign_keys:
                if fk.other_table in children and t.name not in children[fk.other_table] and fk.other_table != t.name:
                    children[fk.other_table].append(t.name)
                    referencing.add(t.name)

        def add(node, name: str, path: tuple[str, ...]) -> None:
            branch = node.add(escape(visible(name)), data=name, expand=len(path) < 2)
            for child in children.get(name, []):
                if child in path:
                    branch.add_leaf(f"{escape(visible(child))} [dim](cycle)[/dim]", data=child)
                else:
                    add(branch, child, path + (child,))

        for t in self.tables:
            if t.name not in referencing:
                add(graph, t.name, (t.name,))
        if self.tables:
            self.show_table_ddl(self.tables[0].name)

    def _show(self, selector: str, parts: list) -> None:
        """A detail pane's parts, fitted to the pane's width (``fit_to_pane``); shown again when it changes."""
        static = self.query_one(selector, Static)
        width = self._pane_width(static)
        content, wide = fit_to_pane(parts, width or max(20, self.app.size.width * 3 // 5))
        self._shown[selector] = (parts, width)
        static.styles.width = wide
        static.update(content)
        if not width:  # not laid out yet (a tab not shown so far): fitted again once it is
            self.call_after_refresh(self._refit)

    @staticmethod
    def _pane_width(static: Static) -> int:
        pane = static.parent
        if pane is None or not pane.size.width:
            return 0
        return max(20, pane.container_size.width - pane.gutter.width)  # inside its padding and scrollbar

    def on_resize(self, event) -> None:
        self.call_after_refresh(self._refit)

    def on_tabbed_content_tab_activated(self, event) -> None:
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        for selector, (parts, width) in list(self._shown.items()):
            now = self._pane_width(self.query_one(selector, Static))
            if now and now != width:
                self._show(selector, parts)

    def show_table_ddl(self, name: str) -> None:
        table = next((t for t in self.tables if t.name == name), None)
        if table is None:
            return
        parts: list = [shown(table.name, style="bold"), code_block(table.ddl, "sql")]
        if table.indexes:
            parts += [Text("Indexes", style="bold"), code_block("\n".join(table.indexes), "sql")]
        refs = [t.name for t in self.tables if any(f.other_table == name for f in t.foreign_keys)]
        if refs:
            parts.append(shown(f"Referenced by: {', '.join(refs)}"))
        if table.error:
            parts.append(shown(f"DDL error: {table.error}", style="red"))
        self._show("#schema-detail", parts)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data:
            self.show_table_ddl(event.node.data)

    # -- data ---------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="db")
    def prepare_database(self) -> None:
        try:
            path, report = TemplateCache().get(self.scenario)
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self.app.call_from_thread(self._data_status, shown(f"cannot build the database: {exc}", style="red"))
            return
        self.app.call_from_thread(self._database_ready, path, report)

    LATE_FILLED = ("overview-body", "data-tables", "data-status", "data-grid")  # what callbacks and workers fill

    def left(self) -> bool:
        """The screen was left, or is being left (``screen_left``), or what they fill is gone: a callback or worker
        that ends now fills nothing."""
        return screen_left(self) or not all(self.query(f"#{part}") for part in self.LATE_FILLED)

    def _data_status(self, text: str | Text) -> None:
        if not self.left():
            self.query_one("#data-status", Static).update(text)

    def _database_ready(self, path, report) -> None:
        if self.left():  # the build finished after the screen was left, or as it goes: nothing to fill, nothing to read
            return
        self.db_path = path
        options = self.query_one("#data-tables", OptionList)
        options.clear_options()
        options.add_options([Option(shown(f"{name} ({count})"), id=name) for name, count in report.row_counts.items()])
        failed = f" · {report.inserts_failed} INSERTs failed at build" if report.inserts_failed else ""
        self.build_note = failed
        self._data_status(f"initial database built{failed}; pick a table (n/p pages), or type SQL below")
        if report.row_counts:
            self.data_table = next(iter(report.row_counts))
            # the example names a table this environment has (the table names are the environment's text)
            self.query_one("#sql", Input).placeholder = visible(
                f"read-only SQL, e.g. SELECT * FROM {self.data_table} LIMIT 10 (enter runs)")
            self.load_page()

    async def _in_thread(self, deadline: Deadline, call, *args, **kwargs):
        """``call`` (an ``sql_box`` function) in a thread under ``deadline``; a cancelled worker (a new query, the
        screen or the app closing) stops the statement at once instead of waiting for it."""
        try:
            return await asyncio.to_thread(call, *args, deadline=deadline, **kwargs)
        except asyncio.CancelledError:
            deadline.cancel()
            raise

    @work(exclusive=True, group="data")
    async def load_page(self) -> None:
        if self.db_path is None or self.data_table is None:
            return
        table, page, seconds = self.data_table, self.page, SQL_SECONDS
        deadline = Deadline(seconds)
        total = await self._in_thread(deadline, sql_box.count_rows, self.db_path, table, seconds=seconds)
        result = await self._in_thread(deadline, sql_box.table_page, self.db_path, table, page, PAGE, seconds=seconds)
        if self.left():  # left meanwhile (a worker started as the screen went is not cancelled with it)
            return
        if result.error is not None:
            self._data_status(Text(f"{visible(table)}: {result.error}", style="red"))
            return
        total = total if total is not None else page * PAGE + len(result.rows)
        self.total = total
        self._show_rows(result)
        last = max(0, (total - 1) // PAGE)
        self._data_status(Text(f"{visible(table)}: rows {page * PAGE + 1 if total else 0}–"
                               f"{min(total, (page + 1) * PAGE)} of {total} · page {page + 1}/{last + 1}"
                               f"{self.build_note}"))

    def _show_rows(self, result: sql_box.BoxResult) -> None:
        """The result's display strings (cut, blobs by length, control characters visible: the engine's), escaped:
        DataTable reads a string cell as markup."""
        grid = self.query_one("#data-grid", DataTable)
        grid.clear(columns=True)
        grid.add_columns(*[escape(name) for name in result.columns])
        grid.add_rows([tuple(escape(cell) for cell in row) for row in result.rows])

    @work(exclusive=True, group="data")
    async def run_sql(self, sql: str) -> None:
        if self.db_path is None:
            return
        seconds = SQL_SECONDS
        deadline = Deadline(seconds)
        self._data_status(f"running… (a new query cancels this one; stopped after {seconds:g}s)")
        # read-only, the deadline over preparing, executing and fetching, every value and the result size capped
        result = await self._in_thread(deadline, sql_box.run_query, self.db_path, sql, seconds=seconds)
        if self.left():
            return
        if result.error is None and deadline.expired():  # the rendering is inside the deadline too
            result.error = f"stopped after {seconds:g}s (the SQL box's deadline)"
        if result.error is not None:
            self._data_status(Text(result.error, style="red"))
            return
        self._show_rows(result)
        self._data_status(Text(result.status()))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "sql" and event.value.strip():
            self.run_sql(event.value)

    def action_next_page(self) -> None:
        if self.data_table and (self.page + 1) * PAGE < self.total:
            self.page += 1
            self.load_page()

    def action_prev_page(self) -> None:
        if self.data_table and self.page > 0:
            self.page -= 1
            self.load_page()

    def action_focus_sql(self) -> None:
        box = self.query_one("#sql", Input)
        if box.has_focus:  # the binding is read before the box: its own ctrl+e (End)
            box.action_end()
            return
        self.action_show_tab("data")
        self.set_focus(box, scroll_visible=False)  # now: the keys after ctrl+e are the box's

    # -- tools and tasks ------------------------------------------------------------------------
    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        list_id = event.option_list.id
        if list_id == "tool-list":
            self.show_tool(int(event.option.id))
        elif list_id == "task-list":
            self.show_task(int(event.option.id))
        elif list_id == "data-tables" and event.option.id != self.data_table:
            self.data_table = event.option.id
            self.page = 0
            self.load_page()

    def show_tool(self, index: int) -> None:
        self.current_tool = index
        tool = self.tools[index]
        # the tool's name, path, summary, description and parameters are the environment's text
        parts: list = [shown(tool.name, style="bold green"), shown(f"{tool.method} {tool.path}", style="cyan")]
        if tool.summary:
            parts.append(shown(tool.summary))
        if tool.description:
            parts += [Text(""), shown(tool.description)]
        if tool.shadowed_by:
            parts.append(shown(f"Same method and path as {tool.shadowed_by}: over MCP only that name is listed, "
                               "and calls reach this handler.", style="yellow"))
        if tool.name in self.schema_errors:
            parts.append(shown(schema_problem_note(self.schema_errors[tool.name]), style="yellow"))
        parts += [Text(""), parameters_view(tool.params, narrow=self.app.size.width < 100)]
        if self.show_source:
            parts += [Text(""), Text("Handler source", style="bold"),
                      code_block(codeinfo.handler_source(self.scenario.code or "", tool), "python")]
        else:
            parts += [Text(""), Text("ctrl+s shows the handler's source", style="dim")]
        self._show("#tool-detail", parts)

    def action_toggle_source(self) -> None:
        self.show_source = not self.show_source
        if self.tools:
            self.action_show_tab("tools")
            self.show_tool(self.current_tool)

    def show_task(self, index: int) -> None:
        s = self.scenario
        parts: list = [Text(f"Task {index}", style="bold"), shown(s.tasks[index]), Text("")]
        # a verifier's mode is the function its code defines, whichever file holds it (real pipeline output keeps
        # code-mode verifiers in gen_verifier.jsonl)
        for mode, title in (("sql", "Verifier — sql mode (verify_task → judge)"),
                            ("code", "Verifier — code mode (verify_task_completion → complete / others)")):
            verifier = s.verifier(index, mode)
            parts.append(Text(title, style="bold"))
            if verifier is None or not verifier.has_code:
                parts += [Text("none", style="dim"), Text("")]
                continue
            if verifier.source is not None:
                parts.append(shown(f"{verifier.function_name} · {Path(verifier.source.path).name} line "
                                   f"{verifier.source.line}", style="dim"))
            meta = verifier.meta
            for key in ("reasoning", "success_criteria", "failure_criteria"):
                if meta.get(key):
                    parts.append(shown(f"{key.replace('_', ' ')}: {meta[key]}", style="dim"))
            parts += [code_block(verifier.code, "python"), Text("")]
        parts.append(Text("ctrl+g plays this task yourself · ctrl+l watches a model do it", style="dim"))
        solution = s.solution(index)
        if solution:
            parts += [Text("Reference solution", style="bold"),
                      code_block(json.dumps({"calls": solution["calls"], "final_answer": solution["final_answer"]},
                                            indent=2, ensure_ascii=False), "json")]
        self._show("#task-detail", parts)

    # -- navigation -----------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        """From any pane: focus moves to the tab's main widget first (focus left behind in the hidden tab would
        move to its next widget, and TabbedContent would switch straight back to that tab)."""
        target = self.query_one(TAB_FOCUS[tab])
        if isinstance(target, OptionList) and target.highlighted is None and target.option_count:
            target.highlighted = 0  # the item shown is the highlighted one: the first down moves to the second
        self.set_focus(target, scroll_visible=False)
        self.query_one(TabbedContent).active = tab

    def selected_task(self) -> int:
        highlighted = self.query_one("#task-list", OptionList).highlighted
        return highlighted or 0

    def action_play_task(self) -> None:
        from .play import PlayScreen

        if self.scenario.tasks and self.scenario.code:
            self.app.push_screen(PlayScreen(self.scenario, self.selected_task()))

    def action_rollout_task(self) -> None:
        from .rollout import RolloutScreen

        if self.scenario.tasks and self.scenario.code:
            self.app.push_screen(RolloutScreen(self.scenario, self.selected_task()))

    def action_back(self) -> None:
        if isinstance(self.focused, Input):  # escape in the SQL box leaves the box, not the screen
            self.set_focus(self.query_one("#data-grid", DataTable))
            return
        self.app.pop_screen()
