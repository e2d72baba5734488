"""The TUI names every sandbox protection that is off: in the header and a notification, measured at start."""
from __future__ import annotations

from awm_engine.sandbox import host
from awm_tui.app import AwmApp


async def test_protections_that_are_off_are_named_in_the_header(monkeypatch):
    monkeypatch.setenv("AWM_SANDBOX", "off-landlock")
    monkeypatch.setattr(host, "_measured", {})
    host.landlock_abi.cache_clear()
    try:
        app = AwmApp(None)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            for _ in range(100):
                if app.sandbox_summary:
                    break
                await pilot.pause(0.05)
            assert "OFF" in app.sandbox_summary and "writes confined" in app.sandbox_summary
            assert app.sub_title == app.sandbox_summary
            assert any("writes confined" in str(n.message) for n in app._notifications)
    finally:
        host.landlock_abi.cache_clear()
        monkeypatch.setattr(host, "_measured", {})
