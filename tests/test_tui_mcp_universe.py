"""MCP-Universe runs in the TUI and the table across benchmarks (issue 16).

The evaluation dashboard shows an MCP-Universe run like the other benchmarks: success rates per column (the paper's
domains, ``g`` for the AWM paper's columns), the tasks needing a live service counted apart, every task with its
verdict, the task view (each evaluator's verdict, the final answer, the transcript), and the offline-simulation
marking. ``b`` opens the table of ``awm bench report`` over the dashboard's runs, built by the same engine function.
Pilot tests, then SVG snapshots (fixed content: recorded runs at relative paths)."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.bench import report
from awm_engine.bench.mcp_universe import run as mcpu
from awm_engine.bench.mcp_universe import scores
from awm_engine.cli import main as awm
from awm_engine.data.run_formats import CONFIG
from awm_tui.app import AwmApp
from awm_tui.screens.evals import EvalScreen
from awm_tui.screens.mcp_universe import McpuTaskScreen
from awm_tui.screens.report import BenchReportScreen
from awm_tui.widgets.virtual_table import VirtualTable
from tests.test_bench_report import _results, awm_run, bfcl_run, tau2_run
from tests.test_bench_report import mcpu_run as simple_mcpu_run
from tests.test_tui_snapshots import settle, wait_until

SIZE = (140, 40)
RUNS = Path("runs")


def text_of(widget: Static) -> str:
    console = Console(width=400, record=True)
    console.print(widget.content)
    return console.export_text()


def _ev(func, op, status, reason="", needs=None):
    out = {"func": func, "status": status}
    if op:
        out["op"] = op
    if reason:
        out["reason"] = reason
    if needs:
        out["needs"] = needs
    return out


def _task(folder, stem, domain, column, label, evaluators, steps=3, **extra):
    needs = sorted({e["needs"] for e in evaluators if e.get("needs")})
    passed = sum(e["status"] == "pass" for e in evaluators)
    score = None if label == "needs" else passed / len(evaluators)
    return {"id": f"{folder}/{stem}", "scenario": folder, "task_id": stem, "sample": 0, "domain": domain,
            "awm_column": column, "status": "ok", "label": label, "steps": steps, "tool_calls": steps - 1,
            "stop_reason": "final_answer", "final_answer": json.dumps({"answer": stem}),
            "verdict": {"status": label, "needs": needs, "evaluator_score": score, "passed": passed,
                        "evaluators": evaluators}, **extra}


def recorded_run(root: Path, name: str = "mcpu-scripted", simulation: bool = True) -> Path:
    """An MCP-Universe run as `awm bench mcp-universe run` leaves it (recorded: no servers needed): tasks of every
    AWM column with each verdict, one errored rollout."""
    out = root / name
    records = [
        _task("browser_automation", "playwright_sports_task_0001", "Browser", "Browser", "pass",
              [_ev("json", "playwright.is_dict_equal", "pass")]),
        _task("browser_automation", "playwright_paper_task_0001", "Browser", "Browser", "fail",
              [_ev("json", "playwright.is_dict_equal", "fail", "keys differ (extra: ['Some paper'])")]),
        _task("location_navigation", "google_maps_task_0004", "Location", "Location", "pass",
              [_ev("json", "", "pass"), _ev("json -> get(routes) -> len", "=", "pass")], steps=2),
        _task("location_navigation", "google_maps_task_0001", "Location", "Location", "needs",
              [_ev("json", "", "pass"), _ev("json", "google_maps.route_exists", "needs", "needs google-maps",
                                            "google-maps")]),
        _task("financial_analysis", "yfinance_task_0001", "Financial", "Financial", "needs",
              [_ev("json", "yfinance.check_total_value", "needs", "needs yfinance", "yfinance")]),
        _task("web_search", "info_search_task_0001", "Web", "Web", "pass",
              [_ev("json -> get(answer)", "llm_as_a_judge", "pass")], steps=2),
        _task("multi_server", "multi-server_task_weather_google_map_0001", "Location", "Multi", "needs",
              [_ev("json", "", "pass"), _ev("json", "weather.check_forecast", "needs", "needs weather", "weather")]),
        {"id": "web_search/info_search_task_0002", "scenario": "web_search", "task_id": "info_search_task_0002",
         "sample": 0, "domain": "Web", "awm_column": "Web", "status": "error", "error_kind": "llm_error",
         "error": "the endpoint answered 503"},
    ]
    _results(out, records)
    config = mcpu.McpuConfig(mcp_universe="/nowhere", domains=["browser_automation", "location_navigation",
                                                                "financial_analysis", "web_search"],
                             endpoint={"model": "scripted"}, simulation=simulation)
    (out / CONFIG.file).write_text(json.dumps(config.to_dict()))
    mcpu.write_metadata(out, config, {"expected": 10, "running": False})
    return out


def make_app(**kwargs) -> AwmApp:
    return AwmApp(None, cursor_blink=False, runs_root=RUNS, **kwargs)


async def open_dashboard(pilot):
    app = pilot.app
    await settle(pilot)
    app.open_evaluations()
    await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen) and app.screen.is_mounted, what="dashboard")
    screen = app.screen
    await wait_until(pilot, lambda: screen.query_one("#rollout-table", VirtualTable).row_count > 0, what="tasks")
    await settle(pilot)
    return screen


async def open_task(pilot, screen, name: str) -> McpuTaskScreen:
    """enter on the dashboard's task ``name`` (as the task table shows it)."""
    tasks = screen.query_one("#rollout-table", VirtualTable)
    tasks.focus()
    tasks.cursor_row = [r[0] for r in tasks.rows].index(name)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, McpuTaskScreen), what="the task screen")
    await settle(pilot)
    return pilot.app.screen


