"""The generation run view (``awm-tui --gen DIR``; CLI twin ``awm gen status DIR``): with Pilot on runs made by the
scripted model (a finished one, one whose stage failed), on hand-written runs (a run that grows while shown,
malformed or missing records), and an SVG snapshot of a hand-written run (no times, no temporary paths)."""
from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

from rich.console import Console
from textual.widgets import DataTable, Static

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_tui.actions import ACTIONS
from awm_tui.app import AwmApp
from awm_tui.screens.environment import EnvironmentScreen
from awm_tui.screens.gen import COLUMNS, GenRunScreen

sys.path.insert(0, str(Path(__file__).parent))
from gen_script import SCENARIO, SEEDS, script  # noqa: E402
from test_tui_snapshots import settle, wait_until  # noqa: E402

SIZE = (120, 36)


def text_of(widget: Static) -> str:
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def table_rows(screen) -> dict[str, dict[str, str]]:
    table = screen.query_one("#gen-table", DataTable)
    rows = {}
    for i in range(table.row_count):
        cells = [str(c) for c in table.get_row_at(i)]
        rows[cells[0]] = dict(zip(COLUMNS, cells))
    return rows


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


# -- hand-written runs --------------------------------------------------------------------------------------

def attempt(scenario, stage, n, ok, errors=(), tokens=(100, 20), seconds=0.5, task=None):
    return {"kind": "attempt", "scenario": scenario, "stage": stage, "attempt": n, "ok": ok, "errors": list(errors),
            "score": None, "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "seconds": seconds,
            "task": task, "time": 1.0, "format_version": 1}


def stage(scenario, name, status, attempts, last_error=None, **extra):
    return {"kind": "stage", "scenario": scenario, "stage": name, "status": status, "attempts": attempts,
            "chosen": attempts if status != "failed" else None, "last_error": last_error, "time": 1.0,
            "format_version": 1, **extra}


