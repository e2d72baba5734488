"""Rough edges of play (issue 27 item 5), each pinned: esc mid-episode asks first; after the verdict the footer no
longer offers call/answer; the tool list is in the Tools tab's order; ctrl+o folds and unfolds the last result; the
SQL box's example names a table the environment has."""
import json

from textual.widgets import Collapsible, Input, OptionList

from awm_tui.app import AwmApp
from awm_tui.screens.play import PlayScreen

ENV = "maple_library_lending"


async def wait_until(pilot, predicate, timeout=90.0, what="the UI"):
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def open_play(app, pilot, task=3):
    await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
    scenario = app.catalog.get(ENV)
    app.open_environment(ENV)
    await wait_until(pilot, lambda: app.screen.query("#tool-list"))
    env_screen = app.screen
    app.push_screen(PlayScreen(scenario, task))
    await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.tools
                     and not app.screen.holding)
    return env_screen, app.screen


def footer_actions(screen) -> set[str]:
    return {b.binding.action for b in screen.app.active_bindings.values() if b.enabled and b.binding.show}


async def test_esc_mid_episode_asks_first_and_any_other_key_keeps_playing(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        env_screen, screen = await open_play(app, pilot)
        await pilot.press("escape")
        await wait_until(pilot, lambda: any("esc again leaves" in n.message for n in app._notifications))
        assert app.screen is screen
        await pilot.press("down")  # another key: the question is dropped
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is env_screen, what="leaving on the second esc")
        # saved as abandoned: no final answer, no verdict (the replay list and eval reports say "abandoned")
        found = lambda: list(tmp_path.rglob("trajectory.json"))  # noqa: E731
        await wait_until(pilot, found, what="the abandoned run's trajectory")
        trajectory = json.loads(found()[0].read_text())
        assert trajectory["awm"]["stop_reason"] == "abandoned" and not trajectory["awm"]["final_answer"], trajectory["awm"]
        assert not list(tmp_path.rglob("verification*.json"))


async def test_after_the_verdict_call_and_answer_are_not_offered(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        _, screen = await open_play(app, pilot)
        assert {"call_tool", "submit_answer"} <= footer_actions(screen)
        screen.query_one("#answer", Input).value = "nothing to do"
        await pilot.press("ctrl+f")
        await wait_until(pilot, lambda: screen.reports is not None, what="the verdict")
        await wait_until(pilot, lambda: not {"call_tool", "submit_answer"} & footer_actions(screen),
                         what="the footer without call/answer")
        await pilot.press("escape")  # the episode is over: esc leaves at once
        await wait_until(pilot, lambda: not isinstance(app.screen, PlayScreen))


async def test_the_tool_list_is_in_the_tools_tabs_order(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        env_screen, screen = await open_play(app, pilot)
        tab = [t.name for t in env_screen.tools if not t.shadowed_by]
        play = [t["name"] for t in screen.tools]
        assert [n for n in tab if n in play] == [n for n in play if n in tab]
        listed = screen.query_one("#play-tools", OptionList)
        assert [str(listed.get_option_at_index(i).id) for i in range(listed.option_count)] == play


async def test_ctrl_o_folds_and_unfolds_the_last_result(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        _, screen = await open_play(app, pilot)
        tools = screen.query_one("#play-tools", OptionList)
        tools.highlighted = [t["name"] for t in screen.tools].index("list_my_loans")
        await wait_until(pilot, lambda: (screen.current or {}).get("name") == "list_my_loans" and not screen.holding)
        await pilot.press("ctrl+j")
        transcript = screen.query_one("#transcript")
        await wait_until(pilot, lambda: transcript.query(Collapsible), what="a folded result")
        fold = transcript.query(Collapsible).last()
        assert fold.collapsed
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: not fold.collapsed)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: fold.collapsed)


async def test_the_sql_example_names_a_table_of_the_environment(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
        app.open_environment(ENV)
        await wait_until(pilot, lambda: app.screen.query("#sql"))
        box = app.screen.query_one("#sql", Input)
        await wait_until(pilot, lambda: "SELECT * FROM" in str(box.placeholder), what="the example")
        tables = {t.name for t in app.catalog.get(ENV).tables()}
        named = str(box.placeholder).split("FROM ", 1)[1].split()[0]
        assert named in tables


async def test_the_first_down_on_the_tasks_tab_moves_to_the_second_task(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))
        app.open_environment(ENV)
        await wait_until(pilot, lambda: app.screen.query("#task-list"))
        tasks = app.screen.query_one("#task-list", OptionList)
        await wait_until(pilot, lambda: tasks.option_count > 1)
        await pilot.press("5")
        await wait_until(pilot, lambda: tasks.has_focus)
        await pilot.press("down")
        await wait_until(pilot, lambda: tasks.highlighted == 1, what="the second task highlighted")
