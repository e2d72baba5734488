"""The TUI at 80×24 (issue 27 item 4): the columns a user acts on are on screen without horizontal scrolling
(the catalog's keys, health and problems), a tool's parameter names are never cut, the verdict of a run with a 500
leads with label, reward and the environment's exception, and the replay diff is readable. SVG snapshots pin the
four screens; assertions pin what each must show."""
import asyncio
import sys
from pathlib import Path

import test_tui_snapshots
from test_tui_snapshots import RUNS, make_app, neutralise, plain, settle, tmp_prefixes, wait_until
from textual.widgets import OptionList, Static
from tinyenv import BOOM, DUPLICATE, make_env_dir

from awm_engine.agent.policies import AssistantTurn, NativeCall, ScriptedTurns
from awm_engine.agent.rollout import AgentConfig
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import make_policy, run_episode
from awm_tui.app import AwmApp
from awm_tui.screens.replay import ReplayScreen
from awm_tui.widgets.virtual_table import VirtualTable

SIZE = (80, 24)
workdir = test_tui_snapshots.workdir  # the same fixture: a temporary directory, fixed run names and timings
REPO = str(Path(__file__).resolve().parent.parent)


def neutral_paths(screen, workdir: Path) -> None:
    for prefix in tmp_prefixes(workdir):
        neutralise(screen, prefix)
    for prefix in dict.fromkeys([sys.prefix, REPO]):
        neutralise(screen, prefix, "<prefix>")


def test_snapshot_catalog_at_80x24(snap_compare, workdir):
    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: app.catalog is not None and app.screen.rows, what="the catalog")
        table = app.screen.query_one("#catalog", VirtualTable)
        await wait_until(pilot, lambda: table.size.width > 0)
        shown = [c for c, w in zip(table.columns, table.widths) if w]
        assert {"scenario", "health", "problems"} <= set(shown)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # no horizontal scrolling
        key_width = table.widths[0]
        assert all(len(row[0]) <= key_width for row in table.rows)  # keys never cut

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_tools_tab_at_80x24(snap_compare, workdir):
    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: app.catalog is not None, what="the catalog")
        app.open_environment("pinecrest_online_store")
        await wait_until(pilot, lambda: app.screen.query("#tool-list"), what="the environment")
        await pilot.press("4")
        tools = app.screen.query_one("#tool-list", OptionList)
        await wait_until(pilot, lambda: tools.option_count > 0, what="the tools")
        tools.highlighted = [str(tools.get_option_at_index(i).id) for i in range(tools.option_count)].index(
            next(str(tools.get_option_at_index(i).id) for i in range(tools.option_count)
                 if "update_address" in str(tools.get_option_at_index(i).prompt)))
        detail = app.screen.query_one("#tool-detail", Static)
        await wait_until(pilot, lambda: "recipient_name" in plain_of(detail), what="the tool's parameters")
        text = plain_of(detail)
        for name in ("label", "recipient_name", "postal_code", "is_default", "address_id"):
            assert name in text  # whole names, never "rec…"
        assert "…" not in text

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def plain_of(static: Static) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(static.content)
    return console.export_text()


def test_snapshot_verdict_with_a_500_at_80x24(snap_compare, workdir):
    data = make_env_dir(workdir / "data", {"boom": BOOM + DUPLICATE})
    catalog = Catalog.load([data])
    run_dir = RUNS / "agents" / "with-500"
    turns = [AssistantTurn("", [NativeCall("c1", "add_first_again", "{}")])]
    asyncio.run(run_episode(catalog, catalog.get("boom"), 0, ScriptedTurns(turns, "I could not add it."),
                            AgentConfig(mode="native"), run_dir, verify_mode=None))

    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.run is not None,
                         what="the replay")
        screen = app.screen
        state = screen.query_one("#replay-state", Static)
        await wait_until(pilot, lambda: "rebuilding" not in plain(state) and plain(state), what="the re-execution")
        from awm_tui.widgets.verdict import SideBySide

        side = screen.query_one(SideBySide)
        side.show_report({"label": "others", "reward": 0.0}, 1, "final_answer")
        await pilot.press("v")
        verdict = side.query_one("#verdict", Static)
        await wait_until(pilot, lambda: "IntegrityError" in plain_of(verdict), what="the verdict")
        lines = [line for line in plain_of(verdict).splitlines() if line.strip()]
        assert lines[0].startswith("Verdict  label others   reward 0.0")
        assert "IntegrityError: UNIQUE constraint failed: notes.id" in lines[2]
        neutral_paths(screen, workdir)
        await pilot.pause()

    app = AwmApp([str(data)], cursor_blink=False, runs_root=RUNS, replay=run_dir)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_replay_diff_at_80x24(snap_compare, workdir):
    run_dir = RUNS / "agents" / "oracle-run"
    catalog = Catalog.load()
    scenario = catalog.get("maple_library_lending")
    outcome = asyncio.run(run_episode(catalog, scenario, 3, make_policy("oracle", scenario, 3), run_dir=run_dir))
    assert outcome.verification.label == "complete"

    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen), what="the replay screen")
        screen = app.screen
        state = screen.query_one("#replay-state", Static)
        await wait_until(pilot, lambda: "re-execution" in plain(state), what="the intermediate states")
        write = [s.tool for s in screen.run.steps].index("renew_loan")
        for _ in range(write):
            await pilot.press("right")
        await wait_until(pilot, lambda: screen.current == write)
        await settle(pilot)
        rows = screen.query_one("#step-diff").query_one(".diff-rows", Static)  # a narrow pane: rows as lines
        text = plain_of(rows)
        assert "due_date: 2026-03-20 → 2026-04-03" in text and "renewal_count: 0 → 1" in text

    assert snap_compare(make_app(replay=run_dir), terminal_size=SIZE, run_before=run_before)
