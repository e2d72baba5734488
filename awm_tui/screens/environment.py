"""One environment, in tabs: Overview, Schema, Data, Tools, Tasks."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiosqlite
from rich.console import Group
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table as RichTable
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, OptionList, Static, TabbedContent, TabPane, Tree
from textual.widgets.option_list import Option

from awm_engine.data import codeinfo
from awm_engine.data.catalog import Scenario
from awm_engine.data.sql_guard import Deadline, quote_ident, read_only
from awm_engine.db.templates import TemplateCache
from awm_engine.runtime.health import cached_health, invalid_schemas
from awm_engine.runtime.openapi_tools import schema_problem_note
from awm_engine.verify.doctor import Diagnosis, diagnose, quick_diagnosis

from ..actions import bindings
from ..widgets.problems import problems_view

PAGE = 50
SQL_LIMIT = 500
SQL_SECONDS = 10.0
THEME = "ansi_dark"
TAB_FOCUS = {"overview": "#overview-scroll", "schema": "#schema-tree", "data": "#data-tables", "tools": "#tool-list",
             "tasks": "#task-list"}  # the widget each tab's number key focuses


def code_block(code: str, lexer: str) -> Syntax:
    return Syntax(code, lexer, theme=THEME, line_numbers=False, word_wrap=True)  # never cut at the pane edge


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
                        yield Input(placeholder="read-only SQL, e.g. SELECT * FROM users WHERE id = 1 (enter runs)",
                                    id="sql")
            with TabPane("4 Tools", id="tools"):
                with Horizontal():
                    yield OptionList(id="tool-list")
                    yield VerticalScroll(Static(id="tool-detail"), id="tool-right")
            with TabPane("5 Tasks", id="tasks"):
                with Horizontal():
                    yield OptionList(id="task-list")
                    yield VerticalScroll(Static(id="task-detail"), id="task-right")
        yield Footer()

    def on_mount(self) -> None:
        if not getattr(self.app, "cursor_blink", True):
            for field in self.query(Input):
                field.cursor_blink = False
        self.title = self.scenario.name
        self.sub_title = self.scenario.key
        self.query_one("#overview-body", Static).update(self.overview())
        self.fill_schema()
        self.query_one("#tool-list", OptionList).add_options(
            [Option(Text(f"{t.method:6} {t.name}" + (" ⚠" if t.name in self.schema_errors else "")), id=str(i))
             for i, t in enumerate(self.tools)])
        self.query_one("#task-list", OptionList).add_options(
            [Option(Text(f"{i}. {text[:90]}" + ("…" if len(text) > 90 else "")), id=str(i))
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
            facts.add_row(label, escape(str(value)))
        diagnosis = self.diagnosis or quick_diagnosis(s, getattr(self.app, "catalog", None))
        return Group(Text(s.name, style="bold"), Text(""), Text(s.description or "(no description)"), Text(""), facts,
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
            self.notify(f"{type(exc).__name__}: {exc}", title="awm env doctor", severity="error")
        finally:
            self.diagnosing = False
            self.query_one("#overview-body", Static).update(self.overview())

    # -- schema -------------------------------------------------------------------------------
    def fill_schema(self) -> None:
        tree = self.query_one("#schema-tree", Tree)
        tree.show_root = False
        tree.root.expand()
        tables_node = tree.root.add(f"Tables ({len(self.tables)})", expand=True)
        for table in self.tables:
            fks = {f.column: f for f in table.foreign_keys}
            node = tables_node.add(escape(table.name) + (" [red](DDL failed)[/red]" if table.error else ""),
                                   data=table.name)
            for c in table.columns:
                label = f"{escape(c.name)} [dim]{escape(c.type)}[/dim]" + (" [bold]PK[/bold]" if c.primary_key else "") \
                    + (" NOT NULL" if c.notnull else "")
                if c.name in fks:
                    label += escape(f" → {fks[c.name].other_table}.{fks[c.name].other_column}")
                node.add_leaf(label, data=table.name)
            for index in table.indexes:
                node.add_leaf(f"[dim]{escape(index)}[/dim]", data=table.name)
        graph = tree.root.add("Foreign-key graph (referenced table → tables that reference it)", expand=True)
        children: dict[str, list[str]] = {t.name: [] for t in self.tables}
        referencing = set()
        for t in self.tables:
            for fk in t.foreign_keys:
                if fk.other_table in children and t.name not in children[fk.other_table] and fk.other_table != t.name:
                    children[fk.other_table].append(t.name)
                    referencing.add(t.name)

        def add(node, name: str, path: tuple[str, ...]) -> None:
            branch = node.add(escape(name), data=name, expand=len(path) < 2)
            for child in children.get(name, []):
                if child in path:
                    branch.add_leaf(f"{escape(child)} [dim](cycle)[/dim]", data=child)
                else:
                    add(branch, child, path + (child,))

        for t in self.tables:
            if t.name not in referencing:
                add(graph, t.name, (t.name,))
        if self.tables:
            self.show_table_ddl(self.tables[0].name)

    def show_table_ddl(self, name: str) -> None:
        table = next((t for t in self.tables if t.name == name), None)
        if table is None:
            return
        parts: list = [Text(table.name, style="bold"), code_block(table.ddl, "sql")]
        if table.indexes:
            parts += [Text("Indexes", style="bold"), code_block("\n".join(table.indexes), "sql")]
        refs = [t.name for t in self.tables if any(f.other_table == name for f in t.foreign_keys)]
        if refs:
            parts.append(Text(f"Referenced by: {', '.join(refs)}"))
        if table.error:
            parts.append(Text(f"DDL error: {table.error}", style="red"))
        self.query_one("#schema-detail", Static).update(Group(*parts))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data:
            self.show_table_ddl(event.node.data)

    # -- data ---------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="db")
    def prepare_database(self) -> None:
        try:
            path, report = TemplateCache().get(self.scenario)
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self.app.call_from_thread(self._data_status, f"[red]cannot build the database: {escape(str(exc))}[/red]")
            return
        self.app.call_from_thread(self._database_ready, path, report)

    def _data_status(self, text: str) -> None:
        self.query_one("#data-status", Static).update(text)

    def _database_ready(self, path, report) -> None:
        self.db_path = path
        options = self.query_one("#data-tables", OptionList)
        options.clear_options()
        options.add_options([Option(Text(f"{name} ({count})"), id=name) for name, count in report.row_counts.items()])
        failed = f" · {report.inserts_failed} INSERTs failed at build" if report.inserts_failed else ""
        self.build_note = failed
        self._data_status(f"initial database built{failed}; pick a table (n/p pages), or type SQL below")
        if report.row_counts:
            self.data_table = next(iter(report.row_counts))
            self.load_page()

    def _uri(self) -> str:
        return f"file:{self.db_path}?mode=ro"

    @work(exclusive=True, group="data")
    async def load_page(self) -> None:
        if self.db_path is None or self.data_table is None:
            return
        async with aiosqlite.connect(self._uri(), uri=True) as db:
            total = (await (await db.execute(f'SELECT COUNT(*) FROM {quote_ident(self.data_table)}')).fetchone())[0]
            cursor = await db.execute(f'SELECT * FROM {quote_ident(self.data_table)} LIMIT {PAGE} OFFSET {self.page * PAGE}')
            rows = await cursor.fetchall()
            names = [d[0] for d in cursor.description]
        self.total = total
        self._show_rows(names, rows)
        last = max(0, (total - 1) // PAGE)
        self._data_status(f"{self.data_table}: rows {self.page * PAGE + 1 if total else 0}–"
                          f"{min(total, (self.page + 1) * PAGE)} of {total} · page {self.page + 1}/{last + 1}"
                          f"{self.build_note}")

    def _show_rows(self, names, rows) -> None:
        grid = self.query_one("#data-grid", DataTable)
        grid.clear(columns=True)
        grid.add_columns(*names)
        grid.add_rows([tuple("NULL" if v is None else str(v)[:80] for v in row) for row in rows])

    @work(exclusive=True, group="data")
    async def run_sql(self, sql: str) -> None:
        if self.db_path is None:
            return
        deadline = Deadline(SQL_SECONDS)
        self._data_status(f"running… (a new query cancels this one; stopped after {SQL_SECONDS:.0f}s)")
        try:
            async with aiosqlite.connect(self._uri(), uri=True) as db:
                await db.set_authorizer(read_only)  # no writes, no ATTACH, no VACUUM INTO
                await db.set_progress_handler(deadline, 10_000)  # a runaway query stops, quitting always works
                try:
                    cursor = await db.execute(sql)
                    rows = await cursor.fetchmany(SQL_LIMIT)
                except asyncio.CancelledError:
                    deadline.cancel()
                    raise
                names = [d[0] for d in cursor.description or []]
        except Exception as exc:  # noqa: BLE001 - a bad query is the user's to fix
            why = f"stopped after {SQL_SECONDS:.0f}s" if deadline.expired() else f"{type(exc).__name__}: {exc}"
            self._data_status(f"[red]{escape(why)}[/red]")
            return
        self._show_rows(names, rows)
        more = " (first 500)" if len(rows) == SQL_LIMIT else ""
        self._data_status(f"query: {len(rows)} rows{more} — read-only")

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
        self.action_show_tab("data")
        self.query_one("#sql", Input).focus()

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
        parts: list = [Text(tool.name, style="bold green"), Text(f"{tool.method} {tool.path}", style="cyan")]
        if tool.summary:
            parts.append(Text(tool.summary))
        if tool.description:
            parts += [Text(""), Text(tool.description)]
        if tool.shadowed_by:
            parts.append(Text(f"Same method and path as {tool.shadowed_by}: over MCP only that name is listed, "
                              "and calls reach this handler.", style="yellow"))
        if tool.name in self.schema_errors:
            parts.append(Text(schema_problem_note(self.schema_errors[tool.name]), style="yellow"))
        params = RichTable(title="Parameters", title_justify="left", expand=True)
        for col in ("name", "in", "type", "required", "description"):
            params.add_column(col)
        for p in tool.params:
            params.add_row(Text(p.name), p.location, Text(p.type), "yes" if p.required else "", Text(p.description))
        parts += [Text(""), params if tool.params else Text("No parameters.")]
        if self.show_source:
            parts += [Text(""), Text("Handler source", style="bold"),
                      code_block(codeinfo.handler_source(self.scenario.code or "", tool), "python")]
        else:
            parts += [Text(""), Text("ctrl+s shows the handler's source", style="dim")]
        self.query_one("#tool-detail", Static).update(Group(*parts))

    def action_toggle_source(self) -> None:
        self.show_source = not self.show_source
        if self.tools:
            self.action_show_tab("tools")
            self.show_tool(self.current_tool)

    def show_task(self, index: int) -> None:
        s = self.scenario
        parts: list = [Text(f"Task {index}", style="bold"), Text(s.tasks[index]), Text("")]
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
                parts.append(Text(f"{verifier.function_name} · {Path(verifier.source.path).name} line "
                                  f"{verifier.source.line}", style="dim"))
            meta = verifier.meta
            for key in ("reasoning", "success_criteria", "failure_criteria"):
                if meta.get(key):
                    parts.append(Text(f"{key.replace('_', ' ')}: {meta[key]}", style="dim"))
            parts += [code_block(verifier.code, "python"), Text("")]
        parts.append(Text("ctrl+g plays this task yourself · ctrl+l watches a model do it", style="dim"))
        solution = s.solution(index)
        if solution:
            parts += [Text("Reference solution", style="bold"),
                      code_block(json.dumps({"calls": solution["calls"], "final_answer": solution["final_answer"]},
                                            indent=2, ensure_ascii=False), "json")]
        self.query_one("#task-detail", Static).update(Group(*parts))

    # -- navigation -----------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        """From any pane: focus moves to the tab's main widget first (focus left behind in the hidden tab would
        move to its next widget, and TabbedContent would switch straight back to that tab)."""
        self.set_focus(self.query_one(TAB_FOCUS[tab]), scroll_visible=False)
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
