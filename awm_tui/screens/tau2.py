"""τ²-bench's domains in the TUI (``awm-tui --tau2-data DIR``): catalog rows, the domain screen (overview with the
task version, policy and Problems list; database tables; first rows; agent and user tools; tasks with their
evaluation criteria), play (as the agent with the simulated user answering, as the user with a model as the
agent, or watch both models), replay of a τ² rollout (conversation, tool calls, database diff per step) and the
verdict (every reward component)."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Column as RichColumn
from rich.table import Table as RichTable
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Input, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from awm_engine.agent.endpoints import ConfigError, Endpoint, endpoint_names, load_config, resolve_endpoint
from awm_engine.agent.policies import AssistantTurn, HumanPolicy, LLMPolicy, NativeCall
from awm_engine.bench.tau2.data import DOMAINS, DatabaseMissing, Tau2Data
from awm_engine.bench.tau2.doctor import diagnose as diagnose_domain
from awm_engine.bench.tau2.doctor import quick_diagnosis
from awm_engine.bench.tau2.episode import DomainCatalog, DomainScenario
from awm_engine.bench.tau2.metrics import PASS_THRESHOLD
from awm_engine.bench.tau2.models import DB_MODELS, TelecomUserDB
from awm_engine.bench.tau2.run import Tau2Config, make_nl_judge, preflight, run_simulation, task_dir_name
from awm_engine.bench.tau2.store import collections_of
from awm_engine.data.catalog_rows import CatalogRow
from awm_engine.data.run_formats import EvalConfig, RunFormatError
from awm_engine.data.terminal import visible
from awm_engine.db.diff import diff_databases
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runs import read_metadata

from ..actions import bindings
from ..views.catalog_rows import ProblemCount, Row
from ..views.run_view import RunView
from ..widgets.diff_view import DiffView
from ..widgets.footer import KeyFooter
from ..widgets.problems import problems_view
from ..widgets.safe import shown
from ..widgets.transcript import Transcript
from .leaving import screen_left
from .replay import ReplayScreen

PREVIEW_ROWS = 20


# -- the catalog ----------------------------------------------------------------------------------------------

def tau2_rows(data: Tau2Data | None) -> list[Row]:
    """One catalog row per τ² domain (its base split)."""
    if data is None:
        return []
    rows = []
    for name in DOMAINS:
        scenario = DomainScenario(data, name)
        domain = scenario.domain_data
        problem = domain.db_problem() if domain.dir.is_dir() else f"no {name} directory in {data.root}"
        diagnosis = quick_diagnosis(scenario)  # the problems cell: awm env doctor's last count, else the static one
        issues = [str(i) for i in domain.issues] + ([problem] if problem else [])
        models = {"db": DB_MODELS[name], **({"user_db": TelecomUserDB} if name == "telecom" else {})}
        tables = sum(len(m.model_fields) for m in models.values())
        tools = len(scenario.tools()) + len(scenario.user_tools())
        row = CatalogRow(scenario.key, scenario.name, tables, tools, len(scenario.tasks), None, 0, 0,
                         len(scenario.tasks), str(data.root), tuple(issues), tools)
        rows.append(Row(row, "no database" if problem else "τ²-bench",
                        ProblemCount(len(diagnosis.problems), diagnosis.counts()["error"])))
    return rows


def endpoint_for(role: str) -> Endpoint | None:
    """The model playing ``role`` (agent | user) in the TUI: ``[tau2] <role>_endpoint`` of the awm config, else
    its first named endpoint, else OPENAI_BASE_URL with AWM_MODEL; None when there is none."""
    try:
        config = load_config()
        name = (config.get("tau2") or {}).get(f"{role}_endpoint") or next(iter(endpoint_names(config)), None)
        return resolve_endpoint(name, mode="native", config=config, temperature=0.0)
    except ConfigError:
        return None


# -- the verdict --------------------------------------------------------------------------------------------

def verdict_view(info: dict[str, Any] | None, termination: str | None = None) -> Group:
    """Every reward component of a simulation: the reward, the basis, DB check, assertions, actions,
    communicate checks, NL assertions, and what the replay noticed."""
    if not info:
        return Group(Text(f"no verdict: the simulation ended with {termination or 'an error'}", style="bold red"))
    reward = info.get("reward")
    style = "bold green" if reward == 1.0 else "bold yellow" if reward is not None else "bold white on red"
    parts: list[Any] = [Text.assemble(("reward ", "bold"), (str(reward), style), "  basis ",
                                      (", ".join(info.get("reward_basis") or []), "bold"))]
    breakdown = RichTable("component", "score", title="components", title_justify="left")
    for name, value in (info.get("reward_breakdown") or {}).items():
        breakdown.add_row(shown(name), Text(str(value), style="green" if value == 1.0 else "red"))
    for name in info.get("not_scored") or []:
        breakdown.add_row(shown(name), Text("not scored", style="yellow"))
    parts.append(breakdown)
    db = info.get("db_check")
    if db:
        parts.append(Text.assemble(("DB check: ", "bold"), ("match" if db.get("db_match") else "MISMATCH",
                                                            "green" if db.get("db_match") else "red"),
                                   f"  predicted {str(db.get('predicted_db_hash'))[:12]} · gold "
                                   f"{str(db.get('gold_db_hash'))[:12]}", style="dim" if not db else ""))
    for title, items, fmt in (
            ("environment assertions", info.get("env_assertions"),
             lambda a: (f"{a['env_assertion']['env_type']}.{a['env_assertion']['func_name']}"
                        f"({json.dumps(a['env_assertion']['arguments'])}) == {a['env_assertion']['assert_value']}"
                        + (f" — {a['error']}" if a.get("error") else ""), a.get("met"))),
            ("actions", info.get("action_checks"),
             lambda c: (f"{c['action']['requestor']}: {c['action']['name']}"
                        f"({json.dumps(c['action']['arguments'])[:120]})", c.get("action_match"))),
            ("communicate", info.get("communicate_checks"), lambda c: (repr(c["info"]), c.get("met"))),
            ("NL assertions", info.get("nl_assertions"), lambda n: (str(n.get("assertion")), n.get("met")))):
        if items:
            parts.append(Text(title, style="bold"))
            for item in items:
                text, met = fmt(item)
                parts.append(Text.assemble(("  ✓ " if met else "  ✗ ", "green" if met else "red"), text))
    notes = info.get("info") or {}
    for key in ("note", "nl_assertions"):
        if isinstance(notes.get(key), str):
            parts.append(Text(notes[key], style="dim"))
    if notes.get("gold_action_errors"):
        parts.append(Text(f"{len(notes['gold_action_errors'])} gold action(s) failed in the gold replay (ignored, as "
                          "τ² does)", style="dim"))
    if notes.get("replay_mismatches"):
        parts.append(Text(f"{len(notes['replay_mismatches'])} replayed call(s) answered differently than recorded",
                          style="yellow"))
    return Group(*parts)


class Tau2Verdict(Horizontal):
    """The verdict next to the database changes of the run."""

    DEFAULT_CSS = """
    Tau2Verdict #tau2-verdict-text { width: 1fr; padding: 0 1; border: round $primary-background; }
    Tau2Verdict DiffView { width: 1fr; padding: 0 1; border: round $primary-background; }
    """

    def compose(self) -> ComposeResult:
        yield VerticalScroll(Static(id="tau2-verdict-body"), id="tau2-verdict-text")
        yield DiffView(id="tau2-verdict-diff")

    def show(self, info: dict[str, Any] | None, termination: str | None, run_dir: Path | None) -> None:
        self.query_one("#tau2-verdict-body", Static).update(verdict_view(info, termination))
        diff = None
        if run_dir is not None and (run_dir / "initial.db").is_file() and (run_dir / "final.db").is_file():
            diff = diff_databases(run_dir / "initial.db", run_dir / "final.db")
        self.query_one(DiffView).show(diff, "Database changes (the run's final.db)", None)


# -- the domain screen ----------------------------------------------------------------------------------------

def data_preview(dbs: dict[str, Any], collections: list) -> Group:
    """The first rows of each of a domain's collections, one table each (the domain's keys and values: text, never
    read as markup)."""
    parts = []
    for c in collections:
        records = c.records(getattr(dbs[c.db_name], c.field))
        table = RichTable(*[RichColumn(header=shown(column)) for column in ["_key", *c.columns]],
                          title=shown(f"{c.table} — first {min(PREVIEW_ROWS, len(records))} of {len(records)}"),
                          title_justify="left")
        for key, record in records[:PREVIEW_ROWS]:
            table.add_row(shown(key), *[shown(("NULL" if v is None else str(v))[:40]) for v in c.row(record)])
        parts.append(table)
    return Group(*parts)


TAU2_TAB_FOCUS = {"overview": "#overview-scroll", "schema": "#tau2-table-list", "data": "#data-scroll",
                  "tools": "#tau2-tool-list", "tasks": "#tau2-task-list"}  # the widget each tab's number key focuses


def cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters, ending in … when it is longer (an order id cut silently read as another)."""
    return text if len(text) <= width else text[:width - 1] + "…"