def write_run(out: Path, names: list[str], events: list[dict], config: dict | None = None) -> Path:
    (out / ".awm-gen").mkdir(parents=True, exist_ok=True)
    (out / ".awm-gen" / "config.json").write_text(json.dumps(
        config if config is not None else {"model": "scripted", "base_url": "http://model/v1", "price_in": 2.0,
                                           "price_out": 8.0, "format_version": 1}))
    (out / "gen_scenario.jsonl").write_text("".join(json.dumps({"name": n, "description": f"{n}."}) + "\n"
                                                    for n in names))
    (out / ".awm-gen" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return out


LIBRARY, FERRY, BAKERY = "Tiny Lending Library", "Harbor Ferry Tickets", "Corner Bakery Orders"
DDL_ERROR = ("Table trips: near \"DEFAULT\": syntax error\nStatement: CREATE TABLE trips (id INTEGER PRIMARY KEY, "
             "departs TEXT DEFAULT, ferry_id INTEGER REFERENCES ferries(id));")


def three_scenarios(out: Path) -> Path:
    """A finished scenario (one verifier kept), one whose db stage failed, one in the middle of sample data."""
    events = [attempt("*", "scenario", 1, True, tokens=(400, 120))]
    for name in (LIBRARY, FERRY, BAKERY):
        events.append(stage(name, "scenario", "done", 1))
    for name in (LIBRARY, FERRY, BAKERY):
        events += [attempt(name, "task", 1, True, tokens=(200, 40)), stage(name, "task", "done", 1)]
    events += [attempt(LIBRARY, "db", 1, False, ["Table books: near \",\": syntax error"], (260, 90)),
               {"kind": "summary", "scenario": LIBRARY, "stage": "db", "prompt_tokens": 80, "completion_tokens": 30},
               attempt(LIBRARY, "db", 2, True, tokens=(360, 130)), stage(LIBRARY, "db", "done", 2)]
    for name, n in (("sample", 1), ("spec", 1), ("env", 1)):
        events += [attempt(LIBRARY, name, n, True, tokens=(500, 300), seconds=1.5), stage(LIBRARY, name, "done", 1)]
    events += [attempt(LIBRARY, "verifier-code", 1, True, tokens=(300, 80), task=0),
               stage(LIBRARY, "verifier-code", "done", 1, task=0),
               attempt(LIBRARY, "verifier-code", 1, False, ["verifier raised: KeyError: 'loans'"], (300, 80), task=1),
               attempt(LIBRARY, "verifier-code", 2, False, ["returns complete on the initial database"], (340, 90),
                       task=1),
               stage(LIBRARY, "verifier-code", "kept", 2, "returns complete on the initial database", task=1),
               stage(LIBRARY, "verifier", "kept", 2, "task 1 (code): returns complete on the initial database"),
               {"kind": "problems", "scenario": LIBRARY, "counts": {"error": 0, "warning": 1, "info": 2},
                "summary": "1 warning · 2 info", "problems": [], "time": 1.0}]
    for n in (1, 2, 3):
        events.append(attempt(FERRY, "db", n, False, [DDL_ERROR], (300 + 10 * n, 100)))
    events.append(stage(FERRY, "db", "failed", 3, DDL_ERROR))
    events += [attempt(BAKERY, "db", 1, True, tokens=(250, 90)), stage(BAKERY, "db", "done", 1),
               attempt(BAKERY, "sample", 1, False, ["Table orders - IntegrityError: FOREIGN KEY constraint failed"],
                       (280, 150))]
    return write_run(out, [LIBRARY, FERRY, BAKERY], events)


# -- runs made by the scripted model -------------------------------------------------------------------------

def finished_run(tmp_path: Path) -> Path:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("".join(json.dumps(s) + "\n" for s in SEEDS))
    out = tmp_path / "gen"
    with FakeLLMServer(script()) as llm:
        assert awm(["gen", "all", "--seeds", str(seeds), "--out", str(out), "--model", "gen", "--base-url", llm.url,
                    "-n", "1", "--tasks", "3", "--verifier-mode", "code", "--json"]) == 0
    return out


async def test_a_finished_run_opens_its_environment_with_the_runs_catalog(tmp_path, capsys):
    out = await asyncio.to_thread(finished_run, tmp_path)
    capsys.readouterr()
    app = AwmApp(None, cursor_blink=False, gen=out)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, GenRunScreen) and app.screen.keys)
        await settle(pilot)
        screen = app.screen
        row = table_rows(screen)[SCENARIO["name"]]
        assert [row[s].split()[0] for s in ("task", "db", "sample", "spec", "env", "verifier")] == ["done"] * 6
        assert row["db"] == "done ×2" and row["spec"] == "done ×3"  # each stage was repaired after failing first
        assert int(row["tokens"].replace(",", "")) > 0 and row["problems"] not in ("—", "")
        detail = text_of(screen.query_one("#gen-detail-body", Static))
        assert "finished — enter opens it" in detail
        assert "cut off by the token limit" in detail and "FOREIGN KEY constraint failed" in detail  # whole errors
        usage = text_of(screen.query_one("#gen-usage", Static))
        assert "per stage: scenario" in usage and "verifier" in usage
        assert f"awm gen status {out}" in text_of(screen.query_one("#gen-head", Static))
        own_catalog = app.catalog
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentScreen), what="the environment screen")
        await settle(pilot)
        assert app.screen.scenario.key == "tiny_lending_library"
        assert Path(app.screen.scenario.data_dir).resolve() == out.resolve()
        assert "tiny_lending_library" in app.catalog  # play and rollouts from here use the run's catalog
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen and app.catalog is own_catalog  # the app's own catalog again