async def open_report(pilot) -> BenchReportScreen:
    """b on the dashboard, once the table is shown."""
    await pilot.press("b")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, BenchReportScreen), what="the report")
    await wait_until(pilot, lambda: pilot.app.screen.table is not None, what="the table")
    await settle(pilot)
    return pilot.app.screen


def screen_text(screen) -> str:
    return "\n".join(text_of(s) for s in screen.query(Static))


# -- the dashboard ----------------------------------------------------------------------------------

async def test_dashboard_shows_an_mcp_universe_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = recorded_run(RUNS / "eval")
    records = [mcpu.task_result(r) for r in json.loads("[" + ",".join(
        (run / "results.jsonl").read_text().splitlines()) + "]")]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_dashboard(pilot)
        head = text_of(screen.query_one("#run-head", Static))
        assert "MCP-Universe" in head and "scripted" in head and "finished" in head
        assert "OFFLINE SIMULATION" in head  # --simulation: marked, never to be compared with published numbers
        assert "tasks 8/10" in head
        assert "not decided here, needs a service: google-maps 1, weather 1, yfinance 1" in head
        assert "(3/8 tasks, official" in head and "decided here only 75.00 % (3/4)" in head
        assert "errored 1" in head
        # per column: the engine's success rates, paper columns (the multi-server task inside Location)
        groups = screen.query_one("#scenario-table", VirtualTable)
        paper = scores.success_rates(records, "paper")["table"]
        assert groups.columns[:5] == ["column", "tasks", "passed", "scored", "SR %"]
        shown = {row[0]: row for row in groups.rows}
        assert set(shown) == {"Location", "Repository", "Financial", "3D", "Browser", "Web", "Overall"}
        assert shown["Repository"][1:] == ("–",) * 10 and shown["3D"][4] == "–"  # not in the run: never 0
        for column, row in shown.items():
            t = paper.get(column)
            if t is None:
                continue
            assert row[1:4] == (str(t["tasks"]), str(t["passed"]), str(t["scored"]))
            assert row[4] == scores.pct(t["sr"]) + "*" and row[6] == str(t["needs"]) and row[7] == str(t["errored"])
            assert row[10] == scores.pct(t["sr_decidable"])
        assert shown["Location"][1:4] == ("3", "1", "1")  # pass, needs, and the multi-server task (needs)
        assert shown["Overall"][1:4] == ("8", "3", "4") and shown["Overall"][6] == "3"
        # g: the AWM paper's columns (the multi-server task under Multi only)
        await pilot.press("g")
        await wait_until(pilot, lambda: any(r[0] == "Multi" for r in groups.rows), what="AWM columns")
        shown = {row[0]: row for row in groups.rows}
        assert shown["Location"][1:4] == ("2", "1", "1") and shown["Multi"][1:4] == ("1", "0", "0")
        assert "the AWM paper's columns" in text_of(screen.query_one("#run-head", Static))
        # every task with its verdict
        tasks = screen.query_one("#rollout-table", VirtualTable)
        assert tasks.row_count == 8
        verdicts = {row[0]: str(row[2]) for row in tasks.rows}
        assert verdicts["playwright_paper_task_0001"] == "fail"
        assert verdicts["multi:weather_google_map_0001"] == "needs"
        assert verdicts["info_search_task_0002"] == "error"
        paper_row = next(r for r in tasks.rows if r[0] == "playwright_paper_task_0001")
        assert "keys differ" in paper_row[-1]
        # enter on a task: each evaluator's verdict and reason
        body = screen_text(await open_task(pilot, screen, "playwright_paper_task_0001"))
        assert "FAIL" in body and "playwright.is_dict_equal" in body and "keys differ" in body
        assert "OFFLINE SIMULATION" in body and "playwright_paper_task_0001" in body
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen))


