"""No escape sequence from untrusted text reaches the terminal (issue 23, item 7): tool results, tool and scenario
descriptions, task text, tracebacks, model and judge output, a run's record — through the real CLI commands and
the TUI. The hostile environment carries OSC 52 (clipboard write), clear screen, a window title, the one-byte C1
CSI, DEL and a bidi override."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from awm_engine.data.terminal import is_safe, json_visible, visible
from tests.tinyenv import FOOTER, HEADER, SAMPLE, SCHEMA

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # "pwned" onto the clipboard
EVIL = OSC52 + "\x1b[2J" + "\x1b]0;pwned-title\x07" + "\x9b2J" + "\u202e" + "\x7fend"
SEEN = "\\x1b]52;c;cHduZWQ=\\x07"  # how OSC52 is shown: visible() escapes
SCENARIO = "hostile_terminal"

ROUTES = f'''
from fastapi.responses import PlainTextResponse

class C1Out(BaseModel):
    text: str

@app.get("/api/shout", summary={("Shout " + EVIL)!r}, description={("Says " + EVIL)!r}, tags=["x"],
         operation_id="shout", response_class=PlainTextResponse)
async def shout():
    return PlainTextResponse({EVIL!r})

@app.get("/api/c1", summary="C1", description="JSON with C1 controls.", tags=["x"], operation_id="c1",
         response_model=C1Out)
async def c1():
    return C1Out(text={EVIL!r})

@app.get("/api/boom", summary="Boom", description="Raises.", tags=["x"], operation_id="boom", response_model=C1Out)
async def boom():
    raise ValueError({("kaboom " + EVIL)!r})
'''

SQL_VERIFIER = f"def verify_task(initial_db_path: str, final_db_path: str) -> dict:\n    return {{'seen': {EVIL!r}}}\n"


def hostile_env(root: Path) -> Path:
    """An AWM data directory whose description, tasks, tool metadata, results, tracebacks, database rows and verifier
    output all carry escape sequences."""
    root.mkdir(parents=True, exist_ok=True)
    sample = json.loads(json.dumps(SAMPLE))
    sample["tables"][0]["insert_statements"].append(
        "INSERT INTO notes (id, text) VALUES (3, 'row' || char(27) || ']52;c;cHduZWQ=' || char(7) || char(155));")
    rows = {
        "gen_scenario": {"name": "Hostile Terminal", "description": "Desc " + EVIL},
        "gen_tasks": {"scenario": SCENARIO, "tasks": ["Shout " + EVIL, "List notes."]},
        "gen_db": {"scenario": SCENARIO, "db_schema": SCHEMA},
        "gen_sample": {"scenario": SCENARIO, "sample_data": sample},
        "gen_envs": {"scenario": SCENARIO, "full_code": HEADER + ROUTES + FOOTER},
        "gen_verifier": {"scenario": SCENARIO, "task_idx": 0, "verification": {"code": SQL_VERIFIER}},
    }
    for name, row in rows.items():
        (root / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
    return root


RAW = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def assert_clean(data: bytes, what: str) -> None:
    """No control byte (ESC, BEL, DEL, …), no C1 control, no bidi override in ``data``."""
    found = RAW.search(data)
    assert found is None, f"{what}: raw {found.group()!r} at {found.start()}: {data[max(0, found.start() - 40):][:120]!r}"


def awm(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "awm_engine.cli", *args], input=stdin.encode() if stdin else None,
                          capture_output=True, timeout=300)
    assert_clean(proc.stdout, f"stdout of awm {' '.join(args)}")
    assert_clean(proc.stderr, f"stderr of awm {' '.join(args)}")
    return proc


@pytest.fixture
def data(tmp_path) -> Path:
    return hostile_env(tmp_path / "data")


def test_visible_makes_every_control_visible_and_leaves_text_alone():
    assert visible("naïve 中文 ✓ tab\tnew\nline \\x1b") == "naïve 中文 ✓ tab\tnew\nline \\x1b"
    assert visible(EVIL) == ("\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x1b]0;pwned-title\\x07\\x9b2J\\u202e\\x7fend")
    assert visible("a\r\nb\rc") == "a\nb\\x0dc"  # a CRLF line end is a line end; a lone CR could overwrite
    assert visible("\u2066x\u2069\ud800") == "\\u2066x\\u2069\\ud800"
    assert visible(12) == "12" and is_safe("plain") and not is_safe(EVIL)
    dumped = json.dumps({"k": EVIL + "\ud800"}, ensure_ascii=False)
    safe = json_visible(dumped)
    assert json.loads(safe) == json.loads(dumped) and is_safe(safe.replace("\n", ""))


def test_rich_console_of_the_cli_writes_no_control_character():
    import io

    from rich.table import Table
    from rich.text import Text

    from awm_engine.cli.common import SafeConsole, shown

    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, width=100)
    console.print("str " + EVIL)
    console.print(Text("Text " + EVIL))  # a Text bypasses markup: the net as it is written
    console.print(f"[link=https://example.org]link[/link] {shown('[/red] ' + EVIL)}")
    table = Table()
    table.add_column("cell")
    table.add_row(shown(EVIL))
    console.print(table)
    written = out.getvalue()
    sgr = re.compile(r"\x1b\[[0-9;]*m")  # the console's own colours are the only escapes left
    plain = sgr.sub("", written)
    assert_clean(plain.encode(), "SafeConsole")
    assert "\x1b]" not in written  # no OSC at all: no clipboard, no title, no hyperlink
    # (rich's Text drops BEL itself; every ESC is shown)
    assert plain.count("\\x1b]52;c;cHduZWQ=") == 4 and "[/red]" in plain


def test_catalog_and_env_call_through_the_cli(data):
    shown_catalog = awm("catalog", "show", SCENARIO, "--data", str(data))
    assert shown_catalog.returncode == 0, shown_catalog.stderr
    out = shown_catalog.stdout.decode()
    assert f"Desc {SEEN}" in out and f"Shout {SEEN}" in out  # description, tool summary and task text, visible
    listed = awm("catalog", "list", "--data", str(data))
    assert listed.returncode == 0 and SCENARIO in listed.stdout.decode()
    as_json = awm("catalog", "show", SCENARIO, "--data", str(data), "--json")
    details = json.loads(as_json.stdout)  # JSON stays JSON: the same values, escaped
    assert details["description"] == "Desc " + EVIL and details["tasks"][0]["text"] == "Shout " + EVIL

    called = awm("env", "call", "--data", str(data), SCENARIO, "shout")
    assert called.returncode == 0, called.stderr
    assert called.stdout.decode().strip() == visible(EVIL)
    c1 = awm("env", "call", "--data", str(data), SCENARIO, "c1")  # a JSON body: fastapi-mcp's rendering keeps C1 raw
    assert "\\x9b2J\\u202e" in c1.stdout.decode()
    record = awm("env", "call", "--data", str(data), SCENARIO, "c1", "--json")
    assert json.loads(json.loads(record.stdout)["text"]) == {"text": EVIL}  # the result text is the JSON body
    boom = awm("env", "call", "--data", str(data), SCENARIO, "boom")
    assert boom.returncode == 1 and f"kaboom {SEEN}" in boom.stderr.decode()  # the traceback, visible


def test_human_player_transcript_replay_and_verify_through_the_cli(data, tmp_path):
    from awm_engine.agent.scripted_llm import FakeLLMServer

    run = tmp_path / "run"
    played = awm("agent", "run", "--data", str(data), "--scenario", SCENARIO, "--task", "0", "--policy", "human",
                 "--verify", "none", "--out", str(run), stdin="tools\nshout {}\nboom {}\nanswer done\n")
    assert played.returncode == 0, played.stderr
    err = played.stderr.decode()
    assert f"Shout {SEEN}" in err  # the task text, and the tool listing ('tools')
    assert f"← {SEEN}" in err and f"kaboom {SEEN}" in err  # the result and the traceback in the transcript

    replayed = awm("replay", str(run), "--data", str(data))
    assert replayed.returncode == 0 and f"kaboom {SEEN}" in replayed.stdout.decode()
    steps = json.loads(awm("replay", str(run), "--data", str(data), "--json").stdout)["steps"]
    assert steps[0]["observation"] == EVIL

    judge = {"classification": "complete", "reasoning": "Judged " + EVIL, "confidence_score": [90, 5, 3, 2],
             "evidence": {}}
    with FakeLLMServer({"responses": [{"content": "Model says " + EVIL}],
                        "rules": [{"match": "impartial", "responses": [{"content": json.dumps(judge)}]}]}) as llm:
        model_run = tmp_path / "model-run"
        modelled = awm("agent", "run", "--data", str(data), "--scenario", SCENARIO, "--task", "0", "--base-url",
                       llm.url, "--model", "scripted", "--verify", "none", "--out", str(model_run))
        assert modelled.returncode == 0, modelled.stderr
        assert f"Model says {SEEN}" in modelled.stderr.decode()  # the model's words in the live transcript
        verified = awm("verify", str(run), "--mode", "sql", "--data", str(data), "--judge-base-url", llm.url,
                       "--judge-model", "scripted")
        assert verified.returncode == 0, verified.stderr
        assert f"judge: Judged {SEEN}" in verified.stdout.decode()


async def test_tui_shows_hostile_text_visibly_and_writes_no_escape(data, tmp_path):
    """Overview, tool detail, task detail, the Data tab and a played tool call: every escape sequence is shown as
    text; the bytes Textual would write to the terminal hold no OSC, BEL, C1 or bidi control."""
    from textual.widgets import OptionList

    from awm_tui.app import AwmApp
    from awm_tui.screens.play import PlayScreen
    from tests.test_tui_play import wait_until as until

    def terminal_output(app) -> str:
        """What Textual would write to the terminal for the whole screen now."""
        return app.screen._compositor.render_update(full=True).render_segments(app.console)

    def assert_screen_clean(app, what: str) -> str:
        out = terminal_output(app)
        assert "\x1b]" not in out and "\x07" not in out, what  # no OSC (clipboard, title, hyperlink), no BEL
        assert "\x1b[2J" not in out, what
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # Textual's own CSI (cursor moves, colours) removed
        assert_clean(text.encode(), what)
        return text

    app = AwmApp([str(data)], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.catalog is not None)
        app.open_environment(SCENARIO)
        await until(pilot, lambda: app.screen.__class__.__name__ == "EnvironmentScreen")
        screen = app.screen
        assert "Desc \\x1b]52" in assert_screen_clean(app, "overview")
        await pilot.press("4")
        await pilot.pause()
        tools = screen.query_one("#tool-list", OptionList)
        tools.highlighted = [t.name for t in screen.tools].index("shout")
        await pilot.pause()
        assert "Says \\x1b]52" in assert_screen_clean(app, "tool detail")
        await pilot.press("5")
        await pilot.pause()
        assert "Shout \\x1b]52" in assert_screen_clean(app, "task detail")
        await pilot.press("3")
        await until(pilot, lambda: "rows 1–3 of 3" in str(screen.query_one("#data-status").render()))
        assert "row\\x1b]52" in assert_screen_clean(app, "data tab")

        await pilot.press("5")
        screen.query_one("#task-list", OptionList).highlighted = 0
        await pilot.press("ctrl+g")
        await until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.tools)
        play = app.screen
        play.query_one("#play-tools", OptionList).highlighted = [t["name"] for t in play.tools].index("shout")
        await pilot.pause()
        transcript = play.query_one("#transcript")
        before = len(transcript.events)
        await pilot.press("ctrl+j")
        await until(pilot, lambda: len(transcript.events) >= before + 3)
        await pilot.pause()
        out = assert_screen_clean(app, "play: the tool result in the transcript")
        assert "\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J" in out
        result = str(transcript.children[-1].render())  # the observation, as the transcript shows it
        assert result == "← " + visible(EVIL)


async def test_tui_net_catches_text_that_reached_a_widget_raw():
    """A widget given raw hostile text (no ``visible`` at the source): the app's line filter still shows it as
    text."""
    from rich.text import Text
    from textual.screen import Screen
    from textual.widgets import Static

    from awm_tui.app import AwmApp

    class Raw(Screen):
        def compose(self):
            yield Static(Text("raw " + EVIL), id="raw")
            yield Static(EVIL, markup=False, id="str")

    app = AwmApp(None, cursor_blink=False)
    async with app.run_test(size=(100, 10)) as pilot:
        await pilot.pause()
        await app.push_screen(Raw())
        await pilot.pause()
        out = app.screen._compositor.render_update(full=True).render_segments(app.console)
        assert "\x1b]" not in out and "\x9b" not in out and "\u202e" not in out and "\x1b[2J" not in out
        assert "raw \\x1b]52;c;cHduZWQ=" in out
