"""The TUI in an 80×24 terminal, the smallest common one: every screen's footer shows all its keys (at 60 columns,
the key help "? Keys" and the others that fit whole), the rows of controls wrap instead of pushing a button off the
screen, and ctrl+e opens the dashboard from the search box."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_tui_snapshots import settle, wait_until
from textual.widgets import Button, Footer, Input
from textual.widgets._footer import FooterKey

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import make_policy, run_episode
from awm_tui.app import AwmApp
from awm_tui.screens.evals import EvalScreen
from awm_tui.screens.help import HelpScreen
from awm_tui.screens.play import PlayScreen
from awm_tui.screens.replay import ReplayScreen
from awm_tui.screens.rollout import RolloutScreen

SIZE = (80, 24)
ENV = "maple_library_lending"


def hidden_footer_keys(screen, width: int = SIZE[0], left_out: bool = True) -> list[str]:
    """The footer's keys (not the palette's, kept on the right) that do not fit beside the palette's key, or
    (``left_out``) that the footer left out for want of room."""
    keys = list(screen.query_one(Footer).query(FooterKey))
    palette = [k for k in keys if k.has_class("-command-palette")]
    limit = min(k.region.x for k in palette) if palette else width
    return [f"{k.key_display} {k.description}" for k in keys if k not in palette and (
        (k.display or left_out) and (k.region.width == 0 or k.region.right > limit))]


def inside(widget, size=SIZE) -> bool:
    r = widget.region
    return r.width > 0 and r.height > 0 and r.right <= size[0] and r.bottom <= size[1] - 1  # above the footer


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return Path("runs")


async def oracle_run(runs: Path) -> Path:
    catalog = Catalog.load()
    scenario = catalog.get(ENV)
    run_dir = runs / "agents" / "oracle"
    await run_episode(catalog, scenario, 3, make_policy("oracle", scenario, 3), run_dir=run_dir)
    return run_dir


async def replay_ready(pilot, run_dir: Path) -> ReplayScreen:
    """The replay of ``run_dir``, opened once the catalog is read, when its states are rebuilt."""
    app = pilot.app
    await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog), timeout=90, what="the catalog")
    app.open_replay(run_dir)
    await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.run.states, timeout=90,
                     what="the replay's states")
    return app.screen


async def test_ctrl_e_in_the_search_box_opens_the_dashboard(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"maple")
        search = app.screen.query_one("#search", Input)
        assert app.focused is search and search.value == "maple"
        await pilot.press("ctrl+e")
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen), what="the dashboard")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen.query_one("#search", Input).value == "maple"  # the filter is kept


async def test_typing_in_the_search_box_fires_no_catalog_key(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("slash", *"sr")  # s sorts and r reverses, but not while typing
        await pilot.pause()
        assert screen.query_one("#search", Input).value == "sr"
        assert (screen.sort_column, screen.sort_reverse) == (0, False)


async def open_screen(pilot, which: str, runs: Path):
    app = pilot.app
    await settle(pilot)
    scenario = app.catalog.get(ENV)
    if which == "environment":
        app.open_environment(ENV)
    elif which == "play":
        app.push_screen(PlayScreen(scenario, 3))
    elif which == "rollout":
        app.push_screen(RolloutScreen(scenario, 3))
    elif which == "replay":
        app.open_replay(await oracle_run(runs))
    elif which == "evals":
        args = ["eval", "run", "--policy", "oracle", "--scenario", ENV, "-k", "1", "--concurrency", "1",
                "--workers", "1", "--out", str(runs / "eval" / "oracle"), "--quiet"]
        assert await asyncio.to_thread(awm, args) == 0
        app.open_evaluations()
    elif which == "report":
        app.open_report([])
    elif which == "gen":
        from awm_tui.screens.gen import GenRunScreen

        app.push_screen(GenRunScreen(runs / "gen-not-yet"))
    if which == "play":  # its episode stays open in a worker
        await wait_until(pilot, lambda: app.screen.tools, what="the episode and its tools")
    elif which != "rollout":
        await settle(pilot)
    # the footer is laid out (a condition, not a pause: on a busy machine the first layout comes late)
    await wait_until(pilot, lambda: footer_laid_out(app.screen), what="the footer's keys laid out")


def footer_laid_out(screen) -> bool:
    keys = [k for k in screen.query(FooterKey) if k.display]  # not those left out for want of room
    return bool(keys) and all(k.region.width > 0 for k in keys)  # a key that never gets a place fails the test


SCREENS = ["catalog", "environment", "play", "rollout", "replay", "evals", "report", "gen"]


@pytest.mark.parametrize("which", SCREENS)
async def test_every_footer_key_shows_at_80_columns(which, runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(pilot, which, runs)
        assert app.screen.has_class("-narrow", "-short")
        assert hidden_footer_keys(app.screen) == []  # "? Keys" among them


@pytest.mark.parametrize("which", SCREENS)
async def test_the_key_help_shows_at_60_columns(which, runs):
    """At 60 columns the footer cut "? Keys" off (the way to every key, those it has no room for too): it shows it
    whole, and leaves out the keys it has no room for (Quit, then the screen's from the right; esc Back last) rather
    than showing one cut."""
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=(60, 24)) as pilot:
        await open_screen(pilot, which, runs)
        footer = app.screen.query_one(Footer)
        shown = [f"{k.key_display} {k.description}" for k in footer.query(FooterKey) if k.display]
        assert "? Keys" in shown
        assert "esc Back" in shown or which == "catalog"  # the catalog has no way back
        assert hidden_footer_keys(app.screen, 60, left_out=False) == []
        await pilot.resize_terminal(*SIZE)  # widened: every key is back
        await wait_until(pilot, lambda: hidden_footer_keys(app.screen) == [], what="every footer key at 80 columns")


async def test_the_rollout_controls_wrap_and_start_stays_on_screen(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(pilot, "rollout", runs)
        screen = app.screen
        assert inside(screen.query_one("#start", Button))
        assert screen.query_one("#base-url", Input).region.width >= 30  # room to read a URL
        assert inside(screen.query_one("#transcript"))


async def test_the_play_answer_field_is_wide_enough_to_type_in(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(pilot, "play", runs)
        screen = app.screen
        answer = screen.query_one("#answer", Input)
        assert answer.region.width >= 20 and inside(answer)
        assert inside(screen.query_one("#submit", Button)) and inside(screen.query_one("#call", Button))


async def test_the_dashboard_shows_both_tables_at_24_rows(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(pilot, "evals", runs)
        screen = app.screen
        await wait_until(pilot, lambda: screen.query_one("#rollout-table").row_count == 10, what="the rollouts")
        for table in ("#scenario-table", "#rollout-table"):
            assert inside(screen.query_one(table)) and screen.query_one(table).region.height >= 5, table


async def test_replay_and_tasks_give_the_detail_its_room(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(pilot, "replay", runs)
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        assert screen.query_one("#step-detail").region.width >= 24
        assert screen.query_one("#step-diff").region.width >= 24
        await pilot.press("escape")
        app.open_environment(ENV)
        await settle(pilot)
        await pilot.press("5")
        await pilot.pause()
        assert app.screen.query_one("#task-right").region.width >= 36
        await pilot.press("4")
        await pilot.pause()
        assert app.screen.query_one("#tool-right").region.width >= 36


async def test_help_uses_the_whole_80_columns(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.query_one("VerticalScroll").region.width == SIZE[0]


async def test_wide_terminals_keep_the_wide_layout(runs):
    app = AwmApp(None, cursor_blink=False, runs_root=runs)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "environment", runs)
        assert app.screen.has_class("-wide", "-tall") and not app.screen.has_class("-narrow")
        await pilot.press("4")
        await pilot.pause()
        assert app.screen.query_one("#tool-list").region.width == 45
