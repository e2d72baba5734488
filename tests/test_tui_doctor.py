"""The TUI's Problems list (Overview tab), the catalog's problems column and ctrl+d, whose CLI twin is
``awm env doctor``: with Pilot, plus an SVG snapshot of the Problems list."""
from __future__ import annotations

from rich.console import Console
from test_doctor import write_data
from textual.widgets import Static

from awm_engine.cli import main as awm
from awm_tui.app import AwmApp
from awm_tui.screens.catalog import COLUMNS, CatalogScreen
from awm_tui.screens.environment import EnvironmentScreen
from awm_tui.widgets.virtual_table import VirtualTable

SIZE = (120, 36)


async def settle(app, pilot):
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def overview_text(app) -> str:
    console = Console(width=200, record=True)
    console.print(app.screen.query_one("#overview-body", Static).content)
    return console.export_text()


def cells(app) -> dict[str, list[str]]:
    table = app.screen.query_one(VirtualTable)
    return {r[0]: r for r in (table.get_row_at(i) for i in range(table.row_count))}


async def test_problems_column_sorting_and_overview_list(tmp_path):
    import asyncio

    data = write_data(tmp_path / "data")
    assert await asyncio.to_thread(awm, ["env", "doctor", "broken_build", "tool_trouble", "--data", str(data),
                                         "--workers", "1", "--json"]) == 0
    app = AwmApp([str(data)], cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        column = COLUMNS.index("problems")
        rows = cells(app)
        assert rows["broken_build"][column] == "5 (1 err)" and rows["tool_trouble"][column] == "3 (1 err)"
        assert rows["clean_notes"][column] == "—"  # never diagnosed
        for _ in range(column):  # s cycles the sort column up to "problems"
            await pilot.press("s")
        await pilot.press("r")  # most problems first
        table = app.screen.query_one(VirtualTable)
        assert [table.get_row_at(i)[0] for i in range(2)] == ["broken_build", "tool_trouble"]
        assert "sorted by problems ↓" in str(app.screen.query_one("#status", Static).render())
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, EnvironmentScreen) and app.screen.scenario.key == "broken_build"
        text = overview_text(app)
        assert "Problems  1 error · 3 warnings · 1 info" in text and "from awm env doctor broken_build" in text
        for needle in ("failed_ddl", "table tags", "costs 4 rows", "CREATE TABLE tags", "failed_insert",
                       "UNIQUE constraint failed", "time_dependent"):
            assert needle in text, needle


async def test_ctrl_d_diagnoses_and_the_catalog_follows(tmp_path):
    data = write_data(tmp_path / "data")
    app = AwmApp([str(data)], cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", *"verifier", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, EnvironmentScreen)
        text = overview_text(app)
        assert "static checks only" in text and "ctrl+d" in text
        assert "solved_at_start" not in text  # needs the verifiers run
        await pilot.press("5")  # from another tab: ctrl+d shows the Overview
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert app.screen.query_one("#tabs").active == "overview"
        await settle(app, pilot)
        text = overview_text(app)
        assert "from awm env doctor verifier_trouble" in text
        for needle in ("solved_at_start", "task 0 (code)", "verifier_error", "fails to load", "no_verifier",
                       "task 2", "data_issue"):
            assert needle in text, needle
        await pilot.press("escape")
        await settle(app, pilot)
        assert isinstance(app.screen, CatalogScreen)
        assert cells(app)["verifier_trouble"][COLUMNS.index("problems")] == "6 (4 err)"


def test_snapshot_problems_list(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # paths shown relative: the same picture on every machine
    write_data(tmp_path / "data")
    assert awm(["env", "doctor", "verifier_trouble", "--data", "data", "--workers", "1", "--json"]) == 0

    async def run_before(pilot):
        await settle(pilot.app, pilot)
        pilot.app.open_environment("verifier_trouble")
        await settle(pilot.app, pilot)

    assert snap_compare(AwmApp(["data"], cursor_blink=False), terminal_size=SIZE, run_before=run_before)
