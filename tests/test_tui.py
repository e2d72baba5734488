"""TUI I: navigation, search, sorting, every tab, keys, palette — with Pilot, plus SVG snapshots."""
import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, OptionList, Static, TabbedContent

from awm_tui.actions import ACTIONS
from awm_tui.app import AwmApp
from awm_tui.screens.catalog import CatalogScreen
from awm_tui.screens.environment import EnvironmentScreen
from awm_tui.screens.help import HelpScreen
from awm_tui.widgets.virtual_table import VirtualTable

SIZE = (120, 36)


async def settle(app, pilot):
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def text_of(app, selector) -> str:
    return str(app.screen.query_one(selector, Static).render())


def detail_text(app, selector) -> str:
    from rich.console import Console, Group

    console = Console(width=200, record=True)
    shown = getattr(app.screen, "_shown", {})  # a detail pane: its parts before they were fitted to the pane
    console.print(Group(*shown[selector][0]) if selector in shown else app.screen.query_one(selector, Static).content)
    return console.export_text()


async def open_env(app, pilot, needle):
    await settle(app, pilot)
    await pilot.press("slash", *needle, "enter")
    await settle(app, pilot)
    assert isinstance(app.screen, EnvironmentScreen)


async def test_search_sort_open_and_back():
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one(VirtualTable)
        assert table.row_count == 5
        first = table.get_row_at(0)[0]
        await pilot.press("s")  # sort by name
        await pilot.press("r")  # reversed
        assert table.get_row_at(0)[0] != first or table.get_row_at(4)[0] == first
        assert "sorted by name ↓" in text_of(app, "#status")
        await pilot.press("slash", *"travel")
        assert table.row_count == 1 and table.get_row_at(0)[0] == "skyway_travel_bookings"
        await pilot.press("escape")  # clears the search
        assert table.row_count == 5 and app.screen.query_one("#search", Input).value == ""
        await pilot.press("slash", *"clinic", "enter")  # a single match opens at once
        await settle(app, pilot)
        assert isinstance(app.screen, EnvironmentScreen)
        assert app.screen.scenario.key == "riverside_clinic_appointments"
        assert "Riverside Clinic Appointments" in detail_text(app, "#overview-body")
        await pilot.press("escape")
        assert isinstance(app.screen, CatalogScreen)


async def test_schema_tab_tree_and_ddl():
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_env(app, pilot, "library")
        await pilot.press("2")
        assert app.screen.query_one(TabbedContent).active == "schema"
        tree = app.screen.query_one("#schema-tree")
        labels = [str(n.label) for n in tree.root.children]
        assert labels[0] == "Tables (13)" and labels[1].startswith("Foreign-key graph")
        loans = next(n for n in tree.root.children[0].children if str(n.label) == "loans")
        assert any("→ copies.id" in str(c.label) for c in loans.children)
        assert any("PK" in str(c.label) for c in loans.children)
        assert "CREATE TABLE branches" in detail_text(app, "#schema-detail")


async def test_data_tab_pages_and_read_only_sql(tmp_path):
    data = make_big_table_env(tmp_path)
    app = AwmApp([str(data)], cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot)
        await pilot.press("3")
        await settle(app, pilot)
        grid = app.screen.query_one("#data-grid", DataTable)
        assert grid.row_count == 50 and "rows 1–50 of 120 · page 1/3" in text_of(app, "#data-status")
        await pilot.press("n", "n", "n")
        await settle(app, pilot)
        assert grid.row_count == 20 and "page 3/3" in text_of(app, "#data-status")
        await pilot.press("p")
        await settle(app, pilot)
        assert "rows 51–100" in text_of(app, "#data-status")
        await pilot.press("ctrl+e", *"SELECT COUNT(*) AS n FROM items WHERE id > 100", "enter")
        await settle(app, pilot)
        assert grid.get_row_at(0) == ["20"] and "query: 1 rows" in text_of(app, "#data-status")
        sql = app.screen.query_one("#sql", Input)
        sql.value = "DELETE FROM items"
        await pilot.press("enter")
        await settle(app, pilot)
        assert "not authorized" in text_of(app, "#data-status").lower()
        sql.value = "SELEC nonsense"
        await pilot.press("enter")
        await settle(app, pilot)
        assert "OperationalError" in text_of(app, "#data-status")


async def test_sql_box_denies_attach_and_vacuum_into_and_stops_runaway_queries(tmp_path, monkeypatch):
    import awm_tui.screens.environment as environment

    monkeypatch.setattr(environment, "SQL_SECONDS", 1.0)
    data = make_big_table_env(tmp_path / "data")
    attached, copy = tmp_path / "attached.db", tmp_path / "copy.db"
    app = AwmApp([str(data)], cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot)
        await pilot.press("3")
        await settle(app, pilot)
        await pilot.press("ctrl+e")
        sql = app.screen.query_one("#sql", Input)
        for statement in (f"ATTACH DATABASE '{attached}' AS x", f"VACUUM INTO '{copy}'"):
            sql.value = statement
            await pilot.press("enter")
            await settle(app, pilot)
            assert "authoriz" in text_of(app, "#data-status").lower(), statement
        assert not attached.exists() and not copy.exists()
        sql.value = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
        await pilot.press("enter")
        await settle(app, pilot)
        assert "stopped after 1s" in text_of(app, "#data-status")
        sql.value = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
        await pilot.press("enter")  # still running when the app quits: quitting must not wait for it
    assert not app.is_running


