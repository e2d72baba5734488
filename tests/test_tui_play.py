"""TUI II: play a task to a verdict, a live rollout with the scripted LLM, replay stepping, side by side."""
import asyncio
import json
import sqlite3

from textual.app import App, ComposeResult
from textual.widgets import Input, OptionList

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.db.diff import diff_databases
from awm_engine.eval.episode import make_policy, run_episode
from awm_tui.app import AwmApp
from awm_tui.screens.play import PlayScreen, convert, is_flat, skeleton
from awm_tui.screens.replay import ReplayScreen
from awm_tui.screens.rollout import RolloutScreen
from awm_tui.widgets.verdict import SideBySide

SIZE = (140, 42)


async def wait_until(pilot, predicate, timeout=30.0):
    for _ in range(int(timeout / 0.1)):
        await pilot.pause(0.1)
        if predicate():
            return
    raise AssertionError("timed out waiting for the UI")


async def start(app, pilot):
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_play_a_sample_task_to_complete(tmp_path):
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        scenario = app.catalog.get("maple_library_lending")
        app.open_environment(scenario.key)
        await start(app, pilot)
        await pilot.press("5")
        app.screen.query_one("#task-list", OptionList).highlighted = 3
        await pilot.press("ctrl+g")
        screen = app.screen
        assert isinstance(screen, PlayScreen) and screen.task_idx == 3
        await wait_until(pilot, lambda: screen.tools)
        solution = scenario.solution(3)
        for call in solution["calls"]:
            tools = screen.query_one("#play-tools", OptionList)
            tools.highlighted = [t["name"] for t in screen.tools].index(call["tool"])
            # the highlighted tool's form is built asynchronously: wait until it is the one on screen (a busy machine
            # had the previous tool's fields still there: KeyError 'status')
            await wait_until(pilot, lambda: (screen.current or {}).get("name") == call["tool"]
                             and set(call["arguments"]) <= set(screen.fields)
                             and all(f.is_mounted for f in screen.fields.values()))
            for name, value in call["arguments"].items():
                screen.fields[name].value = str(value)
            before = len(screen.query_one("#transcript").events)
            await pilot.press("ctrl+j")
            await wait_until(pilot, lambda: len(screen.query_one("#transcript").events) >= before + 3)
        screen.query_one("#answer", Input).value = solution["final_answer"]
        await pilot.press("ctrl+f")
        await wait_until(pilot, lambda: screen.reports is not None)
        assert screen.reports["label"] == "complete" and screen.reports["reward"] == 1.0
        assert screen.query_one("#play-tabs").active == "verdict-tab"
        run_dir = screen.episode.run_dir
        assert run_dir.parent == (tmp_path / "play").resolve()
        traj = json.loads((run_dir / "trajectory.json").read_text())
        assert [s["tool_calls"][0]["name"] for s in traj["trajectory"][:-1]] == ["call_tool", "call_tool"]
        diff = diff_databases(run_dir / "initial.db", run_dir / "final.db")
        assert diff.table("loans").updated[0].changed == ["due_date", "renewal_count"]


