"""Found by a new user (newuser12): each item with a Pilot test that failed before its fix. Tests wait on
conditions, never on fixed pauses; keys are queued at full speed with ``burst``."""
from __future__ import annotations

from test_tui_play_typing import burst, wait_until
from textual.widgets import Input, Static

from awm_tui.app import AwmApp
from awm_tui.screens.environment import EnvironmentScreen

SIZE = (120, 36)


def _text(widget) -> str:
    return str(widget.render())


async def test_sql_typed_right_after_ctrl_e_lands_in_the_sql_box(tmp_path):
    """ctrl+e then a query typed at once: the letters went to the pane that had the focus before ctrl+e (and were
    lost), and enter ran nothing; they land in the SQL box, and enter runs the query."""
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
        app.open_environment("pinecrest_online_store")
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen) and app.screen.db_path is not None)
        screen = app.screen
        burst(app, ["ctrl+e", *"select count(*) as n from orders", "enter"])
        await wait_until(pilot, lambda: "query: 1 rows" in _text(screen.query_one("#data-status", Static)))
        assert screen.query_one("#sql", Input).value == "select count(*) as n from orders"
        # ctrl+e in the box is still its End key
        burst(app, ["home", "ctrl+e", "x"])
        await wait_until(pilot, lambda: screen.query_one("#sql", Input).value.endswith("x"))
        assert screen.query_one("#sql", Input).value == "select count(*) as n from ordersx"


async def test_replay_steps_typed_at_once_settle_on_the_last_one(tmp_path):
    """→ → typed at once (or → held) in the replay: each step's highlight message arrived after the next step was
    shown and moved the replay back to it, which moved it forward again: the replay swung between two steps for
    ever, recomposing the diff each time (the UI never went idle). It settles on the step the keys reach."""
    from test_tui_narrow import oracle_run, replay_ready
    from textual.widgets import OptionList

    run = await oracle_run(tmp_path)
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await replay_ready(pilot, run)
        last = len(screen.run.steps) - 1
        assert last >= 2
        shown = []
        show_step = screen.show_step
        screen.show_step = lambda index: (shown.append(index), show_step(index))
        burst(app, ["right"] * last)
        await wait_until(pilot, lambda: screen.current == last)
        await pilot.pause()  # until every message is handled (it timed out: the swing never ended)
        assert screen.current == last and screen.query_one("#steps", OptionList).highlighted == last
        assert shown == list(range(1, last + 1))


async def test_rollout_keys_typed_right_after_ctrl_o_open_that_rollout(tmp_path):
    """In the evaluation dashboard, ctrl+o ↓ ↓ enter typed at once: the arrows and enter went to the runs list
    (focused before ctrl+o) and nothing opened; they move in the rollouts and enter replays the third one."""
    import asyncio

    from awm_engine.cli import main as awm
    from awm_tui.screens.replay import ReplayScreen

    out = tmp_path / "eval" / "oracle"
    args = ["eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "-k", "1", "--concurrency",
            "1", "--workers", "1", "--out", str(out), "--quiet"]
    assert await asyncio.to_thread(awm, args) == 0
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
        app.open_evaluations(out)
        await wait_until(pilot, lambda: app.screen.query("#rollout-table")
                         and app.screen.query_one("#rollout-table").row_count >= 3)
        burst(app, ["ctrl+o", "down", "down", "enter"])
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.run.states)
        assert app.screen.run.task_id == 2


async def test_tau2_tab_keys_focus_the_tab_and_show_its_first_item(tmp_path):
    """A τ² domain's 2/4/5 switched the tab but left the focus where it was: the detail pane stayed empty, ↓ did not
    move in the list, and ctrl+g played a task nothing showed (index 0). As in an AWM environment, the tab's list
    gets the focus and shows its highlighted item; ↓ moves to the next. The task list's summaries that are cut end
    in … (an order id cut silently read as a whole one)."""
    from awm_engine.bench.tau2.data import Tau2Data
    from awm_tui.screens.tau2 import Tau2Screen
    from tests.test_tau2_domains import FIXTURE
    from tests.test_tui_tau2 import text_of
    from textual.widgets import OptionList

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, tau2_data=Tau2Data(FIXTURE))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
        app.open_environment("tau2_airline")
        await wait_until(pilot, lambda: isinstance(app.screen, Tau2Screen) and app.screen.query("#tau2-task-list"))
        screen = app.screen
        tasks = screen.scenario.tau2_tasks
        burst(app, ["5", "down"])
        await wait_until(pilot, lambda: screen.query_one("#tau2-task-list", OptionList).highlighted == 1)
        assert app.focused is screen.query_one("#tau2-task-list", OptionList)
        await wait_until(pilot, lambda: tasks[1].id in text_of(screen.query_one("#tau2-task-detail", Static)))
        assert screen._selected_task() is tasks[1]
        burst(app, ["4"])
        await wait_until(pilot, lambda: text_of(screen.query_one("#tau2-tool-detail", Static)).strip())
        for i, task in enumerate(tasks):
            label = str(screen.query_one("#tau2-task-list", OptionList).get_option_at_index(i).prompt)
            assert len(task.summary) <= 28 or "…" in label


async def test_letters_typed_right_after_ctrl_p_are_the_palettes_search(tmp_path):
    """ctrl+p then "open: pinecr" enter typed at once: the letters went to the catalog below the palette opening (r
    reversed its sort, the rest were lost) and enter ran the palette's first entry; they are the palette's search,
    and enter opens that environment."""
    from textual.command import CommandPalette

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
        catalog = app.screen
        burst(app, ["ctrl+p", *"open: pinecr"])
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette)
                         and app.screen.query_one(Input).value == "open: pinecr")
        assert not catalog.sort_reverse  # the r of "pinecr" is the search's, not the catalog's reverse
        burst(app, ["enter"])
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen) and app.screen.db_path is not None)
        assert app.screen.scenario.key == "pinecrest_online_store"