async def test_tools_tab_schema_and_source():
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_env(app, pilot, "library")
        await pilot.press("4")
        tools = app.screen.query_one("#tool-list", OptionList)
        tools.focus()
        tools.highlighted = [i for i in range(tools.option_count)
                             if "place_hold" in str(tools.get_option_at_index(i).prompt)][0]
        await pilot.pause()
        text = detail_text(app, "#tool-detail")
        assert "POST /api/holds" in text or "place_hold" in text
        assert "pickup_branch_id" in text and "title_id" in text
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "async def place_hold" in detail_text(app, "#tool-detail")


async def test_tasks_tab_shows_both_verifiers_and_the_solution():
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_env(app, pilot, "store")
        await pilot.press("5")
        tasks = app.screen.query_one("#task-list", OptionList)
        tasks.focus()
        tasks.highlighted = 3
        await pilot.pause()
        text = detail_text(app, "#task-detail")
        assert "Task 3" in text and "def verify_task(" in text and "def verify_task_completion(" in text
        assert "Reference solution" in text and '"calls"' in text


async def test_real_environments_all_tabs(awm_real):
    app = AwmApp([str(awm_real)], cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for key in ("gofundme", "rover", "surveymonkey_apply"):
            app.open_environment(key)
            await settle(app, pilot)
            for tab in "12345":
                await pilot.press(tab)
                await settle(app, pilot)
            assert app.screen.query_one("#data-grid", DataTable).row_count > 0
            assert len(app.screen.tools) == app.screen.scenario.tool_count
            if key == "surveymonkey_apply":
                assert "22 INSERTs failed at build" in text_of(app, "#data-status")
            await pilot.press("escape")
            await settle(app, pilot)


async def test_help_lists_every_action_and_keymap_override(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('[keys]\n"catalog.search" = "f"\n"not.an.action" = "x"\n')
    monkeypatch.setenv("AWM_CONFIG", str(config))
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.keymap == {"catalog.search": "f"}
        await pilot.press("f", *"sky")
        assert app.screen.query_one(VirtualTable).row_count == 1
        app.screen.query_one(VirtualTable).focus()
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        from rich.console import Console
        console = Console(width=200, record=True)
        console.print(app.screen.query_one(Static).content)
        text = console.export_text()
        assert all(a.id in text for a in ACTIONS)
        await pilot.press("escape")
        assert isinstance(app.screen, CatalogScreen)


async def test_command_palette_opens_an_environment():
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+p", *"open: sprintboard")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, EnvironmentScreen)
        assert app.screen.scenario.key == "sprintboard_project_tracker"


def make_big_table_env(tmp_path: Path) -> Path:
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from tinyenv import make_env_dir
    d = make_env_dir(tmp_path / "big", {"Big Table": ""})
    schema = {"tables": [{"name": "items", "ddl": "CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT);"}]}
    sample = {"tables": [{"table_name": "items", "insert_statements": [
        f"INSERT INTO items (id, label) VALUES ({i}, 'item {i}');" for i in range(1, 121)]}]}
    (d / "gen_db.jsonl").write_text(json.dumps({"scenario": "Big Table", "db_schema": schema}) + "\n")
    (d / "gen_sample.jsonl").write_text(json.dumps({"scenario": "Big Table", "sample_data": sample}) + "\n")
    return d


# -- SVG snapshots at a fixed size -----------------------------------------------------------------

def snapshot_app():
    return AwmApp(None, cursor_blink=False)


async def _to_env(pilot, tab: str | None = None):
    app = pilot.app
    await settle(app, pilot)
    app.open_environment("maple_library_lending")
    await settle(app, pilot)
    if tab:
        await pilot.press(tab)
        await settle(app, pilot)


def test_snapshot_catalog(snap_compare):
    async def run_before(pilot):
        await settle(pilot.app, pilot)
    assert snap_compare(snapshot_app(), terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("tab", ["1", "2", "3", "4", "5"])
def test_snapshot_environment_tabs(snap_compare, tab):
    async def run_before(pilot):
        await _to_env(pilot, tab)
    assert snap_compare(snapshot_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_help(snap_compare):
    async def run_before(pilot):
        await settle(pilot.app, pilot)
        await pilot.press("f1")
        await pilot.pause()
    assert snap_compare(snapshot_app(), terminal_size=SIZE, run_before=run_before)


async def test_health_column_shows_env_test_results(capsys):
    import asyncio

    from awm_engine.cli import main as awm

    assert await asyncio.to_thread(awm, ["env", "test", "--scenario", "maple_library_lending", "--workers", "1",
                                         "--json"]) == 0
    report = json.loads(capsys.readouterr().out)[0]
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one(VirtualTable)
        rows = {r[0]: r for r in (table.get_row_at(i) for i in range(table.row_count))}
        assert rows["maple_library_lending"][7] == f"{report['status']} {report['calls_ok']}/{report['get_tools']}"
        assert rows["pinecrest_online_store"][7] == "—"
