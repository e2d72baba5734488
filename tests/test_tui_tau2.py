"""τ²-bench in the TUI (issue 15): the domains in the catalog, the domain screen's tabs and Problems list, playing a
task as the agent with a scripted simulated user answering, and the replay and verdict of a τ² rollout."""
from __future__ import annotations

import json

from textual.widgets import Input, OptionList, Static

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.bench.tau2.data import Tau2Data
from awm_engine.bench.tau2.prompts import STOP
from awm_engine.bench.tau2.run import Tau2Config, run_tau2
from awm_engine.eval.results import read_records
from awm_tui.app import AwmApp
from awm_tui.screens.tau2 import Tau2PlayScreen, Tau2ReplayScreen, Tau2Screen, Tau2Verdict, verdict_view
from tests.test_tau2_domains import FIXTURE
from tests.test_tau2_run import gold_plan, scripted
from tests.test_tui_play import SIZE, start, wait_until


async def scripted_run(out, k: int, task_ids=None):
    """A τ² run on the airline fixture whose agent plays the gold actions (scripted)."""
    airline = Tau2Data(FIXTURE).domain("airline")
    plans = [gold_plan(t, f"P{t.id}", "Done: 255 - on time.") for t in airline.split_tasks()]
    with FakeLLMServer(scripted(plans)) as server:
        endpoint = Endpoint(base_url=server.url, model="scripted", temperature=0.0, mode="native")
        config = Tau2Config(data_dir=str(FIXTURE), domains=["airline"], task_ids=task_ids, k=k,
                            endpoint=endpoint.public())
        await run_tau2(config, out, endpoint)
    return out


def text_of(widget: Static) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(widget.content)
    return console.export_text()


async def test_domains_in_the_catalog_and_their_screen(tmp_path):
    data = Tau2Data(FIXTURE)
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, tau2_data=data)
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        keys = [r.key for r in app.screen.rows]
        assert {"tau2_airline", "tau2_retail", "tau2_telecom"} <= set(keys)
        airline = next(r for r in app.screen.rows if r.key == "tau2_airline")
        assert airline.data.tasks == 4 and airline.health == "τ²-bench"
        retail = next(r for r in app.screen.rows if r.key == "tau2_retail")
        assert retail.health == "no database" and retail.problems.total >= 1  # the fixture has no retail
        app.open_environment("tau2_airline")
        await start(app, pilot)
        screen = app.screen
        assert isinstance(screen, Tau2Screen)
        # the database's check and the static problems come from a thread: "checking…" until then
        await wait_until(pilot, lambda: "Problems: checking" not in text_of(screen.query_one("#tau2-overview", Static)))
        overview = text_of(screen.query_one("#tau2-overview", Static))
        assert "Problems" in overview and "Airline agent policy (test fixture)" in overview
        await pilot.press("2")
        await wait_until(pilot, lambda: screen.databases is not None)
        tables = screen.query_one("#tau2-table-list", OptionList)
        assert [tables.get_option_at_index(i).prompt for i in range(tables.option_count)] == \
            ["flights (6)", "users (3)", "reservations (2)"]
        await pilot.press("4")
        tools = screen.query_one("#tau2-tool-list", OptionList)
        tools.highlighted = 0
        await pilot.pause()
        assert "book_reservation" in text_of(screen.query_one("#tau2-tool-detail", Static))
        await pilot.press("5")
        screen.query_one("#tau2-task-list", OptionList).highlighted = 2
        await pilot.pause()
        detail = text_of(screen.query_one("#tau2-task-detail", Static))
        assert "update_reservation_passengers" in detail and "reward basis: DB, COMMUNICATE" in detail
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, Tau2Screen)