async def test_grouping_key_only_for_mcp_universe_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    awm_run(RUNS / "eval", "m1")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_dashboard(pilot)
        assert screen.check_action("toggle_grouping", ()) is False  # an AWM evaluation: no column switch
        assert screen.check_action("bench_report", ()) is True


async def test_malformed_results_lines_are_shown_not_fatal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = recorded_run(RUNS / "eval", simulation=False)
    odd = [{"id": "web_search/odd1", "status": "ok", "label": "maybe", "verdict": "not a dict"},
           {"id": "web_search/odd2", "status": "ok", "label": "fail", "verdict": {"evaluators": "x", "needs": [1]}},
           {"id": 7, "status": "ok", "steps": "many", "servers": "playwright"}]
    results = run / "results.jsonl"
    results.write_text(results.read_text() + "".join(json.dumps({"format_version": 1, **o}) + "\n" for o in odd)
                       + "{torn line")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_dashboard(pilot)
        tasks = screen.query_one("#rollout-table", VirtualTable)
        # the line whose id is no string is no record (eval.results skips it); the other odd ones are shown
        await wait_until(pilot, lambda: tasks.row_count == 10, what="every line")
        head = text_of(screen.query_one("#run-head", Static))
        assert "OFFLINE SIMULATION" not in head  # a run against real servers
        tasks.focus()
        for i in (8, 9):
            tasks.cursor_row = i
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, McpuTaskScreen), what="the task screen")
            await settle(pilot)
            assert "FAIL" in text_of(app.screen.query(".mcpu-section").first())  # unreadable verdicts fail, no crash
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen))


# -- a real run (stand-in servers, scripted model): the transcript, and replaying a rollout -------------

STANDINS = str(Path(__file__).with_name("mcpu_standins.py"))
CONFIGS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mcp-universe" / "configs"


async def test_a_real_run_task_screen_shows_the_transcript(tmp_path, monkeypatch):
    from tests.test_mcp_universe_e2e import SCRIPT

    if not (CONFIGS / "web_search.yaml").is_file():
        pytest.skip(f"MCP-Universe configs not found at {CONFIGS} (../shared is absent)")
    monkeypatch.chdir(tmp_path)
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {n: {"command": sys.executable, "args": [STANDINS, n]}
                                                  for n in ("playwright", "date")}}))
    out = RUNS / "eval" / "mcpu-real"
    with FakeLLMServer(SCRIPT) as llm:
        assert await asyncio.to_thread(awm, [
            "bench", "mcp-universe", "run", "--mcp-universe", str(CONFIGS), "--task", "playwright_sports_task_0001",
            "playwright_paper_task_0001", "--servers", str(servers), "--model", "scripted", "--base-url", llm.url,
            "--simulation", "--out", str(out), "--quiet"]) == 0
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_dashboard(pilot)
        tasks = screen.query_one("#rollout-table", VirtualTable)
        assert tasks.row_count == 2 and "tasks 2/2" in text_of(screen.query_one("#run-head", Static))
        body = screen_text(await open_task(pilot, screen, "playwright_paper_task_0001"))
        assert "→ playwright__browser_navigate" in body and "← 2025-08-20" in body and "(final answer)" in body
        assert '"Some paper": "2501.00001"' in body  # the final answer the evaluators read
        await pilot.press("escape")
        # replaying an MCP-Universe rollout (no database: its servers hold their state) opens its task screen
        rollout = out / "rollouts" / "browser_automation" / "playwright_sports_task_0001"
        app.open_replay(rollout)
        await wait_until(pilot, lambda: isinstance(app.screen, McpuTaskScreen), what="the replayed task")
        await settle(pilot)
        body = screen_text(app.screen)
        assert "PASS" in body and "OFFLINE SIMULATION" in body and "browser_snapshot" in body


# -- the table across benchmarks ------------------------------------------------------------------------

