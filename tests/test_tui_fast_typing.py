"""Keys typed at once (one ``pilot.press`` call, or every key queued before the app reads any) land where the keys
before them moved the focus, and do what they say: what is sent is what was typed. Each test runs as is and with
both CPU cores busy (two ``while True: pass`` processes)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from textual.widgets import Input

from awm_tui.app import AwmApp
from tests.test_tui_play_typing import burst
from tests.test_tui_play_typing import wait_until as _wait_until


async def wait_until(pilot, predicate, timeout=30.0):
    await _wait_until(pilot, predicate, timeout)

SIZE = (120, 36)


@pytest.fixture(params=["press", "burst"])
def typing(request):
    """How the keys are typed at once: one ``pilot.press`` call, or every key queued before the app reads any
    (``burst``: ``pilot.press`` lets the app go idle between keys, which hides some races)."""

    async def type_keys(pilot, *keys):
        if request.param == "press":
            await pilot.press(*keys)
        else:
            burst(pilot.app, keys)

    return type_keys


@pytest.fixture(params=["idle", "busy"])
def cores(request):
    """``busy``: two CPU hogs for the test's length (killed after it)."""
    hogs = []
    if request.param == "busy":
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield request.param
    for hog in hogs:
        hog.kill()
        hog.wait()


async def on_top(app, pilot, kind):
    """Wait until a ``kind`` screen is on top with every widget it composed mounted; return it."""
    await wait_until(pilot, lambda: isinstance(app.screen, kind) and app._mounted(app.screen))
    return app.screen


async def catalog_ready(app, pilot):
    await wait_until(pilot, lambda: app.catalog is not None and len(app.catalog))


# -- the live rollout's endpoint form -------------------------------------------------------------------------

async def test_rollout_endpoint_typed_with_tab_between_the_fields(tmp_path, cores, typing):
    """base URL, tab, model, typed at once: the model's letters land in the model field (they went into the base
    URL: the tab was read after them)."""
    from awm_tui.screens.rollout import CUSTOM, RolloutScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        app.push_screen(RolloutScreen(app.catalog.get("maple_library_lending"), 3))
        screen = await on_top(app, pilot, RolloutScreen)
        url = screen.query_one("#base-url", Input)
        url.focus()
        await wait_until(pilot, lambda: url.has_focus)
        await typing(pilot, *"http://127.0.0.1:9/v1", "tab", *"gpt-x", "shift+tab", "end", *"2")
        await wait_until(pilot, lambda: screen.query_one("#model", Input).value == "gpt-x")
        assert url.value == "http://127.0.0.1:9/v12"
        endpoint = screen.endpoint()
        assert screen.query_one("#endpoint").value == CUSTOM
        assert (endpoint.base_url, endpoint.model) == ("http://127.0.0.1:9/v12", "gpt-x")


async def test_rollout_form_typed_through_to_start_with_tab_then_enter(tmp_path, cores, typing):
    """URL, tab, model, tab, tab, enter typed at once: Start is pressed with what was typed (before, every tab was
    read after the keys behind it: the model went into the URL field and the enter to the URL field, nothing
    started)."""
    from awm_tui.screens.rollout import RolloutScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        app.push_screen(RolloutScreen(app.catalog.get("maple_library_lending"), 3))
        screen = await on_top(app, pilot, RolloutScreen)
        sent = []
        screen.run_rollout = sent.append  # what Start sends: the endpoint (no server, no model)
        url = screen.query_one("#base-url", Input)
        url.focus()
        await wait_until(pilot, lambda: url.has_focus)
        await typing(pilot, *"http://127.0.0.1:9/v1", "tab", *"m0delx", "backspace", "tab", "tab", "enter")
        await wait_until(pilot, lambda: sent)
        assert (sent[0].base_url, sent[0].model) == ("http://127.0.0.1:9/v1", "m0del")
        assert url.value == "http://127.0.0.1:9/v1"


# -- text fields: editing keys stay in order ------------------------------------------------------------------

async def test_the_catalog_search_typed_with_a_correction_opens_the_row_it_names(tmp_path, cores, typing):
    """/, a name with a typo, backspace, the rest, enter: the environment the corrected text names opens (the
    backspace was read after the letters behind it: it erased the last one, the filter matched nothing)."""
    from awm_tui.screens.environment import EnvironmentScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        await typing(pilot, "slash", *"maplx", "backspace", *"e_lib", "left", "left", "right", "end", "enter")
        screen = await on_top(app, pilot, EnvironmentScreen)
        assert screen.scenario.key == "maple_library_lending"
        assert app.screen_stack[-2].query_one("#search", Input).value == "maple_lib"


