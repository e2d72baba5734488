"""Issue 13, "Fix": a debugging session without friction — each item with a Pilot test (and SVG snapshots of the
readable diff and its row detail)."""
from __future__ import annotations

import pytest
from test_tui_snapshots import settle, wait_until
from textual.widgets import TabbedContent

from awm_tui.app import AwmApp

SIZE = (130, 40)


async def open_env(pilot, key="maple_library_lending"):
    app = pilot.app
    await settle(pilot)
    app.open_environment(key)
    await settle(pilot)


# -- tab keys and the palette's tab entries work from any pane ---------------------------------------

@pytest.mark.parametrize("start,pane", [("2", "#schema-tree"), ("4", "#tool-list"), ("5", "#task-list")])
async def test_tab_keys_work_from_inside_a_tab(start, pane):
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_env(pilot)
        tabs = app.screen.query_one(TabbedContent)
        for key, tab in zip("13452", ("overview", "data", "tools", "tasks", "schema")):
            await pilot.press(start)
            app.screen.query_one(pane).focus()
            await pilot.pause()
            assert app.focused is app.screen.query_one(pane)
            await pilot.press(key)
            await pilot.pause()
            assert tabs.active == tab, (start, key)


async def test_palette_tab_entries_work_from_inside_a_tab():
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_env(pilot)
        await pilot.press("2")
        app.screen.query_one("#schema-tree").focus()
        await pilot.pause()
        await pilot.press("ctrl+p", *"env.data")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen.query_one(TabbedContent).active == "data"


# -- play: focus, wrapped descriptions, a full-width JSON editor, ctrl+a -----------------------------

NESTED = '''
class NoteBatch(BaseModel):
    notes: list[NoteIn] = Field(..., description="The notes to add, each with its text")
    tag: str = Field("", description="A tag for every note of the batch; a long description that cannot fit on one line of the form, however wide the terminal is, so it has to wrap")

@app.post("/api/notes/batch", summary="Add notes", description="Create several notes.", tags=["notes"], operation_id="add_notes", response_model=NoteList)
async def add_notes(req: NoteBatch):
    session = SessionLocal()
    rows = [Note(text=n.text + (f" #{req.tag}" if req.tag else "")) for n in req.notes]
    session.add_all(rows)
    session.commit()
    out = NoteList(notes=[NoteOut(id=r.id, text=r.text) for r in rows])
    session.close()
    return out

class Vehicle(BaseModel):
    vin: str = Field(..., description="Vehicle Identification Number, the 17 characters stamped on the dashboard and on the driver's door pillar of the car")

@app.post("/api/vehicles", summary="Register", description="Register a vehicle.", tags=["cars"], operation_id="register_vehicle", response_model=NoteOut)
async def register_vehicle(req: Vehicle):
    return NoteOut(id=1, text=req.vin)
'''


