"""The read-only SQL box (the TUI's Data tab, ``awm_engine.data.sql_box``): its deadline covers preparing, executing
and fetching, and caps bound every value, the rows and the characters fetched — ``SELECT zeroblob(1e8)`` used to
run 22 s and take 1.2 GB past a 10 s deadline. Timings are asserted only with generous bounds."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from awm_engine.data import sql_box
from awm_engine.data.sql_guard import Deadline

ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)"


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "box.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, b BLOB)")
        conn.execute("INSERT INTO t VALUES (1, 'short', x'00ff'), (2, ?, zeroblob(300)), (3, ?, NULL)",
                     ("x" * 1000, "esc \x1b]52;c;cHduZWQ=\x07 c1 \x9b2J"))
    return path


def test_zeroblob_is_refused_at_once_by_the_value_cap(db):
    started = time.monotonic()
    result = sql_box.run_query(db, "SELECT zeroblob(1e8)")
    assert time.monotonic() - started < 5  # was 22 s
    assert result.error and "cap of 4,194,304 bytes per value" in result.error and "too big" in result.error
    assert result.rows == [] and result.fetched_chars == 0
    for sql in ("SELECT randomblob(1e8)", "SELECT zeroblob(4194305)", "SELECT hex(zeroblob(3e6))"):
        assert "per value" in sql_box.run_query(db, sql).error


def test_zeroblob_in_a_fresh_process_stays_small():
    """The whole query in a process of its own: its peak memory stays far below the 1.2 GB it used to take."""
    code = ("import resource, sqlite3, sys, tempfile, os\n"
            "from awm_engine.data.sql_box import run_query\n"
            "path = os.path.join(tempfile.mkdtemp(), 'x.db'); sqlite3.connect(path).execute('CREATE TABLE t (a)')\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "r = run_query(path, 'SELECT zeroblob(1e8), zeroblob(1e8)')\n"
            "print(r.status()); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    status, grown_kb = proc.stdout.splitlines()
    assert "per value" in status
    assert int(grown_kb) < 300 * 1024, f"peak memory grew by {int(grown_kb) // 1024} MB"


def test_a_huge_result_is_cut_by_rows_cells_and_size(db):
    result = sql_box.run_query(db, f"{ENDLESS} SELECT n, printf('%.*c', 100000, 'y') AS wide FROM r")
    assert result.error is None and result.stopped == "rows" and len(result.rows) == sql_box.MAX_ROWS
    assert result.columns == ["n", "wide"] and result.cut_values == sql_box.MAX_ROWS
    assert result.rows[0][1] == "y" * sql_box.MAX_CELL + "… (100,000 characters)"  # cut, with a visible marker
    assert result.fetched_chars <= sql_box.MAX_BYTES and result.fetched_chars < 200_000  # not 50 MB
    assert "first 500: the box's row cap" in result.status() and "500 texts cut to 80 characters" in result.status()
    small = sql_box.run_query(db, f"{ENDLESS} SELECT n, printf('%.*c', 70, 'z') FROM r", max_bytes=10_000)
    assert small.stopped == "bytes" and small.fetched_chars <= 10_000 and 0 < len(small.rows) < 500
    assert "size cap of 10,000 characters" in small.status()


def test_values_are_shown_cut_blobs_by_length_controls_visible(db):
    result = sql_box.run_query(db, "SELECT * FROM t ORDER BY id;")
    assert result.error is None and result.stopped is None and result.columns == ["id", "v", "b"]
    (one, two, three) = result.rows
    assert one == ("1", "short", "<blob 2 bytes: 00FF>")
    assert two[1] == "x" * 80 + "… (1,000 characters)" and two[2] == "<blob 300 bytes: " + "00" * 16 + "…>"
    assert three == ("3", "esc \\x1b]52;c;cHduZWQ=\\x07 c1 \\x9b2J", "NULL")
    assert result.status() == "query: 3 rows · 1 text cut to 80 characters — read-only"
    same_names = sql_box.run_query(db, "SELECT a.id, b.id FROM t a, t b -- a comment")
    assert len(same_names.rows) == 9 and same_names.columns[0] == "id"
    pragma = sql_box.run_query(db, "PRAGMA table_info(t)")  # not wrappable: the same caps in Python
    assert pragma.error is None and [r[1] for r in pragma.rows] == ["id", "v", "b"]
    page = sql_box.table_page(db, "t", 1, 2)
    assert [r[0] for r in page.rows] == ["3"] and sql_box.count_rows(db, "t") == 3


def test_writes_say_the_box_is_read_only_and_touch_nothing(db, tmp_path):
    for sql in ("DELETE FROM t", "UPDATE t SET v = 'x'", "CREATE TABLE u (a)", "PRAGMA journal_mode = wal",
                f"ATTACH DATABASE '{tmp_path / 'a.db'}' AS a", f"VACUUM INTO '{tmp_path / 'copy.db'}'"):
        error = sql_box.run_query(db, sql).error
        assert error.startswith("the SQL box is read-only") and "authoriz" in error, sql
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "copy.db").exists()
    assert sql_box.count_rows(db, "t") == 3
    assert "syntax error" in sql_box.run_query(db, "SELEC nonsense").error
    assert "one statement at a time" in sql_box.run_query(db, "SELECT 1; SELECT 2").error


def test_the_deadline_and_cancel_stop_a_runaway_query(db):
    started = time.monotonic()
    result = sql_box.run_query(db, f"{ENDLESS} SELECT count(*) FROM r", seconds=0.5)
    assert result.error == "stopped after 0.5s (the SQL box's deadline)" and time.monotonic() - started < 30
    deadline = Deadline(None)  # no time limit: only the caller's cancel stops it
    threading.Timer(0.3, deadline.cancel).start()
    assert sql_box.run_query(db, f"{ENDLESS} SELECT count(*) FROM r", deadline=deadline).error == "cancelled"


async def test_tui_sql_box_zeroblob_and_huge_results_end_with_the_cap_message(tmp_path):
    from textual.widgets import DataTable, Input, Static

    from awm_tui.app import AwmApp
    from tests.test_tui_play import wait_until as until
    from tests.tinyenv import make_env_dir

    data = make_env_dir(tmp_path / "data", {"box": ""})
    app = AwmApp([str(data)], cursor_blink=False)

    def status() -> str:
        return str(app.screen.query_one("#data-status", Static).render())

    async def run(pilot, sql: str) -> None:
        app.screen.query_one("#sql", Input).value = sql
        await pilot.press("enter")
        await until(pilot, lambda: not status().startswith("running"))

    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.catalog is not None)
        app.open_environment("box")
        await until(pilot, lambda: hasattr(app.screen, "run_sql"))
        await pilot.press("3")
        await until(pilot, lambda: "rows 1–2 of 2" in status())
        await pilot.press("ctrl+e")
        await run(pilot, "SELECT zeroblob(1e8)")
        assert "cap of 4,194,304 bytes per value" in status()
        await run(pilot, f"{ENDLESS} SELECT n, printf('%.*c', 100000, 'y') FROM r")
        grid = app.screen.query_one("#data-grid", DataTable)
        assert grid.row_count == 500 and "the box's row cap" in status() and "texts cut to 80" in status()
        assert grid.get_row_at(0)[1].endswith("… (100,000 characters)")
        await run(pilot, "DELETE FROM notes")
        assert "the SQL box is read-only" in status()