async def test_a_failed_stage_is_shown_and_the_scenario_does_not_open(tmp_path, capsys):
    out = tmp_path / "gen"
    out.mkdir()
    (out / "gen_scenario.jsonl").write_text(json.dumps(SCENARIO) + "\n")
    replies = {"rules": [{"match": "stage: task ·", "responses": [{"status": 500, "body": "model overloaded"}]},
                         {"match": "summarize errors", "responses": [{"content": ""}]}]}
    with FakeLLMServer(replies) as llm:
        code = await asyncio.to_thread(awm, ["gen", "task", "--out", str(out), "--model", "g", "--base-url", llm.url,
                                             "--retries", "1", "--tasks", "2", "--endpoint-waits", "0"])
    assert code == 1
    capsys.readouterr()
    app = AwmApp(None, cursor_blink=False, gen=out)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, GenRunScreen) and app.screen.keys)
        await settle(pilot)
        row = table_rows(app.screen)[SCENARIO["name"]]
        assert row["task"] == "failed ×2"
        assert all(row[s] == "pending" for s in ("db", "sample", "spec", "env", "verifier"))
        detail = text_of(app.screen.query_one("#gen-detail-body", Static))
        assert "not finished: its task stage is failed" in detail
        assert "last error:" in detail and "failed" in detail and "InternalServerError" in detail
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, GenRunScreen)
        assert any("not finished: its task stage is failed" in m for m in messages(app))


async def test_the_view_follows_a_running_run_and_reads_only_on_change(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = three_scenarios(tmp_path / "gen")
    reads = []
    from awm_tui.screens import gen as gen_screen

    real = gen_screen.load_status
    monkeypatch.setattr(gen_screen, "load_status", lambda path: reads.append(path) or real(path))
    app = AwmApp(None, cursor_blink=False, gen="gen")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, GenRunScreen) and app.screen.keys)
        screen = app.screen
        rows = table_rows(screen)
        assert rows[LIBRARY]["verifier"] == "kept ×3" and rows[LIBRARY]["problems"] == "1 warning · 2 info"
        assert rows[FERRY]["db"] == "failed ×3" and rows[FERRY]["sample"] == "pending"
        assert rows[BAKERY]["sample"] == "running" and rows[BAKERY]["spec"] == "pending"
        await pilot.pause(2.5)
        assert len(reads) == 1  # nothing changed: nothing read again
        screen.query_one("#gen-table", DataTable).move_cursor(row=2)  # the bakery stays highlighted
        with open(out / ".awm-gen" / "events.jsonl", "a") as fh:
            fh.write(json.dumps(attempt(BAKERY, "sample", 2, True)) + "\n")
            fh.write(json.dumps(stage(BAKERY, "sample", "done", 2)) + "\n")
        await wait_until(pilot, lambda: table_rows(screen)[BAKERY]["sample"] == "done ×2", what="the new event")
        assert screen.highlighted_key() == "corner_bakery_orders"
        assert "sample  done" in text_of(screen.query_one("#gen-detail-body", Static))
        await pilot.press("d")  # into the detail pane (to scroll it), and back
        assert app.focused is screen.query_one("#gen-detail")
        await pilot.press("d")
        assert app.focused is screen.query_one("#gen-table")
        await pilot.press("enter")
        await settle(pilot)
        assert any("Corner Bakery Orders is not finished: its spec stage is pending" in m for m in messages(app))


