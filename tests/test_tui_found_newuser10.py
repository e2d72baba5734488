"""Found by a new user on real data (newuser10): each item with a test that failed before its fix. Pilot tests wait
on conditions, never on fixed pauses."""
from __future__ import annotations

import json

from test_tui_play_typing import burst, events_of, open_play, typed_keys, wait_until
from textual.widgets import Input

from awm_tui.app import AwmApp

SIZE = (140, 42)


def _notified(app, needle: str) -> bool:
    return any(needle in str(n.message) for n in app._notifications)


async def test_a_number_typed_into_an_integer_field_is_never_sent_as_another_number(tmp_path):
    """Typed fast into an integer field, "3.5" was sent as 35 (the field silently dropped the "."); it is kept as
    typed, refused with the field's name, and nothing is called until it is an integer."""
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(app, pilot, "maple_library_lending")
        burst(app, typed_keys(screen.tools, "renew_loan", {"loan_id": "3.5"}))
        await wait_until(pilot, lambda: _notified(app, "loan_id"))
        field = screen.fields["loan_id"]
        assert field.value == "3.5"  # every key typed is kept
        assert not field.is_valid  # and the field says it is not an integer
        assert not events_of(screen, "ToolCall")  # nothing sent
        assert _notified(app, "'3.5' is not an integer")
        # corrected (ctrl+a selects all of the field, then the new value replaces it): called with exactly that
        burst(app, ["ctrl+a", "3", "ctrl+j"])
        await wait_until(pilot, lambda: events_of(screen, "Observation"))
        assert [c.arguments for c in events_of(screen, "ToolCall")] == [{"loan_id": 3}]


async def test_money_typed_into_a_number_field_is_refused_not_stripped(awm_real, tmp_path):
    """A real environment's number field (rover's search radius): "$2" was sent as 2.0, "nan" as NaN (no JSON)."""
    app = AwmApp([str(awm_real)], cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(app, pilot, "rover")
        tool = next(t for t in screen.tools if t["name"] == "search_walkers")
        values = {name: "" for name in tool["inputSchema"]["properties"]}
        burst(app, typed_keys(screen.tools, "search_walkers", {**values, "service_radius_miles": "$2"}))
        await wait_until(pilot, lambda: _notified(app, "service_radius_miles: '$2' is not a number"))
        assert screen.fields["service_radius_miles"].value == "$2"
        field: Input = screen.fields["service_radius_miles"]
        field.value = "nan"
        burst(app, ["ctrl+j"])
        await wait_until(pilot, lambda: _notified(app, "'nan' is not a finite number"))
        assert not events_of(screen, "ToolCall")


async def test_live_rollout_n_after_a_run_to_the_end_starts_paused(tmp_path, monkeypatch):
    """r ran a rollout to the end (or x stopped it); the next n started a new run that also ran to the end, instead
    of pausing before its first step as n does ("n (start, then one step at a time)")."""
    from test_tui_friction import _call, _rollout_config, _state, open_rollout

    from awm_engine.agent.scripted_llm import FakeLLMServer

    script = {"responses": [{"content": _call("list_tools", {})}, {"content": "Nothing to renew."}]}
    with FakeLLMServer(script) as llm:
        _rollout_config(tmp_path, monkeypatch, llm.url)
        app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs")
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_rollout(pilot)
            await pilot.press("r")
            await wait_until(pilot, lambda: screen.reports is not None and not screen.running)
            await pilot.press("n")  # a new run: paused before its first step
            await wait_until(pilot, lambda: screen.generation == 2 and (
                "paused before the first step" in _state(screen) or screen.reports is not None))
            assert "paused before the first step" in _state(screen), _state(screen)
            assert len(llm.requests) == 2  # the first run's two turns; the new one has asked nothing yet
            await pilot.press("x")
            await wait_until(pilot, lambda: all(w.is_finished for w in screen.workers))
            await pilot.press("space")  # pause when nothing runs: the state still says it is stopped
            await pilot.pause()
            assert "stopped before the first step" in _state(screen), _state(screen)


async def test_a_rollout_stopped_from_outside_is_recorded_as_abandoned_not_max_turns(tmp_path):
    """x in a live rollout, quitting the TUI mid-play, Ctrl-C: the run was recorded with stop reason max_turns after
    one turn (of 200), so training exports and reports counted it as out of turns. Stopped both ways: while the
    policy is asked for a turn, and while the caller is handling an event (the TUI's step mode)."""
    import asyncio

    from awm_engine.agent.policies import AssistantTurn, HumanPolicy, NativeCall
    from awm_engine.agent.rollout import AgentConfig
    from awm_engine.data.catalog import Catalog
    from awm_engine.eval.episode import run_episode

    catalog = Catalog.load()
    scenario = catalog.get("maple_library_lending")
    config = AgentConfig(mode="native", max_turns=200, episode_timeout=None)
    for where in ("asking the policy", "handling an event"):
        policy, opened, stepped = HumanPolicy(), asyncio.Event(), asyncio.Event()
        policy.queue.put_nowait(AssistantTurn("", [NativeCall("c1", "list_my_loans", "{}")]))

        async def on_event(event, where=where):
            if type(event).__name__ == "Observation":
                stepped.set()
                if where == "handling an event":
                    await asyncio.Event().wait()  # the TUI's gate: paused until the next key

        run_dir = tmp_path / where.replace(" ", "_")
        task = asyncio.create_task(run_episode(catalog, scenario, 3, policy, config, run_dir, verify_mode=None,
                                               on_open=lambda episode: opened.set(), on_event=on_event))
        await asyncio.wait_for(stepped.wait(), 120)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        trajectory = json.loads((run_dir / "trajectory.json").read_text())
        assert trajectory["awm"]["stop_reason"] == "abandoned", (where, trajectory["awm"]["stop_reason"])
        finished = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
                    if '"rollout_finished"' in line]
        assert [f["stop_reason"] for f in finished] == ["abandoned"], where


