"""The traceback behind every environment error: captured in the worker, kept beside the tool result (never in the
text a model sees), written to events.jsonl, server.log and calls.jsonl, printed by `awm env call`, shown by
`awm replay`, and under the observation in the TUI's play and replay views and the verdict."""
import asyncio
import json

import httpx
import pytest
from tinyenv import BOOM, DUPLICATE, make_env_dir

from awm_engine.agent.policies import AssistantTurn, NativeCall, ScriptedTurns
from awm_engine.agent.replay import traced_steps
from awm_engine.agent.rollout import AgentConfig
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.db.templates import TemplateCache
from awm_engine.eval.episode import run_episode
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.mcp_client import McpEpisode
from awm_engine.runtime.pool import EnvPool

ERROR_TEXT = "Error calling {}. Status code: 500. Response: Internal Server Error"


@pytest.fixture
def data(tmp_path):
    return make_env_dir(tmp_path / "data", {"boom": BOOM + DUPLICATE})


def loaded(data, tmp_path):
    scenario = Catalog.load([data]).get("boom")
    template, _ = TemplateCache(tmp_path / "tpl").get(scenario)
    return LoadedEnv(scenario.key, scenario.code, template, tmp_path / "work")


async def raw_answer(app, method, path):
    """The app's own answer through httpx's ASGI transport, as fastapi-mcp calls it."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://apiserver") as client:
        return await client.request(method, path)


def test_the_traceback_is_kept_and_the_answer_is_unchanged(data, tmp_path):
    env = loaded(data, tmp_path)
    episode = Episode(env)
    boom = episode.call_tool_sync("boom", {})
    assert (boom.text, boom.is_error, boom.status, boom.error_kind) == (ERROR_TEXT.format("boom"), True, 500,
                                                                        "http_5xx")
    raw = asyncio.run(raw_answer(env.app, "GET", "/api/boom"))
    assert (raw.status_code, raw.content) == (500, b"Internal Server Error")  # byte for byte what the text quotes
    assert boom.traceback.rstrip().endswith("ValueError: kaboom")
    assert 'raise ValueError("kaboom")' in boom.traceback  # the generated code's own line is shown
    assert "<boom/server_code.py>" in boom.traceback and "starlette" not in boom.traceback  # from the handler on
    again = episode.call_tool_sync("add_first_again", {})
    assert again.text == ERROR_TEXT.format("add_first_again")
    assert "IntegrityError" in again.traceback and "UNIQUE constraint failed: notes.id" in again.traceback
    ok = episode.call_tool_sync("list_notes", {})
    assert not ok.is_error and ok.traceback is None
    assert episode.call_tool_sync("get_note", {}).traceback is None  # rejected before any request


def test_env_call_prints_the_traceback_on_stderr(data, capsys):
    assert awm(["env", "call", "boom", "boom", "--data", str(data)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ERROR_TEXT.format("boom") + "\n"  # stdout: exactly what a model sees
    assert "Traceback (most recent call last)" in captured.err and "ValueError: kaboom" in captured.err
    assert awm(["env", "call", "boom", "boom", "--data", str(data), "--json"]) == 1
    captured = capsys.readouterr()
    assert "ValueError: kaboom" in json.loads(captured.out)["traceback"] and "ValueError: kaboom" in captured.err
    assert awm(["env", "call", "boom", "list_notes", "--data", str(data)]) == 0
    assert "Traceback" not in capsys.readouterr().err


async def test_pool_worker_log_has_the_traceback(data, tmp_path):
    scenario = Catalog.load([data]).get("boom")
    async with EnvPool(workers=1, workdir=tmp_path / "pool", log_path=tmp_path / "worker.log") as pool:
        episode = await pool.open_episode(scenario)
        result = await episode.call_tool("add_first_again", {})
    assert "UNIQUE constraint failed: notes.id" in result.traceback
    log = (tmp_path / "worker.log").read_text()
    assert f"boom episode {episode.id}: add_first_again -> HTTP 500" in log and "UNIQUE constraint failed" in log


async def test_mcp_serve_writes_server_log_and_hands_the_traceback_to_awm_clients(data, tmp_path):
    episode = await McpEpisode.start("boom", tmp_path / "served", [str(data)], 0)
    try:
        result = await episode.call_tool("boom", {})
        ok = await episode.call_tool("list_notes", {})
    finally:
        await episode.close()
    assert (result.text, result.is_error, result.status, result.error_kind) == (ERROR_TEXT.format("boom"), True,
                                                                                500, "http_5xx")
    assert result.traceback.rstrip().endswith("ValueError: kaboom")  # from the result's _meta, not its text
    assert ok.traceback is None and not ok.is_error
    log = (tmp_path / "served" / "server.log").read_text()
    assert "boom -> HTTP 500" in log and "ValueError: kaboom" in log
    calls = [json.loads(line) for line in (tmp_path / "served" / "calls.jsonl").read_text().splitlines()]
    assert "ValueError: kaboom" in calls[0]["traceback"] and calls[1]["traceback"] is None
    session = json.loads((tmp_path / "served" / "session.json").read_text())
    assert isinstance(session["template"]["built_at"], float) and episode.template == session["template"]


@pytest.fixture
def run(data, tmp_path):
    catalog = Catalog.load([data])
    turns = [AssistantTurn("", [NativeCall("c1", "list_notes", "{}")]),
             AssistantTurn("", [NativeCall("c2", "boom", "{}")])]
    asyncio.run(run_episode(catalog, catalog.get("boom"), 0, ScriptedTurns(turns, "gave up"),
                            AgentConfig(mode="native"), tmp_path / "run", verify_mode=None))
    return tmp_path / "run"


def test_the_event_log_and_awm_replay_show_it(run, capsys):
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    observations = [e for e in events if e["type"] == "observation"]
    assert observations[0]["traceback"] is None
    assert observations[1]["text"].endswith(ERROR_TEXT.format("boom"))  # as the model saw it
    assert observations[1]["traceback"].rstrip().endswith("ValueError: kaboom")
    trajectory = json.loads((run / "trajectory.json").read_text())
    assert "kaboom" not in json.dumps(trajectory["messages"])  # the model never sees it
    assert [s.tool for s in traced_steps(run)] == ["boom"]

    assert awm(["replay", str(run), "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert steps[0]["traceback"] is None
    assert steps[1]["tool"] == "boom" and steps[1]["status"] == 500
    assert steps[1]["traceback"].rstrip().endswith("ValueError: kaboom")
    assert awm(["replay", str(run)]) == 0
    assert "       ValueError: kaboom" in capsys.readouterr().out


def test_traced_steps_of_a_broken_event_log_are_none(tmp_path):
    (tmp_path / "events.jsonl").write_text('{"type": "model_turn", "iteration": 1}\nnot json\n')
    assert traced_steps(tmp_path) == [] and traced_steps(tmp_path / "missing") == []


async def test_tui_shows_it_under_the_observation_and_in_the_verdict(run):
    from rich.console import Console
    from textual.widgets import Collapsible, Static

    from awm_tui.app import AwmApp
    from awm_tui.widgets.transcript import Transcript
    from awm_tui.widgets.verdict import SideBySide

    def text(widget) -> str:
        console = Console(width=300, record=True)
        console.print(widget.content)
        return console.export_text()

    app = AwmApp(None, cursor_blink=False, runs_root=run.parent)
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause()
        app.open_replay(run)
        await pilot.pause()
        screen = app.screen
        screen.show_step(1)
        await pilot.pause()
        step = text(screen.query_one("#step-text", Static))
        assert "traceback (the environment's; the model saw only the observation)" in step
        assert "ValueError: kaboom" in step
        side = screen.query_one(SideBySide)  # the run was not verified: the verdict view shows it once it is
        side.show_report({"label": "others", "reward": 0.0}, 1, "final_answer")
        await pilot.pause()
        verdict = text(side.query_one("#verdict", Static))
        assert "turn 2 · boom → 500 · ValueError: kaboom" in verdict and 'raise ValueError("kaboom")' in verdict

        # the live transcript (play and live rollout) puts it, collapsed, under the observation
        from awm_engine.data.run_formats import Observation

        transcript = Transcript()
        await screen.mount(transcript)
        transcript.add_event(Observation(2, "c2", "boom", ERROR_TEXT.format("boom"), True, "http_5xx", 500, 1.0,
                                         "Traceback (most recent call last):\nValueError: kaboom\n"))
        await pilot.pause()
        folded = transcript.query(Collapsible).last()
        assert folded.title == "traceback · turn 2 · boom → 500 · ValueError: kaboom" and folded.collapsed