async def test_malformed_and_missing_records_show_an_error_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = AwmApp(None, cursor_blink=False, gen="gen")  # not there yet: said, and waited for
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, GenRunScreen))
        screen = app.screen
        error = screen.query_one("#gen-error", Static)
        await wait_until(pilot, lambda: "no generation run at gen yet" in text_of(error), what="the missing run")
        assert error.display
        (tmp_path / "gen").mkdir()  # an empty directory: no scenarios, no error
        await wait_until(pilot, lambda: not error.display, what="the empty run")
        assert "0 scenarios: none yet" in text_of(screen.query_one("#gen-head", Static))
        three_scenarios(tmp_path / "gen")
        await wait_until(pilot, lambda: len(screen.keys) == 3, what="the run")
        with open(tmp_path / "gen" / ".awm-gen" / "events.jsonl", "a") as fh:
            fh.write('{"kind": "attempt", "stage": "db", "scenario": "Harbor Ferry Tickets", "prompt_tokens": "many"}\n')
            fh.write("not json at all\n[1, 2]\n")
        # the engine reads each field on its own: the odd attempt counts (with 0 tokens), the odd lines are left out
        await wait_until(pilot, lambda: table_rows(screen)[FERRY]["db"] == "failed ×4", what="the odd attempt")
        assert not error.display and len(screen.keys) == 3
    # a run whose records are all odd: nothing crashes, each field that cannot be read is left out
    odd = write_run(tmp_path / "odd", [LIBRARY, "", "Harbor Ferry Tickets"], [
        {"kind": "attempt", "scenario": LIBRARY, "stage": "db", "attempt": "one", "errors": "a plain string",
         "seconds": "slow"},
        {"kind": "attempt", "scenario": LIBRARY, "stage": "verifier-sql", "errors": None, "task": "x"},
        {"kind": "stage", "scenario": LIBRARY, "stage": "db", "status": "failed", "last_error": ["a", "list"]},
        {"kind": "problems", "scenario": LIBRARY, "counts": "lots", "summary": None},
        {"kind": "internal_error", "scenario": LIBRARY, "error": "[bold]not markup[/bold"},
        {"kind": "attempt", "scenario": "Harbor Ferry Tickets", "stage": "db", "errors": [{"not": "text"}]}],
        config={"model": ["odd"], "price_in": "free"})
    app = AwmApp(None, cursor_blink=False, gen=odd)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, GenRunScreen) and app.screen.keys)
        await settle(pilot)
        rows = table_rows(app.screen)
        assert rows[LIBRARY]["db"] == "failed" and rows[LIBRARY]["problems"] == "internal error"
        detail = text_of(app.screen.query_one("#gen-detail-body", Static))
        assert "a plain string" in detail and "[bold]not markup[/bold" in detail
        await pilot.press("down")
        await settle(pilot)
        assert "{'not': 'text'}" in text_of(app.screen.query_one("#gen-detail-body", Static))


async def test_palette_lists_generation_runs_and_the_keys_name_their_cli_twin(tmp_path):
    three_scenarios(tmp_path / "runs" / "gen-a")
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.gen_runs() == [tmp_path / "runs" / "gen-a"]
        await pilot.press("ctrl+p", *"generation run: gen-a")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, GenRunScreen) and app.screen.keys)
        assert app.screen.out == tmp_path / "runs" / "gen-a"
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, GenRunScreen)
    gen_actions = [a for a in ACTIONS if a.scope == "gen"]
    assert {a.id for a in gen_actions} == {"gen.open", "gen.detail", "gen.reload", "gen.back"}
    assert all(a.cli for a in gen_actions if a.id != "gen.back")


def test_awm_tui_gen_opens_the_view(tmp_path, monkeypatch):
    from awm_tui import app as app_module

    opened = []
    monkeypatch.setattr(app_module, "harden_parent", lambda: None)  # not this test process
    monkeypatch.setattr(app_module.AwmApp, "run", lambda self: opened.append(self.gen_dir))
    assert app_module.main(["--gen", str(tmp_path / "gen")]) == 0
    assert opened == [str(tmp_path / "gen")]


def test_snapshot_generation_run(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the run is shown as "gen": the same picture on every machine
    three_scenarios(tmp_path / "gen")

    async def run_before(pilot):
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, GenRunScreen) and pilot.app.screen.keys)
        await pilot.press("down")  # the scenario whose db stage failed: its attempts and last error
        await settle(pilot)

    assert snap_compare(AwmApp(None, cursor_blink=False, gen="gen"), terminal_size=SIZE, run_before=run_before)