def nested_env(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from tinyenv import make_env_dir

    return make_env_dir(tmp_path / "data", {"Nested Notes": NESTED})


async def test_play_focus_descriptions_json_editor_and_select_all(tmp_path):
    from textual.widgets import OptionList, TextArea

    from awm_tui.screens.play import PlayScreen

    app = AwmApp([str(nested_env(tmp_path))], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.push_screen(PlayScreen(app.catalog.get("nested_notes"), 0))
        await pilot.pause()
        screen = app.screen
        tools = screen.query_one("#play-tools", OptionList)
        assert app.focused is tools  # from the start, before the episode is open
        await wait_until(pilot, lambda: screen.tools and screen.current is not None, what="the episode")
        await pilot.pause()
        assert app.focused is tools
        names = [t["name"] for t in screen.tools]
        # down moves through the tools at once, and enter goes to the form's first field
        await pilot.press(*["down"] * names.index("register_vehicle"))
        await pilot.pause()
        assert screen.current["name"] == "register_vehicle"
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is screen.fields["vin"]
        label = next(w for w in screen.query("#form Label") if "vin" in str(w.render()))
        assert "driver's door pillar of the car" in str(label.render())
        assert label.size.height > 1 and label.region.right <= screen.query_one("#form").region.right
        # tab from the tool list goes straight into the form
        tools.focus()
        await pilot.press("tab")
        assert app.focused is screen.fields["vin"]
        # the nested tool: a JSON editor as wide as its pane; ctrl+a selects all, typing replaces the skeleton
        tools.focus()
        tools.highlighted = names.index("add_notes")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        editor = screen.query_one("#form TextArea", TextArea)
        assert app.focused is editor
        form = screen.query_one("#form")
        assert editor.outer_size.width >= form.size.width - 1 and editor.outer_size.width > 40
        await pilot.press("ctrl+a")
        assert editor.selected_text == editor.text
        await pilot.press(*'{"notes": [{"text": "typed"}], "tag": "mine"}')  # typing replaces the selection
        transcript = screen.query_one("#transcript")
        before = len(transcript.events)
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: any(type(e).__name__ == "Observation" for e in transcript.events[before:]),
                         what="the call")
        call = next(e for e in transcript.events[before:] if type(e).__name__ == "ToolCall")
        assert call.arguments == {"notes": [{"text": "typed"}], "tag": "mine"}
        await pilot.press("escape")


# -- elsewhere: escape in the SQL box, key names in help, catalog keys, code never cut --------------

async def test_escape_in_the_sql_box_leaves_the_box_not_the_screen():
    from textual.widgets import Input

    from awm_tui.screens.environment import EnvironmentScreen

    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_env(pilot)
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert isinstance(app.focused, Input) and app.focused.id == "sql"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, EnvironmentScreen) and app.focused.id == "data-grid"
        await pilot.press("escape")  # from the grid, escape goes back as before
        await pilot.pause()
        assert not isinstance(app.screen, EnvironmentScreen)


async def test_help_writes_keys_as_people_do():
    from rich.console import Console
    from textual.widgets import Static

    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        console = Console(width=200, record=True)
        console.print(app.screen.query_one(Static).content)
        text = console.export_text()
        assert "F1, ?" in text and "question_mark" not in text and "slash" not in text
        assert " / " in text and "ctrl+r" in text


async def test_ddl_wraps_between_words_and_python_scrolls_sideways_whole():
    """DDL (one long line per table) wraps between words at the pane edge; a handler's source and a verifier's code
    keep every line whole — never cut mid-token — and the pane scrolls sideways to their ends; the prose around
    them still wraps at the pane's width. Fitted again when the terminal changes size."""
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=(90, 36)) as pilot:
        await open_env(pilot)
        for size in ((90, 36), (130, 36)):
            await pilot.resize_terminal(*size)
            for tab, pane in (("2", "#schema-detail"), ("4", "#tool-detail"), ("5", "#task-detail")):
                await pilot.press(tab)
                if tab == "4" and not app.screen.show_source:
                    await pilot.press("ctrl+s")
                static = app.screen.query_one(pane)
                scroll = static.parent
                code = _code_lines(app.screen, tab)
                longest = max(len(c) for c in code)
                fits = lambda: app.screen._pane_width(static)  # noqa: E731 - the pane's width inside padding/scrollbar
                await wait_until(pilot, lambda: fits() and pane in app.screen._shown
                                 and app.screen._shown[pane][1] == fits()
                                 and static.size.width >= (fits() if tab == "2" else longest),
                                 what=f"tab {tab} fitted to its pane")
                width = fits()
                assert longest > width  # the code has lines wider than the pane
                lines = ["".join(seg.text for seg in strip) for strip in
                         (static.render_line(y) for y in range(static.size.height))]
                if tab == "2":  # wrapped: no line is wider than the pane, every character is there
                    assert static.size.width == width
                    shown = "".join("".join(line.split()) for line in lines)
                    for code_line in code:
                        assert "".join(code_line.split()) in shown, code_line
                    continue
                text = [line.rstrip() for line in lines]
                for code_line in code:  # each line whole, on one line of the pane
                    assert code_line.rstrip() in text, code_line
                from rich.syntax import Syntax
                shown_code = {c.rstrip() for p in app.screen._shown[pane][0] if isinstance(p, Syntax)
                              for c in p.code.splitlines()}
                prose = [line for line in text if line and line not in shown_code]
                assert all(len(line) <= width for line in prose), [line for line in prose if len(line) > width]
                assert scroll.max_scroll_x > 0  # … reached by scrolling sideways