async def test_play_as_the_agent_with_a_simulated_user(tmp_path, monkeypatch):
    data = Tau2Data(FIXTURE)
    task = data.domain("airline").task("0")
    reason = task.user_scenario.instructions.reason_for_call
    script = {"rules": [{"match": reason, "responses": [{"content": "Please cancel my trip, reservation Z7GOZK."},
                                                        {"content": f"Thank you. {STOP}"}]}]}
    with FakeLLMServer(script) as server:
        config = tmp_path / "config.toml"
        config.write_text(f'[endpoints.sim]\nbase_url = "{server.url}"\nmodel = "scripted"\n')
        monkeypatch.setenv("AWM_CONFIG", str(config))
        app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, tau2_data=data)
        async with app.run_test(size=SIZE) as pilot:
            await start(app, pilot)
            app.open_environment("tau2_airline")
            await start(app, pilot)
            await pilot.press("5")
            app.screen.query_one("#tau2-task-list", OptionList).highlighted = 0
            await pilot.press("ctrl+g")
            screen = app.screen
            assert isinstance(screen, Tau2PlayScreen) and screen.mode == "agent"
            transcript = screen.query_one("#tau2-transcript")
            await wait_until(pilot, lambda: any("Z7GOZK" in getattr(e, "content", "") for e in transcript.events))
            field = screen.query_one("#tau2-input", Input)
            before = len(transcript.events)
            # a message that starts with "/" but names none of the player's tools: said, nothing sent, text kept
            for typed, said in (("/etc is where the receipt is", "no tool named 'etc'"),
                                ("/cancel_reservation Z7GOZK", "the arguments of cancel_reservation are not JSON")):
                field.value = typed
                await pilot.press("enter")
                await wait_until(pilot, lambda: any(said in str(n.message) for n in app._notifications))
                assert field.value == typed and len(transcript.events) == before
            field.value = '/cancel_reservation {"reservation_id": "Z7GOZK"}'
            await pilot.press("enter")
            await wait_until(pilot, lambda: any(type(e).__name__ == "Observation" for e in transcript.events))
            field.value = "Done: Z7GOZK is cancelled and refunded."
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.done)
            await pilot.pause()
            assert screen.query_one("#tau2-play-tabs").active == "tau2-verdict-tab"
            reward = json.loads((screen.run_dir / "reward.json").read_text())
            assert reward["reward"] == 1.0 and reward["reward_breakdown"]["DB"] == 1.0
            assert "finished: user_stop · reward 1.0" in text_of(screen.query_one("#tau2-play-status", Static))


async def test_replay_and_verdict_of_a_tau2_rollout(tmp_path):
    out = await scripted_run(tmp_path / "eval" / "run", k=1, task_ids=["1"])
    run_dir = read_records(out / "results.jsonl")[0]["run_dir"]
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        app.open_replay(run_dir)
        await start(app, pilot)
        screen = app.screen
        assert isinstance(screen, Tau2ReplayScreen)
        await wait_until(pilot, lambda: screen.run.states)
        steps = screen.query_one("#steps", OptionList)
        labels = [str(steps.get_option_at_index(i).prompt) for i in range(steps.option_count)]
        assert any("book_reservation" in label for label in labels)
        assert any("[user] Hello" in label for label in labels)
        booked = next(i for i, s in enumerate(screen.run.steps) if s.tool == "book_reservation")
        diff = screen.run.diff_at(booked)
        assert {t.table for t in diff.tables} == {"flights", "users", "reservations"}
        assert screen.run.final_matches()
        await pilot.press("v")
        await pilot.pause()
        verdict = screen.query_one(Tau2Verdict)
        body = text_of(verdict.query_one("#tau2-verdict-body", Static))
        assert "reward 1.0" in body and "DB check: match" in body and "'255'" in body


def test_verdict_view_without_a_verdict():
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(verdict_view(None, "infrastructure_error"))
    assert "no verdict" in console.export_text()


async def test_a_tau2_run_in_the_evaluation_dashboard(tmp_path):
    from awm_tui.screens.evals import EvalScreen
    from awm_tui.widgets.virtual_table import VirtualTable

    out = await scripted_run(tmp_path / "eval" / "tau2-run", k=2)
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        app.open_evaluations(out)
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen) and app.screen.is_mounted)
        await pilot.pause()
        screen = app.screen
        rollouts = screen.query_one("#rollout-table", VirtualTable)
        await wait_until(pilot, lambda: rollouts.row_count == 8)
        head = screen.query_one("#run-head", Static).content
        assert "scripted" in str(head) and "rollouts 8/8" in str(head)
        scenarios = screen.query_one("#scenario-table", VirtualTable)
        assert scenarios.row_count == 1
        rollouts.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, Tau2ReplayScreen))


