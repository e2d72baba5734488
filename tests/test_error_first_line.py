"""The first line of every environment error is the exception's type and message from the environment's code
(issue 27 item 2): SQLAlchemy's IntegrityError, not its "(Background on this error at: …)" trailer; the verdict
leads with label and reward, then that line; the traceback comes after."""
import asyncio

import pytest
from tinyenv import BOOM, DUPLICATE, make_env_dir

from awm_engine.agent.policies import AssistantTurn, NativeCall, ScriptedTurns
from awm_engine.agent.replay import traced_steps
from awm_engine.agent.rollout import AgentConfig
from awm_engine.data.catalog import Catalog
from awm_engine.data.error_text import error_title, exception_line
from awm_engine.eval.episode import run_episode

CHAINED = '''Traceback (most recent call last):
  File "/venv/sqlalchemy/engine/base.py", line 1967, in _exec_single_context
    self.dialect.do_execute(
sqlite3.IntegrityError: UNIQUE constraint failed: vehicles.user_id, vehicles.vin

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "<env>", line 40, in create_vehicle
    db.commit()
sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE constraint failed: vehicles.user_id, vehicles.vin
[SQL: INSERT INTO vehicles (user_id, vin) VALUES (?, ?)]
[parameters: (1, '1FTFW1E50JFB12345')]
(Background on this error at: https://sqlalche.me/e/21/gkpj)
'''


@pytest.mark.parametrize("text, line", [
    (CHAINED, "IntegrityError: UNIQUE constraint failed: vehicles.user_id, vehicles.vin"),
    ("Traceback (most recent call last):\n  File \"<env>\", line 3, in f\n    x['status']\nKeyError: 'status'\n",
     "KeyError: 'status'"),
    ("Traceback (most recent call last):\n  File \"<env>\", line 3, in f\n    next(it)\nStopIteration\n",
     "StopIteration"),
    ("Traceback (most recent call last):\n  File \"<env>\", line 3, in f\n    raise E('a\\nb')\n"
     "mymod.BadThing: first line\nsecond line of the message\n", "BadThing: first line"),
    ("", ""),
    (None, ""),
])
def test_exception_line(text, line):
    assert exception_line(text) == line


def test_error_title_without_a_traceback_is_the_texts_first_line():
    assert error_title("\n  Error calling x. Status code: 422.\nmore", None) == "Error calling x. Status code: 422."
    assert error_title("ignored", CHAINED).startswith("IntegrityError: UNIQUE constraint failed")


@pytest.fixture
def run(tmp_path):
    data = make_env_dir(tmp_path / "data", {"boom": BOOM + DUPLICATE})
    catalog = Catalog.load([data])
    turns = [AssistantTurn("", [NativeCall("c1", "add_first_again", "{}")])]
    asyncio.run(run_episode(catalog, catalog.get("boom"), 0, ScriptedTurns(turns, "gave up"),
                            AgentConfig(mode="native"), tmp_path / "run", verify_mode=None))
    return tmp_path / "run"


WANTED = "IntegrityError: UNIQUE constraint failed: notes.id"