async def test_replay_of_a_run_with_no_step_says_so_instead_of_computing_forever(tmp_path):
    """A play left before any call (saved as abandoned) replayed as an empty step list, an empty pane and a diff pane
    saying "computing…" for ever; awm replay says "0 steps: … recorded no turn"."""
    from awm_engine.agent.policies import HumanPolicy
    from awm_engine.agent.rollout import AgentConfig
    from awm_engine.data.catalog import Catalog
    from awm_engine.eval.episode import run_episode
    from awm_tui.screens.replay import ReplayScreen
    from rich.console import Console

    from awm_tui.widgets.diff_view import DiffView

    catalog = Catalog.load()
    policy = HumanPolicy()
    policy.abandon()  # left before the first call
    outcome = await run_episode(catalog, catalog.get("maple_library_lending"), 3, policy,
                                AgentConfig(mode="native", episode_timeout=None), tmp_path / "run", verify_mode=None)
    assert outcome.finished.stop_reason == "abandoned"
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, replay=tmp_path / "run")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen) and "re-execution" in str(
            app.screen.query_one("#replay-state").render()))
        screen = app.screen
        await wait_until(pilot, lambda: screen.query_one("#step-diff", DiffView).diff is not None)
        assert "recorded no turn (stop reason: abandoned)" in str(screen.query_one("#step-text").render())
        assert screen.query_one("#step-diff", DiffView).diff.is_empty
        # an abandoned run is never verified: not "not verified yet", as if a verdict were coming
        console = Console(width=200)
        with console.capture() as captured:
            console.print(screen.query_one("#verdict").content)
        verdict = captured.get()
        assert "never verified: the episode was abandoned" in verdict and "yet" not in verdict


async def test_replay_counts_one_step_as_one_step(tmp_path):
    """The replay's status line said "1 steps"."""
    from awm_engine.data.catalog import Catalog
    from awm_engine.eval.episode import make_policy, run_episode
    from awm_tui.screens.replay import ReplayScreen

    catalog = Catalog.load()
    scenario = catalog.get("maple_library_lending")
    outcome = await run_episode(catalog, scenario, 3, make_policy("immediate", scenario, 3), run_dir=tmp_path / "run",
                                verify_mode=None)
    assert outcome.finished.iterations == 1
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, replay=tmp_path / "run")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen) and "re-execution" in str(
            app.screen.query_one("#replay-state").render()))
        assert str(app.screen.query_one("#replay-state").render()).startswith("1 step · stop: final_answer")