async def test_the_problems_list_of_a_domain_is_awm_env_doctor(tmp_path, monkeypatch):
    """The catalog's problems cell and the domain's Problems list come from ``awm env doctor``'s engine call
    (bench.tau2.doctor); ctrl+d runs every check in the app's worker pool, as on an AWM environment."""
    from tests.test_tau2_eval import broken_copy

    monkeypatch.setenv("AWM_CACHE_DIR", str(tmp_path / "cache"))
    data = Tau2Data(broken_copy(tmp_path))
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, tau2_data=data)
    async with app.run_test(size=SIZE) as pilot:
        await start(app, pilot)
        airline = next(r for r in app.screen.rows if r.key == "tau2_airline")
        assert airline.problems.total == 1  # static checks only: the malformed task
        await pilot.press("slash", *"tau2_air", "enter")  # the one match opens
        await wait_until(pilot, lambda: isinstance(app.screen, Tau2Screen))
        await start(app, pilot)
        screen = app.screen
        await wait_until(pilot, lambda: "Problems: checking" not in text_of(screen.query_one("#tau2-overview", Static)))
        overview = text_of(screen.query_one("#tau2-overview", Static))
        assert "static checks only" in overview and "awm env doctor --tau2-data" in overview
        assert "'bad'" in overview and "does not apply" in overview
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: screen.diagnosis is not None and not screen.diagnosing)
        overview = text_of(screen.query_one("#tau2-overview", Static))
        assert "task_setup" in overview and "gold_action_error" in overview and "from awm env doctor" in overview
        await pilot.press("escape")
        await start(app, pilot)
        await wait_until(pilot, lambda: any(r.key == "tau2_airline" for r in getattr(app.screen, "rows", [])))
        airline = next(r for r in app.screen.rows if r.key == "tau2_airline")
        assert airline.problems.total == 3  # back in the catalog: the diagnosis's count
    # the diagnosis is cached: a new catalog counts its problems
    from awm_tui.screens.tau2 import tau2_rows

    row = next(r for r in tau2_rows(Tau2Data(data.root)) if r.key == "tau2_airline")
    assert row.problems.total == 3 and row.problems.errors == 2


async def test_play_as_the_user_with_a_model_as_the_agent(tmp_path, monkeypatch):
    """ctrl+u: the person is the user, the configured model is the agent; the conversation ends with the stop
    token and the verdict tab shows the reward components."""
    data = Tau2Data(FIXTURE)
    script = {"responses": [{"content": "I have looked into it; is there anything else?"}]}
    with FakeLLMServer(script) as server:
        config = tmp_path / "config.toml"
        config.write_text(f'[endpoints.sim]\nbase_url = "{server.url}"\nmodel = "scripted"\n')
        monkeypatch.setenv("AWM_CONFIG", str(config))
        app = AwmApp(None, cursor_blink=False, runs_root=tmp_path, tau2_data=data)
        async with app.run_test(size=SIZE) as pilot:
            await start(app, pilot)
            app.open_environment("tau2_airline")
            await start(app, pilot)
            await pilot.press("5")
            app.screen.query_one("#tau2-task-list", OptionList).highlighted = 0
            await pilot.press("ctrl+u")
            screen = app.screen
            assert isinstance(screen, Tau2PlayScreen) and screen.mode == "user"
            transcript = screen.query_one("#tau2-transcript")
            field = screen.query_one("#tau2-input", Input)
            await wait_until(pilot, lambda: not field.disabled)
            field.value = "//reservations/Z7GOZK: please cancel it."  # "//": a message that begins with "/"
            await pilot.press("enter")
            await wait_until(pilot, lambda: any("anything else" in str(getattr(e, "content", ""))
                                                for e in transcript.events))
            await wait_until(pilot, lambda: not field.disabled)
            field.value = f"No, thank you. {STOP}"
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.done)
            await pilot.pause()
            assert screen.query_one("#tau2-play-tabs").active == "tau2-verdict-tab"
        assert any(str(m.get("content")) == "/reservations/Z7GOZK: please cancel it." for r in server.requests
                   for m in r.get("messages", []))  # the model, as the agent, saw what the person wrote


def test_what_is_wrong_with_a_typed_tool_call():
    from awm_tui.screens.tau2 import tool_call_problem

    tools = ["cancel_reservation", "get_user_details"]
    assert tool_call_problem("cancel_reservation", '{"reservation_id": "Z7GOZK"}', tools) is None
    assert tool_call_problem("get_user_details", "", tools) is None
    assert "begin it with \"//\"" in tool_call_problem("etc/passwd", "is mine", tools)
    assert "not JSON" in tool_call_problem("cancel_reservation", "Z7GOZK", tools)
    assert "must be a JSON object" in tool_call_problem("cancel_reservation", "[1]", tools)
