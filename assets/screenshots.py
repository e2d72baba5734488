"""Regenerate the README screenshots: .venv/bin/python assets/screenshots.py (SVG, 130x40, sample envs)."""
import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from awm_tui.app import AwmApp  # noqa: E402

SHOTS = [("catalog", None), ("overview", "1"), ("schema", "2"), ("data", "3"), ("tools", "4"), ("tasks", "5")]


async def main() -> None:
    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=(130, 40)) as pilot:
        async def settle():
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()

        await settle()
        app.save_screenshot(str(HERE / "catalog.svg"))
        app.open_environment("maple_library_lending")
        await settle()
        for name, key in SHOTS[1:]:
            await pilot.press(key)
            await settle()
            if name == "tools":
                await pilot.press("ctrl+s")
                await settle()
            app.save_screenshot(str(HERE / f"{name}.svg"))
        await pilot.press("f1")
        await settle()
        app.save_screenshot(str(HERE / "help.svg"))


if __name__ == "__main__":
    asyncio.run(main())