def four_benchmark_runs(root: Path) -> list[Path]:
    """Recorded runs of all four kinds for two models, made one minute apart (the dashboard lists runs by age)."""
    runs = [awm_run(root, "m1"), bfcl_run(root, "m1"), tau2_run(root, "m1"), simple_mcpu_run(root, "m1"),
            awm_run(root, "m2"), simple_mcpu_run(root, "m2")]
    for i, run in enumerate(runs):
        os.utime(run, (1_700_000_000 + 60 * i, 1_700_000_000 + 60 * i))
    return runs


async def test_report_screen_is_the_engine_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = four_benchmark_runs(RUNS / "eval")
    (RUNS / "eval" / "broken").mkdir()
    (RUNS / "eval" / "broken" / CONFIG.file).write_text(json.dumps({"benchmark": "someday"}))
    (RUNS / "eval" / "broken" / "results.jsonl").write_text("")  # a run of a benchmark the report cannot read
    app = make_app()
    async with app.run_test(size=(260, 40)) as pilot:
        screen = await open_dashboard(pilot)
        report_screen = await open_report(pilot)
        listed = report_screen.run_dirs
        assert sorted(map(str, listed)) == sorted(map(str, runs + [RUNS / "eval" / "broken"]))
        expected = report.build_table(listed)  # the same engine function, the same runs
        assert report_screen.table == expected
        table = text_of(report_screen.query_one("#report-table", Static))
        for title, columns in report.layout(expected)["groups"]:
            assert title in table and all(c in table for c in columns)
        lines = report.layout(expected, sep="\n")["rows"]
        assert [r[0] for r in lines] == ["m1", "m2"]
        for cells in lines:
            for cell in cells:
                assert all(part in table for part in cell.split("\n"))
        head = text_of(report_screen.query_one("#report-head", Static))
        assert "2 models from 7 runs (1 skipped)" in head and "awm bench report runs/eval/" in head
        notes = text_of(report_screen.query_one("#report-notes", Static))
        assert "offline simulation" in notes and "skipped" in notes and "broken" in notes
        await pilot.press("c")
        assert app.clipboard == report.markdown(expected)  # the CLI twin's --markdown
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen))
        assert screen is app.screen


async def test_awm_tui_report_flag_and_an_empty_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = [awm_run(RUNS / "eval", "m1"), simple_mcpu_run(RUNS / "eval", "m1")]
    app = make_app(report=runs)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, BenchReportScreen), what="the report")
        await wait_until(pilot, lambda: app.screen.table is not None, what="the table")
        assert [r["model"] for r in app.screen.table["rows"]] == ["m1"]
        await pilot.press("escape")
        app.open_report([])  # no runs: an empty table and how to make runs, no error
        await wait_until(pilot, lambda: isinstance(app.screen, BenchReportScreen) and app.screen.table is not None)
        await settle(pilot)
        assert "no runs here yet" in text_of(app.screen.query_one("#report-head", Static))


def test_report_tasks_is_the_dashboards_task_list(tmp_path, capsys):
    run = recorded_run(tmp_path)
    assert awm(["bench", "mcp-universe", "report", str(run), "--tasks", "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    assert [t["status"] for t in lines] == ["pass", "fail", "pass", "needs", "needs", "pass", "needs", "error"]
    assert lines[1]["reason"].startswith("json playwright.is_dict_equal: keys differ")
    assert lines[6]["needs"] == ["weather"] and lines[6]["evaluators"] == "1 pass · 1 needs"
    assert lines[7]["reason"] == "llm_error: the endpoint answered 503"
    assert awm(["bench", "mcp-universe", "report", str(run), "--tasks", "--markdown"]) == 0
    assert "| browser_automation/playwright_paper_task_0001 | Browser | Browser | fail |" in capsys.readouterr().out


# -- SVG snapshots ------------------------------------------------------------------------------------------

def test_snapshot_mcp_universe_dashboard(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recorded_run(RUNS / "eval")

    async def run_before(pilot):
        await open_dashboard(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_mcp_universe_task(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recorded_run(RUNS / "eval")

    async def run_before(pilot):
        await open_task(pilot, await open_dashboard(pilot), "multi:weather_google_map_0001")

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_report_across_benchmarks(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    four_benchmark_runs(RUNS / "eval")

    async def run_before(pilot):
        await open_dashboard(pilot)
        await open_report(pilot)

    assert snap_compare(make_app(), terminal_size=(250, 34), run_before=run_before)