def test_the_first_environment_opened_does_not_import_sqlite_utils_on_the_ui_thread(tmp_path):
    """Opening the first environment froze the UI for about a second (1.05 s on the real data, busy machine): its
    tables are introspected with sqlite_utils, which imports pandas, on the UI thread. The app imports it ahead in a
    worker thread. A fresh interpreter records on which thread the import happens."""
    import subprocess
    import sys

    code = """
import asyncio, sys, threading
seen = []
class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "sqlite_utils":
            seen.append("ui thread" if threading.current_thread() is threading.main_thread() else "worker")
        return None
sys.meta_path.insert(0, Hook())
from awm_tui.app import AwmApp
from awm_tui.screens.environment import EnvironmentScreen
async def main():
    app = AwmApp(None, cursor_blink=False, runs_root=sys.argv[1])
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(1200):  # the catalog read and every start-up worker done (a condition, not a pause)
            if app.catalog is not None and all(w.is_finished for w in app.workers):
                break
            await pilot.pause(0.05)
        app.open_environment("maple_library_lending")
        for _ in range(1200):  # shown, its own workers done
            if isinstance(app.screen, EnvironmentScreen) and app.screen.is_mounted and all(
                    w.is_finished for w in app.workers):
                break
            await pilot.pause(0.05)
        await pilot.pause()
asyncio.run(main())
print(seen)
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['worker']"


async def test_catalog_search_typed_at_full_speed_lands_in_the_search_box(awm_real, tmp_path):
    """"/gofund" then enter, typed fast, opened nothing: / moved the focus only after the letters had gone to the
    list (where s sorts and r reverses), so the search stayed empty. The letters are the search's, enter opens the
    one match; enter with several matches, then keys for the list (s r ↓ enter), act on the list."""
    from awm_tui.screens.catalog import CatalogScreen
    from awm_tui.screens.environment import EnvironmentScreen
    from awm_tui.widgets.virtual_table import VirtualTable

    app = AwmApp([str(awm_real), "sample_envs"], cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, CatalogScreen) and app.screen.rows)
        catalog = app.screen
        burst(app, ["slash", *"gofund", "enter"])
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen))
        assert app.screen.scenario.key == "gofundme"
        burst(app, ["escape"])
        await wait_until(pilot, lambda: app.screen is catalog)
        # several match: enter goes to the list, and the keys after it are the list's, not more search text
        burst(app, ["escape", "slash", *"in", "enter", "r", "down", "enter"])
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen))
        matches = sorted(r.key for r in catalog.rows if "in" in r.key or "in" in r.name.lower())
        assert len(matches) > 2 and catalog.query_one("#search").value == "in"
        assert catalog.sort_reverse and app.screen.scenario.key == sorted(matches, reverse=True)[1]
        burst(app, ["escape"])
        await wait_until(pilot, lambda: app.screen is catalog)
        # esc in the search box clears it and the keys after it are the list's (r reverses again)
        burst(app, ["slash", *"rov", "escape", "r"])
        await wait_until(pilot, lambda: not catalog.sort_reverse)
        assert catalog.query_one("#search").value == "" and catalog.query_one(VirtualTable).has_focus
        assert catalog.query_one(VirtualTable).row_count == len(catalog.rows)


async def test_in_and_out_of_environments_at_full_speed(tmp_path):
    """esc enter esc typed fast stopped the app ("No Tab with id '--content-tab-overview'": a screen popped while its
    widgets were still mounting); keys typed right after enter (a tab number, ctrl+g) acted on the catalog or were
    lost, and those after esc on the screen being left. Each lands on the screen the key before it opened."""
    from textual.widgets import TabbedContent

    from awm_tui.screens.catalog import CatalogScreen
    from awm_tui.screens.environment import EnvironmentScreen
    from awm_tui.screens.play import PlayScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, CatalogScreen) and app.screen.rows)
        catalog = app.screen
        first, second = [r.key for r in catalog.visible_rows()][:2]
        burst(app, ["enter", "escape", "enter", "escape", "enter", "escape", "down", "enter", "4"])
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen) and app.screen.query_one(
            TabbedContent).active == "tools")
        assert [type(s).__name__ for s in app.screen_stack][1:] == ["CatalogScreen", "EnvironmentScreen"]
        assert app.screen.scenario.key == second
        burst(app, ["escape", "up", "enter", "5", "ctrl+g"])
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.tools)
        assert app.screen.scenario.key == first
        assert [type(s).__name__ for s in app.screen_stack][1:] == ["CatalogScreen", "EnvironmentScreen", "PlayScreen"]


async def test_an_environment_left_while_its_database_was_built_is_not_filled_in_after(tmp_path):
    """esc right after opening an environment, its initial database still being built: a build that finished as the
    screen went filled in the screen no longer shown and started reading its first page there (NoMatches '#data-grid',
    "Worker raised exception": the app stopped; seen typing in and out of environments at full speed under load).
    The build's result, arriving after the screen was left, changes nothing and reads nothing."""
    from awm_engine.db.templates import TemplateCache
    from awm_tui.screens.catalog import CatalogScreen
    from awm_tui.screens.environment import EnvironmentScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, CatalogScreen) and app.screen.rows)
        catalog = app.screen
        app.open_environment("maple_library_lending")
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen))
        screen = app.screen
        await wait_until(pilot, lambda: all(w.is_finished for w in screen.workers))
        path, report = TemplateCache().get(screen.scenario)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is catalog and not screen.is_attached)
        screen._database_ready(path, report)  # the build's thread calling back late
        screen.load_page()  # a read started as the screen went
        await wait_until(pilot, lambda: all(w.is_finished for w in screen.workers))
        await pilot.pause()
        assert app.is_running and app.screen is catalog


async def test_a_database_ready_as_the_environment_is_being_left_fills_nothing(tmp_path):
    """Under load, the build's call back can arrive while the screen is being left: still attached, its widgets
    already removed. It raised NoMatches('#data-tables') in a worker and stopped the app (seen in a whole-suite run
    under two CPU hogs, typing in and out of environments at full speed); it now fills nothing."""
    from awm_engine.db.templates import TemplateCache
    from awm_tui.screens.catalog import CatalogScreen
    from awm_tui.screens.environment import EnvironmentScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, CatalogScreen) and app.screen.rows)
        app.open_environment("maple_library_lending")
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen))
        screen = app.screen
        await wait_until(pilot, lambda: getattr(screen, "db_path", None) is not None and screen.query("#data-tables")
                         and all(w.is_finished for w in screen.workers))
        path, report = TemplateCache().get(screen.scenario)
        await screen.query_one("#data-tables").remove()  # as the screen's removal does, before the screen goes
        await screen.query_one("#data-status").remove()
        assert screen.is_attached
        screen._database_ready(path, report)
        screen._data_status("late")
        await pilot.pause()
        assert app.is_running and app.screen is screen
