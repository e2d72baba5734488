"""The generation run view (``awm-tui --gen DIR``; CLI twin ``awm gen status DIR``): scenarios × the six
per-scenario stages with state and attempts, tokens and the Problems summary; the highlighted scenario's attempts,
errors (whole) and token use below; tokens and cost per stage at the bottom. It follows a run that is going (the
files are read again only when one of them changed) and opens a finished scenario in the environment screen."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from awm_engine.data.catalog import Catalog
from awm_engine.gen.records import SCENARIO_STAGES, Usage
from awm_engine.gen.status import GenStatus, ScenarioStatus, load_status
from awm_engine.gen.store import run_signature

from ..actions import bindings
from ..widgets.footer import KeyFooter
from .leaving import screen_left
from .environment import EnvironmentScreen, _shown_path

STATE_STYLES = {"done": "green", "kept": "yellow", "failed": "bold red", "running": "cyan", "pending": "dim"}
COLUMNS = ("scenario", *SCENARIO_STAGES, "tokens", "problems")


class GenRunView:
    """What the screen knows of one run; ``refresh`` reads the files again only when one of them changed."""

    def __init__(self, out: Path):
        self.out = out
        self.signature: tuple | None = None
        self.status: GenStatus | None = None
        self.error: str | None = None

    def refresh(self) -> bool:
        signature = run_signature(self.out)
        if signature == self.signature:
            return False
        self.signature = signature
        try:
            status = load_status(self.out)
        except FileNotFoundError:
            self.error = f"no generation run at {_shown_path(self.out)} yet (awm gen all … --out DIR writes one)"
            self.status = None
            return True
        except Exception as exc:  # noqa: BLE001 - a malformed record: said (and read again once the files change)
            self.error = f"cannot read the run's records: {type(exc).__name__}: {exc}"
            return True
        self.status, self.error = status, None
        return True

    def cost(self, usage: Usage) -> float | None:
        try:
            return self.status.cost(usage) if self.status else None
        except (TypeError, ValueError):  # a price in config.json that is not a number
            return None


def state_cell(state: str, attempts: int) -> Text:
    return Text(state + (f" ×{attempts}" if attempts > 1 else ""), style=STATE_STYLES.get(state, ""))


def problems_cell(s: ScenarioStatus) -> Text:
    if s.error:
        return Text("internal error", style="bold red")
    if s.problems is None:
        return Text("—", style="dim")
    return Text(s.problems_summary or "clean", style="" if s.problems_summary else "green")


def missing_stage(s: ScenarioStatus) -> str | None:
    """Why a scenario cannot be opened yet (the engine's answer), with how to go on when a stage failed."""
    why = s.missing()
    return None if why is None else why + (" (awm gen all --resume retries it)" if why.endswith("failed") else "")


def tokens(usage: Usage) -> str:
    return f"{usage.prompt_tokens + usage.completion_tokens:,}"


class GenRunScreen(Screen):
    SCOPE = "gen"
    BINDINGS = bindings("gen")
    AUTO_FOCUS = "#gen-table"
    DEFAULT_CSS = """
    GenRunScreen #gen-head { height: auto; padding: 0 1; }
    GenRunScreen #gen-error { height: auto; padding: 0 1; color: $error; }
    GenRunScreen #gen-error.hidden { display: none; }
    GenRunScreen #gen-table { height: auto; min-height: 4; max-height: 50%; border: round $primary-background; }
    GenRunScreen #gen-detail { height: 1fr; border: round $primary-background; padding: 0 1; }
    GenRunScreen #gen-usage { height: auto; padding: 0 1; }
    """

    def __init__(self, out: Path | str):
        super().__init__()
        self.out = Path(out)
        self.view = GenRunView(self.out)
        self.keys: list[str] = []
        self.widths: list[int] = []
        self._reading = False
        self._saved_catalog: tuple[Catalog | None] | None = None  # the app's catalog while a run's scenario is open

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("", id="gen-head")
            yield Static("", id="gen-error", classes="hidden")
            yield DataTable(id="gen-table", cursor_type="row", zebra_stripes=True)
            yield VerticalScroll(Static("", id="gen-detail-body"), id="gen-detail")
            yield Static("", id="gen-usage")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = "Generation run"
        self.sub_title = _shown_path(self.out)
        self.poll()
        self.set_interval(1.0, self.poll)

    # -- live refresh -------------------------------------------------------------------------------------
    def poll(self) -> None:
        if not self._reading:
            self._reading = True
            self.refresh_run()

    @work(thread=True, group="gen-refresh")
    def refresh_run(self) -> None:
        changed = True
        try:
            changed = self.view.refresh()
        finally:
            self.app.call_from_thread(self._show, changed)

    def action_reload(self) -> None:
        self.view.signature = None
        self.poll()

    def _show(self, changed: bool) -> None:
        self._reading = False
        if not changed or screen_left(self):
            return
        view, status = self.view, self.view.status
        error = self.query_one("#gen-error", Static)
        error.update(Text(view.error or ""))
        error.set_class(not view.error, "hidden")
        if status is None:
            self.query_one("#gen-head", Static).update(self.head(None))
            self._fill([])
            self.show_detail()
            self.query_one("#gen-usage", Static).update("")
            return
        self.query_one("#gen-head", Static).update(self.head(status))
        self._fill(status.scenarios)
        self.show_detail()
        self.query_one("#gen-usage", Static).update(self.usage_line(status))

    def head(self, status: GenStatus | None) -> Text:
        shown = _shown_path(self.out)
        text = Text.assemble((Path(shown).name or shown, "bold"))
        if status is not None:
            model = status.config.get("model")
            if model:
                text.append(f"  ·  model {model}")
            states = {"finished": sum(s.finished for s in status.scenarios),
                      "failed": sum(any(c.state == "failed" for c in s.cells.values()) for s in status.scenarios)}
            states["in progress"] = len(status.scenarios) - states["finished"] - states["failed"]
            n = len(status.scenarios)
            text.append(f"  ·  {n} scenario{'s' if n != 1 else ''}: ")
            text.append(", ".join(f"{n} {name}" for name, n in states.items() if n) or "none yet")
            if status.scenario_batches:
                text.append(f"  ·  scenario batches {status.scenario_batches}")
            if status.warning:
                text.append(f"\n{status.warning}", "yellow")
        text.append("\nCLI twin: ", "dim")
        text.append(f"awm gen status {shown}", "cyan")
        return text

    def _fill(self, scenarios: list[ScenarioStatus]) -> None:
        table = self.query_one("#gen-table", DataTable)
        rows = {s.key: [Text(s.name), *(state_cell(s.cells[st].state, s.cells[st].attempts) for st in SCENARIO_STAGES),
                        Text(tokens(s.usage), justify="right"), problems_cell(s)] for s in scenarios}
        keys = list(rows)
        # widths set here, not measured by the table (its header would keep the widths of the rows before)
        widths = [max([len(column)] + [row[i].cell_len for row in rows.values()]) for i, column in enumerate(COLUMNS)]
        widths[0] = min(widths[0], 40)  # a very long name is cut; the detail pane has it whole
        if keys == self.keys and widths == self.widths:
            for key in keys:
                for column, value in zip(COLUMNS, rows[key]):
                    table.update_cell(key, column, value)
            return
        highlighted = self.highlighted_key()
        table.clear(columns=True)
        for column, width in zip(COLUMNS, widths):
            table.add_column(column, width=width, key=column)
        for key, row in rows.items():
            table.add_row(*row, key=key)
        self.keys, self.widths = keys, widths
        if highlighted in self.keys:
            table.move_cursor(row=self.keys.index(highlighted))

    def usage_line(self, status: GenStatus) -> Text:
        total = Usage()
        parts = []
        for stage, usage in status.stage_usage.items():
            total.add(usage)
            if usage.requests:
                cost = self.view.cost(usage)
                parts.append(f"{stage} {tokens(usage)}" + ("" if cost is None else f" ${cost:.4f}"))
        cost = self.view.cost(total)
        text = Text.assemble(("tokens ", "bold"), f"{tokens(total)} in {total.requests} requests",
                             "" if cost is None else f" (${cost:.4f})", ("  per stage: ", "bold"),
                             " · ".join(parts) or "none yet")
        return text

    # -- the highlighted scenario -------------------------------------------------------------------------
    def highlighted_key(self) -> str | None:
        table = self.query_one("#gen-table", DataTable)
        if not self.keys or table.cursor_row is None or not 0 <= table.cursor_row < len(self.keys):
            return None
        return self.keys[table.cursor_row]

    def highlighted(self) -> ScenarioStatus | None:
        key, status = self.highlighted_key(), self.view.status
        if key is None or status is None:
            return None
        return next((s for s in status.scenarios if s.key == key), None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail()

    def show_detail(self) -> None:
        body = self.query_one("#gen-detail-body", Static)
        s = self.highlighted()
        if s is None:
            body.update(Text("no scenarios yet" if self.view.status is not None else "", style="dim"))
            return
        body.update(self.detail(s))

    def detail(self, s: ScenarioStatus) -> Group:
        """The scenario's stages, each with its attempts (tokens, seconds, every error whole, indented under it)
        and the last error of a stage that failed or kept a failing attempt."""
        parts: list[Any] = []
        text = Text.assemble((s.name, "bold"), f"  ({s.key})  ")
        parts.append(text)
        why = missing_stage(s)
        text.append("finished — enter opens it" if why is None else f"not finished: {why}",
                    "green" if why is None else "yellow")
        cost = self.view.cost(s.usage)
        text.append(f"\ntokens {s.usage.prompt_tokens:,} prompt + {s.usage.completion_tokens:,} completion in "
                    f"{s.usage.requests} requests" + ("" if cost is None else f" (${cost:.4f})"))
        if s.problems is not None:
            text.append(f"\nproblems (awm env doctor): {s.problems_summary or 'none'}")
        if s.error:
            text.append(f"\ninternal error: {s.error}", "bold red")
        for stage in SCENARIO_STAGES:
            cell = s.cells[stage]
            attempts = cell.history
            text = Text.assemble("\n", (stage, "bold"))
            parts.append(text)
            text.append(f"  {cell.state}", STATE_STYLES.get(cell.state, ""))
            text.append(f"  ·  {cell.attempts} attempt{'s' if cell.attempts != 1 else ''}")
            used = sum(a.prompt_tokens + a.completion_tokens for a in attempts)
            if used:
                text.append(f"  ·  {used:,} tokens")
            for a in attempts:
                line = Text(f"  {'task ' + str(a.task) + ' ' if a.task is not None else ''}#{a.number} ")
                line.append("ok" if a.ok else "failed", "green" if a.ok else "red")
                line.append(f"  {a.prompt_tokens:,} + {a.completion_tokens:,} tokens", "dim")
                if a.seconds is not None:
                    line.append(f"  {a.seconds:.1f} s", "dim")
                parts.append(line)
                parts.extend(Padding(Text(error), (0, 0, 0, 6)) for error in a.errors)
            last = cell.last_error
            if last and cell.state in ("failed", "kept"):
                parts.append(Text("  last error:", "bold red" if cell.state == "failed" else "bold yellow"))
                parts.append(Padding(Text(last), (0, 0, 0, 4)))
        return Group(*parts)

    def action_focus_detail(self) -> None:
        """Into the detail pane to scroll it (up/down, page up/down); pressed there, back to the table."""
        pane = self.query_one("#gen-detail", VerticalScroll)
        (self.query_one("#gen-table", DataTable) if self.focused is pane else pane).focus()

    # -- opening a finished scenario ------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_scenario()

    def action_open_scenario(self) -> None:
        s = self.highlighted()
        if s is None:
            self.notify("no scenario highlighted", title="generation run", severity="warning")
            return
        why = missing_stage(s)
        if why is not None:
            self.notify(f"{s.name} is not finished: {why}", title="generation run", severity="warning", markup=False)
            return
        self.open_environment(s.key, s.name)

    @work(thread=True, exclusive=True, group="gen-open")
    def open_environment(self, key: str, name: str) -> None:
        try:
            catalog = Catalog.load([self.out])
        except Exception as exc:  # noqa: BLE001 - a run the catalog cannot read is said, never a crash
            self.app.call_from_thread(self.notify, f"cannot load {_shown_path(self.out)}: {exc}",
                                      title="generation run", severity="error", markup=False)
            return
        if key not in catalog:
            errors = "; ".join(str(e) for e in catalog.errors[:3]) or "no row for it in the AWM files"
            self.app.call_from_thread(self.notify, f"{name} does not load: {errors}", title="generation run",
                                      severity="error", markup=False)
            return
        self.app.call_from_thread(self._push_environment, catalog, key)

    def _push_environment(self, catalog: Catalog, key: str) -> None:
        if not self.is_current:
            return
        # the environment screen and what it opens (play, rollouts, the doctor) read the app's catalog: the run's
        # while one of its scenarios is open, the app's own again when this screen is back on top
        if self._saved_catalog is None:
            self._saved_catalog = (self.app.catalog,)
        self.app.catalog = catalog
        self.app.push_screen(EnvironmentScreen(catalog.get(key)))

    def on_screen_resume(self) -> None:
        if self._saved_catalog is not None:
            self.app.catalog = self._saved_catalog[0]
            self._saved_catalog = None

    def action_back(self) -> None:
        self.app.pop_screen()