class Tau2Screen(Screen):
    """One τ² domain, in the environment screen's tabs (keys 1–5, ctrl+g play as the agent, ctrl+l watch a model,
    ctrl+u play as the user)."""

    SCOPE = "environment"
    BINDINGS = bindings("environment") + bindings("tau2")
    DEFAULT_CSS = """
    Tau2Screen #tau2-tabs { height: 1fr; }
    Tau2Screen #tau2-table-list, Tau2Screen #tau2-tool-list { width: 40; }
    Tau2Screen #tau2-task-list { width: 60; }
    Tau2Screen .tau2-right { padding: 0 1; }
    """

    def __init__(self, scenario: DomainScenario):
        super().__init__()
        self.scenario = scenario
        self.domain = scenario.domain_data
        self.tools = [("agent", t) for t in scenario.tools()] + [("user", t) for t in scenario.user_tools()]
        self.databases: dict[str, Any] | None = None
        self.diagnosis = None  # from ctrl+d (awm env doctor); else the cached or static one
        self.quick = None  # the cached or static one (``load_databases``)
        self.db_problem: str | None = None  # why the database does not load ("": it does; None: not checked yet)
        self.diagnosing = False

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="tau2-tabs", initial="overview"):
            with TabPane("1 Overview", id="overview"):
                yield VerticalScroll(Static(id="tau2-overview"), id="overview-scroll")
            with TabPane("2 Tables", id="schema"):
                with Horizontal():
                    yield OptionList(id="tau2-table-list", markup=False)  # the domain's names: text
                    yield VerticalScroll(Static(id="tau2-table-detail"), classes="tau2-right")
            with TabPane("3 Data", id="data"):
                yield VerticalScroll(Static(id="tau2-data"), id="data-scroll")
            with TabPane("4 Tools", id="tools"):
                with Horizontal():
                    yield OptionList(id="tau2-tool-list", markup=False)  # the domain's names: text
                    yield VerticalScroll(Static(id="tau2-tool-detail"), classes="tau2-right")
            with TabPane("5 Tasks", id="tasks"):
                with Horizontal():
                    yield OptionList(id="tau2-task-list", markup=False)  # the domain's names: text
                    yield VerticalScroll(Static(id="tau2-task-detail"), classes="tau2-right")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = self.scenario.name
        self.sub_title = str(self.domain.dir)
        self.query_one("#tau2-overview", Static).update(self.overview())
        self.query_one("#tau2-tool-list", OptionList).add_options(
            [Option(visible(f"{who:<5} {t['name']}"), id=str(i)) for i, (who, t) in enumerate(self.tools)])
        self.query_one("#tau2-task-list", OptionList).add_options(
            [Option(visible(f"{cut(t.id, 28):<28} {cut(t.summary, 28)}"), id=str(i))
             for i, t in enumerate(self.scenario.tau2_tasks)])
        self.load_databases()

    def overview(self) -> Group:
        """The domain at a glance. The database's check and the static problems come from ``load_databases`` (they
        validate the whole database: 0.2 s for retail, too long for the UI's thread); until then they say so."""
        d = self.domain
        diagnosis = self.diagnosis or self.quick  # awm env doctor's, as for AWM environments
        database = "checking…" if self.db_problem is None else self.db_problem or str(d.db_path)
        lines = [Text(self.scenario.description), Text(""),
                 Text.assemble(("task version: ", "bold"), d.version.describe() if d.version else "unknown"),
                 Text.assemble(("splits: ", "bold"), ", ".join(f"{k} {len(v)}" for k, v in d.splits.items()) or "none"),
                 Text.assemble(("database: ", "bold"), database),
                 Text.assemble(("tools: ", "bold"), f"{len(self.scenario.tools())} agent, "
                                                    f"{len(self.scenario.user_tools())} user"), Text("")]
        if diagnosis is None:
            lines.append(Text("Problems: checking…", style="dim"))
        else:
            lines.append(problems_view(diagnosis, self.diagnosing,
                                       f"awm env doctor --tau2-data {d.root} {self.scenario.key}",
                                       "the domain in a worker, every task's initial state and gold actions"))
            lines += [Text(note, style="dim") for note in diagnosis.notes]
        lines += [Text(""), Text("Policy", style="bold"), Text(d.policy or "(no policy)")]
        return Group(*lines)

    def action_diagnose(self) -> None:
        """ctrl+d: every check of ``awm env doctor --tau2-data DIR tau2_<domain>`` (its CLI twin), in the app's pool."""
        self.action_show_tab("overview")
        if not self.diagnosing:
            self.diagnosing = True
            self.query_one("#tau2-overview", Static).update(self.overview())
            self.run_doctor()

    @work(exclusive=True, group="tau2-doctor")
    async def run_doctor(self) -> None:
        try:
            pool = await self.app.get_pool()
            self.diagnosis = await diagnose_domain(self.scenario, pool)
        except Exception as exc:  # noqa: BLE001 - diagnose never raises for bad data; the pool might
            if not screen_left(self):  # said on this screen only, never on the one the user went to
                self.notify(visible(f"{type(exc).__name__}: {exc}"), title="awm env doctor", severity="error",
                            markup=False)
        finally:
            self.diagnosing = False
            if not screen_left(self):
                self.query_one("#tau2-overview", Static).update(self.overview())

    @work(thread=True, exclusive=True, group="tau2-db")
    def load_databases(self) -> None:
        quick = quick_diagnosis(self.scenario)
        try:
            dbs = {"db": self.domain.fresh_db()}
            if self.domain.name == "telecom":
                dbs["user_db"] = self.domain.fresh_user_db()
            # the tables' views are made here too: a large domain's (retail's 1,000 orders) took the UI 0.3 s
            collections = collections_of(dbs)
            counts = [len(c.records(getattr(dbs[c.db_name], c.field))) for c in collections]
            preview = data_preview(dbs, collections)
        except Exception as exc:  # noqa: BLE001 - shown in place of the tables
            # this load is the database's check too (``db_problem`` would load and validate it once more)
            self.app.call_from_thread(self._checked, quick, str(exc) if isinstance(exc, DatabaseMissing) else "")
            self.app.call_from_thread(self._databases_failed, str(exc))
            return
        self.app.call_from_thread(self._checked, quick, "")
        self.app.call_from_thread(self._databases_loaded, dbs, collections, counts, preview)

    def _checked(self, quick: Any, problem: str) -> None:
        self.quick, self.db_problem = quick, problem
        if screen_left(self):  # the domain's databases were read after the screen was closed
            return
        self.query_one("#tau2-overview", Static).update(self.overview())

    def _databases_failed(self, message: str) -> None:
        if screen_left(self):
            return
        for widget in ("#tau2-table-detail", "#tau2-data"):
            self.query_one(widget, Static).update(Text(message, style="red"))

    def _databases_loaded(self, dbs: dict[str, Any], collections: list, counts: list[int], preview: Group) -> None:
        self.databases = dbs
        self.collections = collections
        self.counts = counts
        if screen_left(self):
            return
        self.query_one("#tau2-table-list", OptionList).add_options(
            [Option(visible(f"{c.table} ({n})"), id=str(i)) for i, (c, n) in enumerate(zip(collections, counts))])
        self.query_one("#tau2-data", Static).update(preview)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        index = int(event.option.id)
        if event.option_list.id == "tau2-table-list":
            c = self.collections[index]
            table = RichTable("column", "stored as", title=shown(f"{c.table} · {self.counts[index]} rows · one row per "
                                                                  f"{'record' if c.shape != 'single' else c.field}"))
            for name, kind in c.columns.items():
                table.add_row(shown(name), shown(kind))
            self.query_one("#tau2-table-detail", Static).update(table)
        elif event.option_list.id == "tau2-tool-list":
            who, t = self.tools[index]
            schema = t.get("inputSchema") or {}
            table = RichTable("parameter", "type", "required", "description")
            for name, prop in (schema.get("properties") or {}).items():
                table.add_row(shown(name), shown(prop.get("type") or prop.get("enum") or "object"),
                              "yes" if name in (schema.get("required") or []) else "",
                              shown(prop.get("description") or ""))
            title = f"{t['name']} ({who} tool" + (", called as user:" + t["name"] if who == "user" else "") + ")"
            self.query_one("#tau2-tool-detail", Static).update(Group(Text(title, style="bold"),
                                                                     Text(t.get("description") or ""), table))
        elif event.option_list.id == "tau2-task-list":
            self.query_one("#tau2-task-detail", Static).update(self.task_view(self.scenario.tau2_tasks[index]))

    @staticmethod
    def task_view(task) -> Group:
        criteria = task.evaluation_criteria
        parts = [Text(f"task {task.id}", style="bold"), Text(f"reward basis: {', '.join(task.basis)}"),
                 Text("user scenario", style="bold"), Text(str(task.user_scenario))]
        if criteria is not None:
            for title, items in (("gold actions", [f"{a.requestor}: {a.name}({json.dumps(a.arguments)})"
                                                   for a in criteria.actions or []]),
                                 ("environment assertions", [f"{a.env_type}.{a.func_name}({json.dumps(a.arguments)}) "
                                                             f"== {a.assert_value}" for a in criteria.env_assertions or []]),
                                 ("communicate", criteria.communicate_info or []),
                                 ("NL assertions", criteria.nl_assertions or [])):
                if items:
                    parts += [Text(title, style="bold"), *[Text(f"  {i}") for i in items]]
        if task.initial_state and task.initial_state.initialization_actions:
            parts += [Text("initialization", style="bold"),
                      *[Text(f"  {a.env_type}.{a.func_name}({json.dumps(a.arguments)})")
                        for a in task.initial_state.initialization_actions]]
        return Group(*parts)

    # -- actions ----------------------------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        """As an AWM environment's: the tab's main widget gets the focus (so ↓ moves in its list at once), and a
        list shows its highlighted item (the first, until another is), the one ctrl+g / ctrl+u play."""
        target = self.query_one(TAU2_TAB_FOCUS[tab])
        if isinstance(target, OptionList) and target.highlighted is None and target.option_count:
            target.highlighted = 0
        self.set_focus(target, scroll_visible=False)
        self.query_one(TabbedContent).active = tab

    def action_back(self) -> None:
        self.app.pop_screen()

    def _selected_task(self):
        options = self.query_one("#tau2-task-list", OptionList)
        index = options.highlighted if options.highlighted is not None else 0
        return self.scenario.tau2_tasks[index] if self.scenario.tau2_tasks else None

    def _play(self, mode: str) -> None:
        task = self._selected_task()
        if task is None:
            self.notify("this domain has no tasks", severity="warning")
            return
        if self.domain.db_problem():
            self.notify(visible(self.domain.db_problem()), title="τ²-bench", severity="error", markup=False)
            return
        self.app.push_screen(Tau2PlayScreen(self.scenario, task, mode))

    def action_play_task(self) -> None:
        self._play("agent")

    def action_rollout_task(self) -> None:
        self._play("watch")

    def action_play_user(self) -> None:
        self._play("user")

    def action_next_page(self) -> None:
        pass

    action_prev_page = action_focus_sql = action_toggle_source = action_next_page


# -- play -----------------------------------------------------------------------------------------------------

class Tau2PlayScreen(Screen):
    """A τ² conversation with a person on one side: ``agent`` (you are the agent, a model plays the user),
    ``user`` (you are the user, a model is the agent) or ``watch`` (models on both sides). Type a message, or
    ``/tool {json}`` to call a tool (``/tools`` lists yours)."""

    SCOPE = "play"
    BINDINGS = bindings("play", only=("play.call", "play.answer", "play.select_all", "play.back", "play.enter"))
    AUTO_FOCUS = "#tau2-input"
    DEFAULT_CSS = """
    Tau2PlayScreen #tau2-play-tabs { height: 1fr; }
    Tau2PlayScreen #tau2-task { height: auto; padding: 0 1; background: $boost; }
    Tau2PlayScreen #tau2-play-status { height: 1; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, scenario: DomainScenario, task, mode: str = "agent"):
        super().__init__()
        self.scenario = scenario
        self.tau2_task = task
        self.mode = mode
        self.human = HumanPolicy()
        self.my_tools = scenario.tools() if mode == "agent" else scenario.user_tools()
        self.run_dir: Path | None = None
        self.done = False

    def compose(self) -> ComposeResult:
        yield Header()
        who = {"agent": "You are the agent; a model plays the user.",
               "user": "You are the user; a model is the agent.",
               "watch": "Watching a model as the agent and a model as the user."}[self.mode]
        scenario = str(self.tau2_task.user_scenario) if self.mode == "user" else self.tau2_task.summary
        yield Static(Text.assemble((f"τ² {self.scenario.domain} task {self.tau2_task.id}: ", "bold"), who, "\n",
                                   scenario), id="tau2-task")
        with TabbedContent(id="tau2-play-tabs", initial="tau2-talk"):
            with TabPane("Conversation", id="tau2-talk"):
                yield Transcript(id="tau2-transcript", human=False)
            with TabPane("Verdict", id="tau2-verdict-tab"):
                yield Tau2Verdict(id="tau2-verdict")
        yield Static("opening the episode…", id="tau2-play-status")
        yield Input(placeholder="a message, or /tool {json args}; /tools lists your tools", id="tau2-input",
                    disabled=self.mode == "watch")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = f"τ²-bench · {self.scenario.domain} · {self.mode}"
        if not getattr(self.app, "cursor_blink", True):
            self.query_one(Input).cursor_blink = False
        self.converse()

    def status(self, text: str | Text) -> None:
        if not screen_left(self):  # a termination reason, a failure: text, never markup
            self.query_one("#tau2-play-status", Static).update(text if isinstance(text, Text) else shown(text))

    @work(exclusive=True, group="tau2-play")
    async def converse(self) -> None:
        other = endpoint_for("user" if self.mode == "agent" else "agent")
        if other is None:
            self.status("no model to talk to: name one in the awm config ([endpoints.NAME], or [tau2] "
                        "agent_endpoint / user_endpoint), or set OPENAI_BASE_URL and AWM_MODEL")
            return
        owned = []

        def llm(role: str) -> LLMPolicy:
            policy = LLMPolicy(endpoint_for(role) or other)
            owned.append(policy)
            return policy

        agent = self.human if self.mode == "agent" else llm("agent")
        user = self.human if self.mode == "user" else llm("user")
        root = Path(getattr(self.app, "runs_root", "outputs")) / "play" / "tau2"
        self.run_dir = root / f"{time.strftime('%Y%m%d_%H%M%S')}_{self.scenario.domain}_" \
                              f"{task_dir_name(self.tau2_task.id, 0)}_{uuid.uuid4().hex[:4]}"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        data = self.scenario.data
        config = Tau2Config(data_dir=str(data.root), domains=[self.scenario.domain],
                            airline_db=str(data.airline_db) if data.airline_db else None,
                            endpoint=other.public() if self.mode == "user" else None,
                            user_endpoint=other.public() if self.mode == "agent" else None, policy="human")
        judge = self.app.judge_endpoint() if hasattr(self.app, "judge_endpoint") else None
        grader = make_nl_judge(judge) if judge is not None else None
        if grader is not None:
            owned.append(grader.policy)
        self.status(self._turn_hint())
        try:
            pool = await self.app.get_pool()
            sim, reward, failure = await run_simulation(self.scenario, self.tau2_task, 0, None, pool, agent, user, config,
                                                        self.run_dir, grader, on_event=self.add_step)
        finally:
            for policy in owned:
                await policy.aclose()
        self.done = True
        if screen_left(self):
            return
        if sim is None:
            self.status(f"the episode could not be opened: {failure}")
            return
        info = reward.to_dict() if reward is not None else None
        self.query_one(Tau2Verdict).show(info, sim.termination_reason, self.run_dir)
        self.query_one(TabbedContent).active = "tau2-verdict-tab"
        self.query_one(Input).disabled = True
        self.status(f"finished: {sim.termination_reason} · reward {info.get('reward') if info else None} · "
                    f"{self.run_dir}")

    def _turn_hint(self) -> str:
        if self.mode == "watch":
            return "the models are talking…"
        me = "agent" if self.mode == "agent" else "user"
        return f"you are the {me}: type a message, or /tool {{json}} to call one of your {len(self.my_tools)} tools"

    def add_step(self, event) -> None:
        if not screen_left(self):
            self.query_one(Transcript).add_event(event)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.send(event.input)

    def send(self, box: Input) -> None:
        """What the box says, sent as the human's turn (a message, or ``/tool {json}``); the box is emptied at once,
        so the keys typed after it are the next message's."""
        text = box.value.strip()
        if not text or self.done:
            return
        if text == "/tools":
            names = ", ".join(t["name"] for t in self.my_tools) or "none"
            self.notify(visible(names), title="your tools", markup=False)
            return
        if text.startswith("//"):  # a message that itself starts with "/"
            turn = AssistantTurn(text[1:])
        elif text.startswith("/"):
            name, _, raw = text[1:].partition(" ")
            problem = tool_call_problem(name, raw, [t["name"] for t in self.my_tools])
            if problem is not None:
                self.notify(visible(problem), title="tool call", severity="error", markup=False)
                return
            turn = AssistantTurn("", [NativeCall(f"call_{uuid.uuid4().hex[:10]}", name,
                                                 json.dumps(json.loads(raw) if raw.strip() else {}))])
        else:
            turn = AssistantTurn(text)
        box.value = ""
        self.human.queue.put_nowait(turn)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "enter_key":  # enter in the message box; elsewhere it is the widget's
            return isinstance(self.focused, Input)
        return True

    async def action_call_tool(self) -> None:
        """ctrl+j, ctrl+f or enter, read as the app reads the key (priority): the box first types every key queued
        at it (the letters typed just before the key, at full speed, were not in it yet: the message went out cut or
        not at all), then it is sent and emptied before the next key is read."""
        box = self.query_one("#tau2-input", Input)
        done = asyncio.Event()
        if box.is_attached and box.call_later(done.set):
            await done.wait()
        if not screen_left(self):
            self.send(box)

    action_submit_answer = action_enter_key = action_call_tool

    def action_select_all_text(self) -> None:
        self.query_one(Input).action_select_all()

    def action_back(self) -> None:
        self.workers.cancel_group(self, "tau2-play")
        self.app.pop_screen()


