"""The TUI starts headless on a data directory and filters as you type."""
from textual.widgets import DataTable

from awm_tui.app import AwmApp


async def test_catalog_lists_and_filters_sample_envs():
    app = AwmApp(None)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(DataTable)
        assert table.row_count == 5
        await pilot.press("slash", "l", "i", "b")
        await pilot.pause()
        assert table.row_count == 1
        await pilot.press("ctrl+q")


async def test_catalog_on_real_data(awm_real):
    app = AwmApp([str(awm_real)])
    async with app.run_test(size=(120, 30)) as pilot:
        assert app.query_one(DataTable).row_count == 3
        await pilot.press("ctrl+q")
