"""Every TUI entry point with an unusable argument says why (issue 27 item 3): awm-tui refuses a path that is not
there (exit 2, as the CLI), an empty data directory opens with the reason in the status line and a notification,
the dashboard lists runs started by another process while it is open, and the catalog picks up health written by
another process (`awm env test`)."""
import asyncio
import shutil
from pathlib import Path

import pytest
from textual.widgets import OptionList, Static

from awm_engine.cli import main as awm
from awm_tui.app import AwmApp
from awm_tui.app import main as tui_main
from awm_tui.screens.evals import EvalScreen

SAMPLES = Path(__file__).resolve().parent.parent / "sample_envs"


async def wait_until(pilot, predicate, timeout=120.0, what="the UI"):
    for _ in range(int(timeout / 0.1)):
        if predicate():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("argv, said", [
    (["--data", "{tmp}/nowhere"], "--data {tmp}/nowhere: no such directory"),
    (["--data", "{tmp}/afile"], "--data {tmp}/afile: not a directory"),
    (["--eval", "{tmp}/nowhere"], "--eval {tmp}/nowhere: no such directory"),
    (["--eval", "{tmp}/afile"], "--eval {tmp}/afile: not a directory"),
    (["--eval", "{tmp}"], "neither an evaluation run nor a folder of them"),
    (["--replay", "{tmp}/nowhere"], "--replay {tmp}/nowhere: no such directory"),
    (["--report", "{tmp}/nowhere"], "--report {tmp}/nowhere: no such directory"),
    (["--tau2-data", "{tmp}/nowhere"], "--tau2-data {tmp}/nowhere: no such directory"),
])
def test_unusable_paths_are_refused_before_the_tui_starts(argv, said, tmp_path, capsys):
    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(SystemExit) as exit_info:
        tui_main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert exit_info.value.code == 2
    assert said.replace("{tmp}", str(tmp_path)) in capsys.readouterr().err


def status_text(app) -> str:
    return str(app.screen.query_one("#status", Static).render())


async def test_an_empty_data_directory_says_why(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    app = AwmApp([str(empty)], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: "no AWM environments in" in status_text(app), what="the empty state")
        assert "0 of 0" not in status_text(app)
        assert any("no AWM environments" in n.message for n in app._notifications)
        await pilot.press("slash", "x")  # filtering keeps the reason
        await wait_until(pilot, lambda: app.screen.query_one("#search").value == "x")
        assert "no AWM environments in" in status_text(app)


def oracle_run(out: Path) -> list[str]:
    return ["eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "-k", "1", "--concurrency",
            "1", "--workers", "1", "--out", str(out), "--quiet"]


async def test_the_dashboard_lists_a_run_started_while_it_is_open(tmp_path):
    root = tmp_path / "runs" / "eval"
    assert await asyncio.to_thread(awm, oracle_run(root / "first")) == 0
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(120, 36)) as pilot:
        app.open_evaluations()
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen) and len(app.screen.runs) == 1)
        screen = app.screen
        shown = screen.view.path
        assert await asyncio.to_thread(awm, oracle_run(root / "second")) == 0  # as another process would
        await wait_until(pilot, lambda: len(screen.runs) == 2, what="the new run listed")
        assert screen.query_one("#runs", OptionList).option_count == 2
        assert screen.view.path == shown  # the run being looked at stays


async def test_eval_on_a_folder_of_runs_opens_it(tmp_path):
    root = tmp_path / "elsewhere"
    assert await asyncio.to_thread(awm, oracle_run(root / "one")) == 0
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path / "runs", evaluation=root)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen) and app.screen.runs)
        assert app.screen.root == root


async def test_the_catalog_picks_up_health_written_by_another_process(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(SAMPLES, data)
    app = AwmApp([str(data)], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(140, 36)) as pilot:
        await wait_until(pilot, lambda: app.screen.rows, what="the catalog")
        row = next(r for r in app.screen.rows if r.key == "maple_library_lending")
        assert row.health == "—"
        assert await asyncio.to_thread(awm, ["env", "test", "--scenario", "maple_library_lending", "--data", str(data)]) == 0
        await wait_until(pilot, lambda: row.health != "—", what="the new health cell")
        assert row.health.startswith("ok")