async def test_sql_typed_with_corrections_runs_as_corrected(tmp_path, cores, typing):
    """ctrl+e, a query with a typo fixed by ←, backspace and home, enter: the query run is the corrected one."""
    from awm_tui.screens.environment import EnvironmentScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        app.open_environment("maple_library_lending")
        screen = await on_top(app, pilot, EnvironmentScreen)
        sent = []
        screen.run_sql = sent.append  # what enter sends (no database needed)
        await typing(pilot, "3", "ctrl+e", *"ELECT 1x2", "left", "backspace", "home", "S", "end", *" AS n", "enter")
        await wait_until(pilot, lambda: sent)
        assert sent == ["SELECT 12 AS n"]


async def test_play_form_typed_with_corrections_tab_then_enter_calls_with_what_was_typed(tmp_path, cores, typing):
    """In the play form: a value with a typo fixed by backspace, tab, a value edited with ← and home, enter: the
    tool is called with the corrected values."""
    from test_tui_play_typing import events_of, open_play

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = await open_play(app, pilot, "pinecrest_online_store")
        names = [t["name"] for t in screen.tools]
        tool = next(t for t in screen.tools if t["name"] == "create_address")
        fields = list(tool["inputSchema"]["properties"])
        keys = ["home", *["down"] * names.index("create_address"), "enter"]
        values = {"label": "Cabin", "recipient_name": "Ada Lovelace", "street": "12 Way", "city": "Portland",
                  "state": "OR", "postal_code": "97201", "country": "US", "phone": "+1-503-555-0199",
                  "is_default": "true"}
        for i, name in enumerate(fields):
            if name == "label":
                keys += [*"Cabxn", "backspace", "backspace", "i", "n"]
            elif name == "recipient_name":
                keys += [*"Ada Lovelac", "home", "end", "e"]
            elif name == "city":
                keys += [*"ortland", "home", "P"]
            else:
                keys += list(values[name])
            keys += ["tab"] if i < len(fields) - 1 else ["enter"]
        await typing(pilot, *keys)
        await wait_until(pilot, lambda: events_of(screen, "Observation"))
        calls = events_of(screen, "ToolCall")
        assert [c.tool for c in calls] == ["create_address"]
        assert calls[0].arguments == {**values, "is_default": True}


async def test_tau2_message_typed_with_a_correction_then_sent_at_once(tmp_path, cores, typing):
    """τ² play: a message with a typo fixed by backspace, then ctrl+j (or enter) typed at once: the message sent is
    the corrected one, all of it (ctrl+j was read before the letters typed just before it: the box was sent empty
    or cut)."""
    from awm_engine.bench.tau2.data import Tau2Data
    from awm_engine.bench.tau2.episode import DomainScenario
    from awm_tui.screens.tau2 import Tau2PlayScreen
    from tests.test_tau2_domains import FIXTURE

    data = Tau2Data(FIXTURE)
    scenario = DomainScenario(data, "airline")
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, tau2_data=data)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        screen = Tau2PlayScreen(scenario, data.domain("airline").task("0"), "agent")
        screen.converse = lambda: None  # no model: what is typed stays in the human side's queue
        app.push_screen(screen)
        await on_top(app, pilot, Tau2PlayScreen)
        box = screen.query_one("#tau2-input", Input)
        await wait_until(pilot, lambda: box.has_focus)
        await typing(pilot, *"cancel Z7GOZX", "backspace", *"K please", "ctrl+j", *"/cancel_reservation {}", "enter")
        await wait_until(pilot, lambda: screen.human.queue.qsize() == 2)
        first, second = screen.human.queue.get_nowait(), screen.human.queue.get_nowait()
        assert first.content == "cancel Z7GOZK please" and not first.tool_calls
        assert [(c.name, c.arguments) for c in second.tool_calls] == [("cancel_reservation", "{}")]
        assert box.value == ""


# -- late callbacks: a screen the user left fills nothing, raises nothing, touches no other screen --------------

async def left_while_attached(app, pilot, screen, widget_id):
    """Close ``screen`` as esc does, its widget ``widget_id`` already gone (as the screen's removal does first):
    the window in which a late callback used to pass ``is_attached`` and raise NoMatches."""
    await screen.query_one(widget_id).remove()
    app.pop_screen()
    assert screen.is_attached and screen not in app.screen_stack


async def test_a_report_read_after_its_screen_was_closed_fills_nothing(tmp_path, cores):
    import threading

    from awm_engine.bench import report as bench_report
    from awm_tui.screens.report import BenchReportScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        below = app.screen
        # 1. the worker ends while the screen is being removed (still attached, its widgets going)
        app.open_report([])
        screen = await on_top(app, pilot, BenchReportScreen)
        await wait_until(pilot, lambda: screen.table is not None)
        table, screen.table = screen.table, None
        await left_while_attached(app, pilot, screen, "#report-head")
        screen._show(table)
        screen._failed("late")
        assert screen.table is None
        await wait_until(pilot, lambda: not screen.is_attached)
        # 2. a real late reading: the runs are read after esc
        gate = threading.Event()
        build = bench_report.build_table
        original = bench_report.build_table = lambda run_dirs: (gate.wait(30), build(run_dirs))[1]
        try:
            app.open_report([])
            screen = await on_top(app, pilot, BenchReportScreen)
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is below)
            gate.set()
            await wait_until(pilot, lambda: not screen.is_attached and not [
                w for w in app.workers if w.group == "bench-report" and not w.is_finished])
        finally:
            if bench_report.build_table is original:
                bench_report.build_table = build
        assert app.is_running and app.screen is below and screen.table is None