def _code_lines(screen, tab) -> list[str]:
    from awm_engine.data import codeinfo

    if tab == "2":
        return screen.tables[0].ddl.splitlines()
    if tab == "4":
        return codeinfo.handler_source(screen.scenario.code, screen.tools[screen.current_tool]).splitlines()
    return screen.scenario.verifier(0, "sql").code.splitlines()


# -- the evaluation dashboard: distinguishable rollouts, a k = 1 summary, columns sized to the space ----

LONG = "DocuSign E-Signature Agreement Workflow"  # its key was cut at 34 (catalog) and 30 characters (dashboard)
KEY = "docusign_e_signature_agreement_workflow"


async def test_evaluation_dashboard_rollouts_k1_summary_and_column_widths(tmp_path):
    import asyncio
    import sys
    from pathlib import Path

    from awm_engine.cli import main as awm
    from awm_tui.screens.evals import EvalScreen
    from awm_tui.widgets.virtual_table import VirtualTable

    sys.path.insert(0, str(Path(__file__).parent))
    from tinyenv import make_env_dir

    data = make_env_dir(tmp_path / "data", {LONG: "", "Tiny Notes": ""})
    out = tmp_path / "runs" / "eval" / "k1"
    assert await asyncio.to_thread(awm, ["eval", "run", "--data", str(data), "--policy", "immediate", "-k", "1",
                                         "--concurrency", "1", "--workers", "1", "--verify", "none",
                                         "--out", str(out), "--quiet"]) == 0
    app = AwmApp([str(data)], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+e")
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen), what="the dashboard")
        screen = app.screen
        rollouts = screen.query_one("#rollout-table", VirtualTable)
        await wait_until(pilot, lambda: rollouts.row_count == 4, what="the rollouts")
        await pilot.pause()
        head = str(screen.query_one("#run-head").render())
        assert head.count("pass@1") == 1 and "pass^" not in head, head
        # each rollout row says which scenario, task and sample it is, in full
        rows = [rollouts.get_row_at(i) for i in range(rollouts.row_count)]
        key = KEY
        assert {tuple(r[:3]) for r in rows} == {(key, "0", "0"), (key, "1", "0"), ("tiny_notes", "0", "0"),
                                                ("tiny_notes", "1", "0")}
        line = "".join(seg.text for seg in rollouts.render_line(1))
        assert rows[0][0] in line and rollouts.widths[0] >= len(key)
        scenarios = screen.query_one("#scenario-table", VirtualTable)
        assert scenarios.widths[0] >= len(key) and "pass@k" not in scenarios.columns
        assert scenarios.columns.count("pass@1") == 1