def test_form_helpers():
    flat = {"properties": {"a": {"type": "integer"}, "b": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    nested = {"properties": {"items": {"type": "array", "items": {"type": "object"}}, "n": {"type": "integer",
                                                                                        "examples": [3]}}}
    assert is_flat(flat) and not is_flat(nested)
    assert skeleton(nested) == {"items": [], "n": 3}
    assert convert("5", "integer") == 5 and convert("yes", "boolean") is True and convert("x", "string") == "x"


def _call(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


SCRIPT = {"responses": [
    {"content": "<think>First the tool list.</think>" + _call("list_tools", {})},
    {"content": _call("call_tool", {"tool_name": "mcp_tool_mcp_server_list_my_loans",
                                    "arguments": json.dumps({"status": "active"})})},
    {"content": _call("call_tool", {"tool_name": "mcp_tool_mcp_server_renew_loan",
                                    "arguments": json.dumps({"loan_id": 3})})},
    {"content": "Your loan of 'Clockwork Harbor' is renewed."}]}


async def test_live_rollout_with_the_scripted_llm(tmp_path):
    with FakeLLMServer(SCRIPT) as llm:
        app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await start(app, pilot)
            scenario = app.catalog.get("maple_library_lending")
            app.push_screen(RolloutScreen(scenario, 3, base_url=llm.url, model="scripted"))
            await pilot.pause()
            screen = app.screen
            state = lambda: str(screen.query_one("#state").render())  # noqa: E731
            await pilot.press("n")  # start: server up, paused before the first step
            await wait_until(pilot, lambda: "paused before the first step" in state())
            assert len(llm.requests) == 0
            await pilot.press("n")
            await wait_until(pilot, lambda: "paused after turn 1" in state())
            assert len(llm.requests) == 1
            await pilot.press("n")
            await wait_until(pilot, lambda: "paused after turn 2" in state())
            await pilot.press("r")
            await wait_until(pilot, lambda: screen.reports is not None, 60)
            assert screen.finished.stop_reason == "final_answer"
            assert screen.reports["label"] == "complete" and screen.reports["reward"] == 1.0
            assert "complete · reward 1.0" in state()
            assert screen.query_one("#rollout-tabs").active == "verdict-tab"
            kinds = [type(e).__name__ for e in screen.query_one("#transcript").events]
            assert kinds.count("ToolCall") == 3 and kinds[-1] == "RolloutFinished"
    runs = list((tmp_path / "agents").iterdir())
    assert len(runs) == 1 and (runs[0] / "session.json").is_file() and (runs[0] / "calls.jsonl").is_file()


async def test_replay_steps_forwards_and_backwards(tmp_path):
    catalog = Catalog.load()
    s = catalog.get("pinecrest_online_store")
    outcome = await run_episode(catalog, s, 4, make_policy("oracle", s, 4), run_dir=tmp_path / "run")
    assert outcome.verification.label == "complete"
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        app.open_replay(tmp_path / "run")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await wait_until(pilot, lambda: screen.run.states)
        steps = [st.tool or st.name for st in screen.run.steps]
        write = steps.index("checkout_cart")
        assert screen.current == 0 and screen.run.diff_at(0).is_empty
        for _ in range(write):
            await pilot.press("right")
        assert screen.current == write
        diff = screen.run.diff_at(write)
        assert diff.table("orders").inserted and diff.table("order_items").inserted
        assert screen.run.diff_at(write - 1).is_empty
        await pilot.press("left")
        assert screen.current == write - 1
        await pilot.press("v")
        assert screen.query_one("#replay-tabs").active == "verdict-tab"
        states = screen.run.workdir
        assert states is not None and states.is_dir()
    assert not states.exists()  # the app quit with the replay open: its re-executed states went with the screen


def test_replay_cli(tmp_path, capsys):
    catalog = Catalog.load()
    s = catalog.get("maple_library_lending")
    asyncio.run(run_episode(catalog, s, 3, make_policy("oracle", s, 3), run_dir=tmp_path / "run"))
    assert awm(["replay", str(tmp_path / "run"), "--step", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [st["tool"] for st in data["steps"]][1:3] == ["list_my_loans", "renew_loan"]
    assert data["diff"]["summary"]["updated"] == 1 and data["final_matches"] is True


# -- the side-by-side view, as an SVG snapshot with fixed content ------------------------------------

def _dbs(tmp_path):
    before, after = tmp_path / "before.db", tmp_path / "after.db"
    for path in (before, after):
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE loans (id INTEGER PRIMARY KEY, title TEXT, due_date TEXT, renewals INTEGER)")
        conn.execute("CREATE TABLE holds (id INTEGER PRIMARY KEY, title TEXT, status TEXT)")
        conn.executemany("INSERT INTO loans VALUES (?, ?, ?, ?)", [(1, "Silent Orchard", "2026-03-17", 0),
                                                                  (3, "Clockwork Harbor", "2026-03-20", 0)])
        conn.execute("INSERT INTO holds VALUES (1, 'Winter at Greystone', 'waiting')")
        if path == after:
            conn.execute("UPDATE loans SET due_date = '2026-04-03', renewals = 1 WHERE id = 3")
            conn.execute("INSERT INTO holds VALUES (2, 'The Lantern Keeper', 'waiting')")
            conn.execute("DELETE FROM holds WHERE id = 1")
        conn.commit()
        conn.close()
    return before, after


REPORT = {"label": "agent_error", "reward": 0.0, "has_verdict": True, "note": None,
          "code": {"label": "complete", "function": "verify_task_completion", "seconds": 0.05, "error": None},
          "sql": {"label": "incomplete", "result": {"loan_3_due_date": "2026-04-03", "holds_cancelled": 1}},
          "judge": {"classification": "agent_error", "judge_result": {
              "reasoning": "The loan was renewed but an unrelated hold was cancelled.",
              "confidence_score": [20, 10, 5, 65], "classification": "agent_error",
              "evidence": {"status": "side effect", "iterations": 4, "error_signals": ["Status code: 500"],
                           "last_actions": ["renew_loan", "cancel_hold"], "database_verification": "hold 1 gone"}}}}


class SideBySideApp(App):
    def __init__(self, diff):
        super().__init__()
        self.diff = diff

    def compose(self) -> ComposeResult:
        yield SideBySide()

    def on_mount(self) -> None:
        self.query_one(SideBySide).show(self.diff, REPORT, env_errors=1, stop_reason="final_answer")


def test_snapshot_side_by_side(snap_compare, tmp_path):
    before, after = _dbs(tmp_path)
    assert snap_compare(SideBySideApp(diff_databases(before, after)), terminal_size=(130, 36))
