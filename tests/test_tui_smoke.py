"""The TUI starts headless on a data directory and filters as you type."""
from awm_tui.app import AwmApp
from awm_tui.widgets.virtual_table import VirtualTable


async def test_catalog_lists_and_filters_sample_envs():
    app = AwmApp(None)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one(VirtualTable)
        assert table.row_count == 5
        await pilot.press("slash", "l", "i", "b")
        await pilot.pause()
        assert table.row_count == 1
        await pilot.press("ctrl+q")


async def test_catalog_on_real_data(awm_real):
    app = AwmApp([str(awm_real)])
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen.query_one(VirtualTable).row_count == 3
        await pilot.press("ctrl+q")