async def test_a_rollout_step_after_its_screen_was_closed_fills_nothing(tmp_path, cores):
    from types import SimpleNamespace

    from awm_tui.screens.rollout import RolloutScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        below = app.screen
        app.push_screen(RolloutScreen(app.catalog.get("maple_library_lending"), 3))
        screen = await on_top(app, pilot, RolloutScreen)
        await left_while_attached(app, pilot, screen, "#state")
        screen.state("late")
        await screen.on_step(SimpleNamespace(iteration=4))
        await screen.episode_opened(SimpleNamespace(url="http://x", tools=[]))
        assert screen.turn == 0 and screen.episode is None
        await wait_until(pilot, lambda: not screen.is_attached)
        assert app.is_running and app.screen is below


async def test_tau2_callbacks_after_their_screens_were_closed_fill_nothing(tmp_path, cores):
    from types import SimpleNamespace

    from awm_engine.bench.tau2.data import Tau2Data
    from awm_engine.bench.tau2.episode import DomainScenario
    from awm_tui.screens.tau2 import Tau2PlayScreen, Tau2Screen
    from tests.test_tau2_domains import FIXTURE

    data = Tau2Data(FIXTURE)
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, tau2_data=data)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        below = app.screen
        # the domain screen: its databases read (and the doctor's result) after esc
        app.open_environment("tau2_airline")
        screen = await on_top(app, pilot, Tau2Screen)
        await wait_until(pilot, lambda: screen.databases is not None)
        await left_while_attached(app, pilot, screen, "#tau2-overview")
        screen._checked(None, "")
        screen._databases_failed("late")
        screen._databases_loaded({}, [], [], "late")
        await wait_until(pilot, lambda: not screen.is_attached)
        assert app.is_running and app.screen is below
        # play: a step and the status after esc
        play = Tau2PlayScreen(DomainScenario(data, "airline"), data.domain("airline").task("0"), "agent")
        play.converse = lambda: None
        app.push_screen(play)
        await on_top(app, pilot, Tau2PlayScreen)
        await left_while_attached(app, pilot, play, "#tau2-play-status")
        play.status("late")
        play.add_step(SimpleNamespace(role="assistant", content="late"))
        assert not play.query_one("#tau2-transcript").events
        await wait_until(pilot, lambda: not play.is_attached)
        assert app.is_running and app.screen is below


async def test_a_play_episode_opened_after_esc_is_abandoned_and_fills_nothing(tmp_path, cores):
    """esc while the episode is opening closes the screen at once; the episode that opens after it ends as
    abandoned and fills nothing (it raised NoMatches from the removed tool list)."""
    from awm_engine.agent.policies import HumanPolicy
    from awm_tui.screens.play import PlayScreen

    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        below = app.screen
        screen = PlayScreen(app.catalog.get("pinecrest_online_store"), 0)
        screen.start_episode = lambda: None  # the episode opens below, late, by hand
        app.push_screen(screen)
        await on_top(app, pilot, PlayScreen)
        await left_while_attached(app, pilot, screen, "#play-tools")
        assert isinstance(screen.policy, HumanPolicy)
        await screen.episode_opened(object())
        screen.on_step(object())
        assert screen.policy.queue.get_nowait() is None  # abandoned
        assert not screen.tools
        await wait_until(pilot, lambda: not screen.is_attached)
        assert app.is_running and app.screen is below


async def test_a_generation_runs_refresh_after_its_screen_was_closed_fills_nothing(tmp_path, cores):
    """The generation view's refresh (a worker thread, every second) ends while the screen is being removed: its
    result fills nothing and raises nothing (it passed ``is_attached`` and raised NoMatches)."""
    from awm_tui.screens.gen import GenRunScreen

    from tests.test_tui_gen import three_scenarios

    out = three_scenarios(tmp_path / "gen")
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await catalog_ready(app, pilot)
        below = app.screen
        app.push_screen(GenRunScreen(out))
        screen = await on_top(app, pilot, GenRunScreen)
        await wait_until(pilot, lambda: screen.keys)
        filled = []
        screen._fill = lambda rows: filled.append(rows)
        await left_while_attached(app, pilot, screen, "#gen-error")
        screen._show(True)  # as the refresh's call_from_thread lands
        assert filled == []
        await wait_until(pilot, lambda: not screen.is_attached)
        assert app.is_running and app.screen is below