async def test_catalog_shows_whole_scenario_keys(tmp_path):
    import sys
    from pathlib import Path

    from awm_tui.widgets.virtual_table import VirtualTable

    sys.path.insert(0, str(Path(__file__).parent))
    from tinyenv import make_env_dir

    data = make_env_dir(tmp_path / "data", {LONG: "", "Tiny Notes": ""})
    app = AwmApp([str(data)], cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(VirtualTable)
        key = KEY
        line = "".join(seg.text for seg in table.render_line(1 + [r[0] for r in table.rows].index(key)))
        assert f"{key} " in line and "DocuSign" in line  # the whole key, then the name


# -- live rollout states: stop while starting and after a step, a new run, the verdict's lines ---------

def _call(name, arguments):
    import json

    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def _rollout_config(tmp_path, monkeypatch, agent_url, judge_url=None):
    text = f'[endpoints.scripted]\nbase_url = "{agent_url}"\nmodel = "scripted"\n'
    if judge_url:
        text += f'[endpoints.judge]\nbase_url = "{judge_url}"\nmodel = "judge"\n[judge]\nendpoint = "judge"\n'
    config = tmp_path / "config.toml"
    config.write_text(text)
    monkeypatch.setenv("AWM_CONFIG", str(config))


async def open_rollout(pilot):
    from awm_tui.screens.rollout import RolloutScreen

    await settle(pilot)
    pilot.app.push_screen(RolloutScreen(pilot.app.catalog.get("maple_library_lending"), 3))
    await pilot.pause()
    return pilot.app.screen


def _state(screen) -> str:
    return str(screen.query_one("#state").render())


async def test_live_rollout_stop_while_starting_after_a_step_and_a_new_run(tmp_path, monkeypatch):
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_tui.widgets.transcript import Transcript

    script = {"responses": [{"content": _call("list_tools", {})}] * 6}
    with FakeLLMServer(script) as llm:
        _rollout_config(tmp_path, monkeypatch, llm.url)
        app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs")
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_rollout(pilot)
            # x while the MCP server is starting: the state says stopped, and stays so
            await pilot.press("n")
            await wait_until(pilot, lambda: "starting an MCP server" in _state(screen), what="the start")
            await pilot.press("x")
            await pilot.pause(1.0)
            await wait_until(pilot, lambda: all(w.is_finished for w in screen.workers), what="the stopped run")
            assert "stopped before the first step" in _state(screen) and "starting" not in _state(screen)
            assert not screen.running
            # a run, one step, then x: stopped (not paused) after that turn
            await pilot.press("n")
            await wait_until(pilot, lambda: "paused before the first step" in _state(screen), what="the server")
            await pilot.press("n")
            await wait_until(pilot, lambda: "paused after turn 1" in _state(screen), what="turn 1")
            first = list(screen.query_one(Transcript).events)
            assert first
            await pilot.press("x")
            await pilot.pause(0.5)
            await wait_until(pilot, lambda: all(w.is_finished for w in screen.workers), what="the stopped run")
            assert "stopped after turn 1" in _state(screen) and "paused" not in _state(screen)
            # the next n starts a new run on a clean transcript
            await pilot.press("n")
            await wait_until(pilot, lambda: "paused before the first step" in _state(screen), what="the new run")
            assert screen.query_one(Transcript).events == [] and not screen.query_one(Transcript).children
            await pilot.press("n")
            await wait_until(pilot, lambda: "paused after turn 1" in _state(screen), what="turn 1 of the new run")
            assert [type(e).__name__ for e in screen.query_one(Transcript).events] == [type(e).__name__ for e in first]
            await pilot.press("x")
            await pilot.pause(0.5)


async def test_live_rollout_verdict_flags_judge_against_code_verifier(tmp_path, monkeypatch):
    import json

    from awm_engine.agent.scripted_llm import FakeLLMServer

    agent = {"responses": [{"content": "Your loan is renewed."}]}  # nothing done: the database is unchanged
    judge = {"responses": [{"content": json.dumps({"reasoning": "The assistant says it renewed the loan.",
                                                   "classification": "complete"})}]}
    with FakeLLMServer(agent) as agent_llm, FakeLLMServer(judge) as judge_llm:
        _rollout_config(tmp_path, monkeypatch, agent_llm.url, judge_llm.url)
        app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs")
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_rollout(pilot)
            await pilot.press("r")
            await wait_until(pilot, lambda: screen.reports is not None, 60, what="the verdict")
            await pilot.pause()
            assert screen.reports["code"]["label"] == "others" and screen.reports["judge"]["classification"] == "complete"
            state = _state(screen)
            assert state.endswith("reward 1.0"), state  # no stray separator, nothing cut after it
            from rich.console import Console

            console = Console(width=200, record=True)
            console.print(screen.query_one("#verdict").content)
            verdict = console.export_text()
            assert "the code verifier says others but the judge says complete" in verdict
            assert "confidence None" not in verdict and "classification complete" in verdict


def test_flags_a_judge_against_a_code_verifier_that_failed_to_run():
    from awm_tui.widgets.verdict import flags

    failed = {"label": "judge_error", "result": {"execution_status": "error", "result": "others"}}
    said = [t.plain for t in flags({"code": failed, "judge": {"classification": "Complete"}}, 0)]
    assert any("code verifier says others but the judge says complete" in s for s in said)
    assert not flags({"code": {"label": "complete"}, "judge": {"classification": "complete"}}, 0)


# -- readable diffs: key columns pinned, wide tables scroll, enter opens a row ------------------------

LONG_TEXT = "Please deliver to the side entrance after 5 pm; the front door buzzer is broken since March."


def wide_diff(tmp_path):
    import sqlite3

    from awm_engine.db.diff import diff_databases

    before, after = tmp_path / "before.db", tmp_path / "after.db"
    for path in (before, after):
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE order_notes (id INTEGER PRIMARY KEY, order_id INTEGER, status TEXT, "
                     "customer_message TEXT, internal_note TEXT, assigned_to TEXT, channel TEXT, "
                     "created_at TEXT, updated_at TEXT)")
        conn.execute("INSERT INTO order_notes VALUES (1, 1001, 'open', 'Leave it with the concierge.', "
                     "'Checked with the courier on Monday morning.', 'dispatch-team-north', 'email', "
                     "'2026-03-01 09:12:44', '2026-03-01 09:12:44')")
        if path == after:
            conn.execute("INSERT INTO order_notes VALUES (7, 1042, 'pending', ?, 'Call the customer back before "
                         "the courier leaves the depot.', 'customer-care-escalations', 'chat', "
                         "'2026-03-18 16:40:02', '2026-03-18 16:40:02')", (LONG_TEXT,))
            conn.execute("UPDATE order_notes SET status = 'resolved', updated_at = '2026-03-18 17:02:10' WHERE id = 1")
        conn.commit()
        conn.close()
    return diff_databases(before, after)


def diff_app(diff):
    from textual.app import App

    from awm_tui.widgets.verdict import SideBySide

    class DiffApp(App):
        def compose(self):
            yield SideBySide()

        def on_mount(self):
            self.query_one(SideBySide).show(diff, {"label": "others", "reward": 0.0}, stop_reason="final_answer")

    return DiffApp()


def table_line(table, y: int) -> str:
    return "".join(seg.text for seg in table.render_line(y))


async def test_diff_keeps_keys_pinned_scrolls_sideways_and_opens_rows(tmp_path):
    from textual.widgets import Static

    from awm_tui.widgets.diff_view import DiffTable, RowDetail

    app = diff_app(wide_diff(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(DiffTable)
        assert [str(c.label) for c in table.columns.values()][:2] == ["", "id"] and table.fixed_columns == 2
        header = table_line(table, 0)
        assert "id" in header and "status" in header and "updated_at" in header  # keys, then the changed columns
        table.focus()
        await pilot.pause()
        for _ in range(12):
            await pilot.press("right")
        await pilot.pause()
        assert table.scroll_x > 0  # a wide table scrolls sideways …
        table.scroll_to(x=table.max_scroll_x, animate=False)
        await pilot.pause()
        header = table_line(table, 0)
        assert " id " in header and "status" not in header and "created_at" in header  # … with its key pinned
        row = next(i for i, c in enumerate(table.changes) if c.kind == "inserted")
        table.move_cursor(row=row)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RowDetail)
        from rich.console import Console

        console = Console(width=300, record=True)
        console.print(app.screen.query_one("#row-detail", Static).content)
        text = console.export_text()
        assert "order_notes · inserted row · id=7" in text and LONG_TEXT in text and "customer-care-escalations" in text
        await pilot.press("escape")
        await pilot.pause()
        table.move_cursor(row=next(i for i, c in enumerate(table.changes) if c.kind == "updated"))
        await pilot.press("enter")
        await pilot.pause()
        console = Console(width=300, record=True)
        console.print(app.screen.query_one("#row-detail", Static).content)
        text = console.export_text()
        assert "status    open → resolved" in text or ("open → resolved" in text and "updated row · id=1" in text)
        assert "2026-03-01 09:12:44 → 2026-03-18 17:02:10" in text


def test_snapshot_readable_diff(snap_compare, tmp_path):
    assert snap_compare(diff_app(wide_diff(tmp_path)), terminal_size=(130, 24))


def test_snapshot_diff_row_detail(snap_compare, tmp_path):
    async def run_before(pilot):
        from awm_tui.widgets.diff_view import DiffTable

        await pilot.pause()
        table = pilot.app.query_one(DiffTable)
        table.focus()
        table.move_cursor(row=next(i for i, c in enumerate(table.changes) if c.kind == "inserted"))
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(diff_app(wide_diff(tmp_path)), terminal_size=(130, 24), run_before=run_before)


# -- replay without --data: the run's own data directories; errors whole; never "computing…" forever -----

async def test_replay_without_data_uses_the_runs_data_directories(tmp_path, monkeypatch):
    import json

    from awm_engine.data.catalog import Catalog
    from awm_engine.eval.episode import make_policy, run_episode
    from awm_tui.screens.replay import ReplayScreen
    from awm_tui.widgets.diff_view import DiffTable, DiffView

    data = nested_env(tmp_path)
    (data / "reference_solutions.jsonl").write_text(json.dumps(
        {"scenario": "Nested Notes", "task_idx": 0, "calls": [{"tool": "add_note", "arguments": {"text": "hi"}}],
         "final_answer": "Added."}) + "\n")
    catalog = Catalog.load([str(data)])
    scenario = catalog.get("nested_notes")
    run = tmp_path / "run"
    await run_episode(catalog, scenario, 0, make_policy("oracle", scenario, 0), run_dir=run)
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)  # no --data: the catalog is sample_envs
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.catalog is not None
        app.open_replay(run)
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen), what="the replay")
        screen = app.screen
        await wait_until(pilot, lambda: screen.run.states, what="the intermediate states")
        await pilot.press("right", "right")
        await pilot.pause()
        assert screen.query_one("#step-diff", DiffView).query(DiffTable)
        assert "re-execution reproduces" in str(screen.query_one("#replay-state").render())

    # data that is gone: the error is shown whole, and no pane stays "computing…"
    trajectory = json.loads((run / "trajectory.json").read_text())
    trajectory["awm"]["data_dirs"] = [str(tmp_path / "gone" / ("a-long-directory-name-" * 4))]
    (run / "trajectory.json").write_text(json.dumps(trajectory))
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, replay=run)
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen), what="the replay")
        screen = app.screen
        await wait_until(pilot, lambda: screen.rebuild_error is not None, what="the failure")
        await pilot.pause()
        state = screen.query_one("#replay-state")
        assert state.size.height > 1  # wrapped, not cut
        shown = str(state.render()).replace("\n", "")
        assert shown.endswith(screen.rebuild_error[-20:]) and "could not rebuild" in shown
        pane = screen.query_one("#step-diff", DiffView)
        texts = " ".join(str(s.render()) for s in pane.query("Static"))
        assert "computing" not in texts and "could not rebuild" in texts