async def test_verdict_transcript_and_replay_lead_with_the_exception(run):
    from rich.console import Console
    from textual.widgets import Static

    from awm_tui.app import AwmApp
    from awm_tui.widgets.transcript import Transcript
    from awm_tui.widgets.verdict import render_verdict

    step = traced_steps(run)[0]
    assert "Background on this error" in step.traceback  # SQLAlchemy's trailer is the traceback's last line

    def lines(renderable, width=80) -> list[str]:
        console = Console(width=width, record=True)
        console.print(renderable)
        return [line for line in console.export_text().splitlines() if line.strip()]

    verdict = lines(render_verdict({"label": "others", "reward": 0.0}, 1, "final_answer", traced=[step]), width=60)
    assert verdict[0].startswith("Verdict  label others   reward 0.0")  # first, at any width
    verdict = lines(render_verdict({"label": "others", "reward": 0.0}, 1, "final_answer", traced=[step]), width=200)
    summary = next(i for i, line in enumerate(verdict) if "add_first_again → 500" in line)
    assert verdict[summary].endswith("turn 1 · add_first_again → 500 · " + WANTED)
    assert summary < next(i for i, line in enumerate(verdict) if line.startswith("Traceback (most recent"))

    app = AwmApp(None, cursor_blink=False, runs_root=run.parent)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_replay(run)
        for _ in range(600):
            if getattr(app.screen, "run", None) is not None and app.screen.query("#step-text"):
                break
            await pilot.pause(0.05)
        screen = app.screen
        index = next(i for i, s in enumerate(screen.run.steps) if s.traceback)
        screen.show_step(index)
        shown = lines(screen.query_one("#step-text", Static).content, width=200)
        at = shown.index("← observation")
        assert shown[at + 1].strip() == WANTED  # before the observation text and the traceback

        from awm_engine.data.run_formats import Observation

        transcript = Transcript()
        await screen.mount(transcript)
        transcript.add_event(Observation(1, "c1", "add_first_again", "Error calling add_first_again. Status code: "
                                         "500. Response: Internal Server Error", True, "http_5xx", 500, 1.0,
                                         step.traceback))
        for _ in range(200):
            if transcript.query(Static):
                break
            await pilot.pause(0.05)
        first = lines(transcript.query(Static).first().content, width=200)
        assert first == [WANTED]


def test_awm_replay_verify_and_env_call_lead_with_the_exception(run, capsys):
    import json

    from awm_engine.cli import main as awm

    assert awm(["replay", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if "add_first_again" in line)
    assert lines[at + 1].strip() == f"→ 500 · {WANTED}"  # before the traceback
    assert lines[at + 2].strip().startswith("Traceback (most recent call last):")
    assert awm(["replay", str(run), "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [s["exception"] for s in steps if s["traceback"]] == [WANTED]
    data = run.parent / "data"
    awm(["verify", str(run), "--mode", "code", "--data", str(data)])
    out = capsys.readouterr().out
    assert f"environment error: turn 1 · add_first_again → 500 · {WANTED}" in out
    awm(["env", "call", "boom", "add_first_again", "--data", str(data)])
    err = capsys.readouterr().err
    assert WANTED in err.splitlines()[:3]


async def test_an_eval_run_and_its_dashboard_lead_with_the_exception(tmp_path):
    """``awm eval run``'s record keeps the first environment error's line (``env_error``) and the dashboard's
    rollout table shows it next to the failure class."""
    import json

    from awm_engine.cli import main as awm
    from awm_tui.app import AwmApp
    from awm_tui.screens.evals import EvalScreen

    data = make_env_dir(tmp_path / "data", {"boom": BOOM + DUPLICATE})
    (data / "reference_solutions.jsonl").write_text(json.dumps(
        {"scenario": "boom", "task_idx": 0, "task": "x", "calls": [{"tool": "add_first_again", "arguments": {}}],
         "final_answer": "done"}) + "\n")
    out = tmp_path / "runs" / "eval" / "one"
    # no verifier in this environment: nothing is scored (exit 1), the rollout and its record are there
    assert await asyncio.to_thread(awm, ["eval", "run", "--policy", "oracle", "--data", str(data), "--scenario",
                                         "boom", "--task", "0", "-k", "1", "--workers", "1", "--out", str(out),
                                         "--quiet"]) == 1
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert record["env_error"] == f"add_first_again: {WANTED}"
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(160, 36)) as pilot:
        app.open_evaluations()
        for _ in range(2400):
            if isinstance(app.screen, EvalScreen) and app.screen.query("#rollout-table") \
                    and app.screen.query_one("#rollout-table").rows:
                break
            await pilot.pause(0.05)
        row = app.screen.query_one("#rollout-table").rows[0]
        assert row[-1].endswith(f"· add_first_again: {WANTED}"), row
