"""Red team 13: what hostile environments, data and clients could still do (each test names its finding)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tinyenv import make_env_dir  # noqa: E402

# a tool whose parameter schema carries keywords of the wrong type (FastAPI passes json_schema_extra through)
ODD_SCHEMA = '''
@app.get("/api/odd", summary="Odd", description="Odd schema.", tags=["bad"], operation_id="odd", response_model=NoteList)
async def odd(q: str = Query("x", json_schema_extra={"examples": 7, "enum": 5, "description": {"a": 1}})):
    return NoteList(notes=[])
'''


async def _wait(pilot, predicate, timeout=90.0, what="the UI"):
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_play_form_of_a_tool_with_odd_schema_keywords_does_not_crash_the_tui(tmp_path):
    """Finding: the play screen built a tool's form from its input schema as if every keyword had its JSON-Schema
    type: ``examples: 7`` (TypeError), ``enum: 5``, a non-text description, ``required: 5`` or a property that is
    not an object raised in the form builder and ended the whole TUI. The schema is the environment's (its code
    writes the OpenAPI document)."""
    from awm_tui.app import AwmApp
    from awm_tui.screens.play import PlayScreen

    data = make_env_dir(tmp_path / "data", {"Odd Env": ODD_SCHEMA})
    app = AwmApp([str(data)], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(120, 36)) as pilot:
        await _wait(pilot, lambda: app.catalog is not None and len(app.catalog))
        scenario = app.catalog.get("odd_env")
        app.push_screen(PlayScreen(scenario, 0))
        await _wait(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.tools and not app.screen.holding)
        screen = app.screen
        from textual.widgets import OptionList

        screen.query_one("#play-tools", OptionList).highlighted = [t["name"] for t in screen.tools].index("odd")
        await _wait(pilot, lambda: screen._built_for == "odd" or not app.is_running, what="the odd tool's form")
        assert screen._built_for == "odd" and "q" in screen.fields  # the form is there, its field too


DUPLICATE_NAMES = '''
@app.get("/api/dup/a", summary="Dup A", description="One.", tags=["bad"], operation_id="dup", response_model=NoteList)
async def dup_a():
    return NoteList(notes=[])

@app.get("/api/dup/b", summary="Dup B", description="Two.", tags=["bad"], operation_id="dup", response_model=NoteList)
async def dup_b():
    return NoteList(notes=[])
'''


async def test_play_with_two_tools_of_one_name_does_not_crash_the_tui(tmp_path):
    """Finding: two routes with one operation id are two tools of one name (FastAPI only warns); the play screen
    made each an option with the tool's name as its id, and the second id raised DuplicateID, ending the TUI."""
    from awm_tui.app import AwmApp
    from awm_tui.screens.play import PlayScreen

    data = make_env_dir(tmp_path / "data", {"Dup Env": DUPLICATE_NAMES})
    app = AwmApp([str(data)], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(120, 36)) as pilot:
        await _wait(pilot, lambda: app.catalog is not None and len(app.catalog))
        app.push_screen(PlayScreen(app.catalog.get("dup_env"), 0))
        await _wait(pilot, lambda: not app.is_running or (isinstance(app.screen, PlayScreen) and app.screen.tools
                                                          and not app.screen.holding and app.screen._built_for))
        assert app.is_running and isinstance(app.screen, PlayScreen)


async def test_replay_of_a_run_whose_final_db_is_garbage_does_not_crash_the_tui(tmp_path):
    """Finding: a run's ``final.db`` is whatever the environment left in its database file (its code may write any
    bytes there); the verdict view says such a file cannot be compared, but the replay screen diffed it unguarded on
    mount and ``sqlite3.DatabaseError`` ended the TUI."""
    import asyncio

    from awm_engine.cli import main as awm
    from awm_tui.app import AwmApp
    from awm_tui.screens.replay import ReplayScreen
    from awm_tui.widgets.diff_view import DiffView

    data = make_env_dir(tmp_path / "data", {"Tiny Notes": ""})
    out = tmp_path / "runs" / "eval"
    assert await asyncio.to_thread(awm, ["eval", "run", "--data", str(data), "--policy", "immediate", "-k", "1",
                                         "--concurrency", "1", "--workers", "1", "--verify", "none",
                                         "--out", str(out), "--quiet"]) == 0
    final = next(out.rglob("final.db"))
    final.write_bytes(b"not a database " * 1000)  # what environment code can leave in its database file
    app = AwmApp([str(data)], cursor_blink=False, runs_root=tmp_path / "runs")
    async with app.run_test(size=(120, 36)) as pilot:
        app.push_screen(ReplayScreen(final.parent))
        await _wait(pilot, lambda: not app.is_running or isinstance(app.screen, ReplayScreen), what="the replay")
        await pilot.pause(0.5)
        assert app.is_running and isinstance(app.screen, ReplayScreen)
        app.screen.query_one("#side DiffView", DiffView)