def tool_call_problem(name: str, raw: str, tools: list[str]) -> str | None:
    """What is wrong with ``/name {json}`` typed in τ² play (None: nothing): a name that is none of the player's
    tools, or arguments that are not a JSON object. Says how to send a message that starts with "/" instead."""
    if name not in tools:
        return (f"no tool named {name!r}: /tools lists yours; to send a message that starts with \"/\", begin it "
                "with \"//\"")
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return f"the arguments of {name} are not JSON ({exc}): type /{name} {{\"key\": \"value\", ...}}"
    if not isinstance(arguments, dict):
        return f"the arguments of {name} must be a JSON object: type /{name} {{\"key\": \"value\", ...}}"
    return None


# -- replay ---------------------------------------------------------------------------------------------------

class Tau2ReplayScreen(ReplayScreen):
    """The replay view on a τ² rollout: each message and tool call a step (agent and user marked), the database
    after it rebuilt in a worker episode of the domain, and the verdict with every reward component."""

    def __init__(self, run_dir: Path | str, data: Tau2Data):
        super().__init__(run_dir)
        self.data = data
        for step in self.run.steps:
            step.is_final = False

    def on_mount(self) -> None:  # Textual runs ReplayScreen.on_mount too; this goes after it
        self.call_after_refresh(self._tau2_view)

    def _tau2_view(self) -> None:
        if screen_left(self):  # esc right after enter: closed before its first refresh
            return
        steps = self.query_one("#steps", OptionList)
        steps.clear_options()
        steps.add_options([Option(Text(f"{s.index:>2}. {self.label(s)}" + (" ✗" if s.is_error else "")),
                                  id=str(s.index)) for s in self.run.steps])
        side = self.query_one("#side")
        side.display = False
        verdict = Tau2Verdict(id="tau2-verdict")
        self.query_one("#verdict-tab", TabPane).mount(verdict)
        path = self.run.run_dir / "reward.json"
        info = json.loads(path.read_text()) if path.is_file() else None
        self.call_after_refresh(lambda: screen_left(self) or verdict.show(info, self.run.stop_reason, self.run.run_dir))
        self.show_step(self.current)

    @staticmethod
    def label(step) -> str:
        if step.tool:
            return step.tool
        text = (step.content or "").strip()
        return text[:36] if text else "…"

    def replay_catalog(self) -> DomainCatalog:
        return DomainCatalog(self.data)


# -- the evaluation dashboard -----------------------------------------------------------------------------------

class Tau2RunView(RunView):
    """A τ²-bench run in the evaluation dashboard: its results read as an evaluation's (per domain: mean reward,
    completion = success, pass@k and pass^k with τ²'s success rule), its rollouts replayed by ``Tau2ReplayScreen``."""

    def __init__(self, path: Path):
        self.path = path
        self.tau2 = Tau2Config.load(path)
        self.config = EvalConfig(data_dirs=[self.tau2.data_dir], scenarios=[f"tau2_{d}" for d in self.tau2.domains],
                                 policy="tau2", endpoint=self.tau2.endpoint, k=self.tau2.k,
                                 pass_threshold=PASS_THRESHOLD)
        read_metadata(path)  # checks its format version
        self.index = ResultsIndex(path / "results.jsonl")
        self.expected: int | None = None
        self.error: str | None = None

    def expected_total(self) -> int | None:
        if self.expected is None:
            try:
                _, chosen = preflight(self.tau2, {})  # domains that cannot run are not expected
                self.expected = sum(len(tasks) for tasks in chosen.values()) * self.tau2.k
            except Exception:  # noqa: BLE001 - data moved away: progress shows counts only
                self.expected = None
        return self.expected

    @staticmethod
    def label(run: Path) -> Text | None:
        try:
            config = Tau2Config.load(run)
        except (OSError, ValueError, TypeError, RunFormatError):
            return None
        return Text.assemble((run.name, "bold"), f"\nτ²-bench {'+'.join(config.domains)} · {config.model} · "
                                                 f"k={config.k}")
