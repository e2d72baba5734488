"""Found by attacking awm as hostile environment code, verifiers and data would (red team 11); each test fails while
its gap is open:

- a tool's text holding a lone surrogate (its worker's answer is the environment's to forge: the JSON escape
  ``"\\ud800"``) made the health check raise ``UnicodeEncodeError`` while it wrote its cache — ``awm env test``
  over a data directory crashed with a traceback for every scenario in it, and the cache file was left empty;
- one TEXT value in an episode's database that is not UTF-8 (``CAST(x'ff' AS TEXT)``, plain SQL any environment
  can run) made every read of it raise: ``awm db diff`` refused the two databases, the TUI's Data tab and SQL box
  showed no row of the table, and the TUI's rollout screen raised in its end-of-rollout diff (before the
  verification ran). A table or column renamed to such bytes (``writable_schema``) then crashed the diff with a
  traceback. Values are read as they are stored (undecodable bytes as escapes); such names are listed as not read;
- a data file's SQL holding a lone surrogate (the JSON escape ``"\\ud800"``) made the database build raise
  ``UnicodeEncodeError`` in awm's process while it wrote the sandbox's request: ``awm db build`` over a data
  directory crashed with a traceback, no scenario of it built (an evaluation lost that scenario to internal errors);
- an environment that overwrites its final.db with garbage made the TUI's end-of-rollout diff raise in the rollout's
  last event (``run_episode``'s ``on_event``), before the verification ran: the rollout screen's worker failed and
  no verdict came. The diff's place says the databases could not be compared.
"""
from __future__ import annotations

import asyncio
import json
import os

from tinyenv import make_env_dir

from awm_engine.data.catalog import Catalog
from awm_engine.runtime.pool import EnvPool

FORGE_SURROGATE = '''
import awm_engine.runtime.protocol as _protocol
_ok_reply = _protocol.ok_reply

def _forged(rid, result):
    if isinstance(result, dict) and "text" in result:
        result = {**result, "text": "x\\ud800y"}
    return _ok_reply(rid, result)

_protocol.ok_reply = _forged
'''


def test_a_tool_text_with_a_lone_surrogate_does_not_crash_the_health_check(tmp_path):
    """``awm env test`` gathers every scenario's health check: one that raised took the whole command down (no
    scenario's verdict was shown). The report is cached with the surrogate escaped, and reads back."""
    from awm_engine.runtime.health import _cache_path, cached_health, check_scenario

    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Forger": FORGE_SURROGATE, "Honest": ""})])

    async def go():
        async with EnvPool(workers=1) as pool:
            return [await check_scenario(pool, s) for s in catalog]

    reports = asyncio.run(go())
    assert [r.status for r in reports] == ["ok", "ok"]
    forger = catalog.get("forger")
    cached = cached_health(forger)
    assert cached is not None and cached["calls"] and cached["calls"][0]["text"] == "x\ud800y"
    assert not [n for n in os.listdir(_cache_path(forger).parent) if n.endswith(".tmp")]
    assert json.loads(_cache_path(catalog.get("honest")).read_text())["calls_ok"] == 2


def hostile_pair(tmp_path):
    import sqlite3

    before, after = tmp_path / "initial.db", tmp_path / "final.db"
    for path in (before, after):
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        con.execute("INSERT INTO notes VALUES (1, 'first')")
        con.commit()
        con.close()
    con = sqlite3.connect(after)
    con.execute("INSERT INTO notes VALUES (2, 'deleted everything')")
    con.execute("INSERT INTO notes VALUES (3, CAST(x'ff41' AS TEXT))")  # what the environment's code can write
    con.execute("CREATE TABLE hidden (id INTEGER PRIMARY KEY, secret TEXT)")
    con.execute("CREATE TABLE renamed (id INTEGER PRIMARY KEY, x TEXT)")
    con.execute("INSERT INTO renamed VALUES (1, 'a')")
    con.commit()
    con.execute("PRAGMA writable_schema = ON")  # a table and a column whose names are not UTF-8
    con.execute("UPDATE sqlite_master SET name = CAST(x'ff68' AS TEXT), tbl_name = CAST(x'ff68' AS TEXT), "
                "sql = CAST(x'435245415445205441424c4520ff6828696420494e5445474552205052494d415259204b45592c2073'"
                " || x'656372657420544558542920' AS TEXT) WHERE name = 'hidden'")
    con.execute("UPDATE sqlite_master SET sql = CAST(x'435245415445205441424c452072656e616d65642028696420494e544547'"
                " || x'4552205052494d415259204b45592c20ff782054455854292020' AS TEXT) WHERE name = 'renamed'")
    con.commit()
    con.close()
    return before, after


def test_text_that_is_not_utf8_does_not_hide_an_episodes_changes(tmp_path):
    from awm_engine.data.sql_box import table_page
    from awm_engine.db.diff import diff_databases

    before, after = hostile_pair(tmp_path)
    diff = diff_databases(before, after)
    notes = diff.table("notes")
    assert notes is not None and [r["id"] for r in notes.inserted] == [2, 3]
    assert notes.inserted[1]["text"] == b"\xffA".decode("utf-8", "surrogateescape")
    assert sorted(diff.skipped) == sorted(["\udcffh", "renamed"])
    page = table_page(after, "notes", 0, 10)
    assert page.error is None and [row[0] for row in page.rows] == ["1", "2", "3"]
    assert page.rows[2][1] == "\\udcffA"  # shown as an escape


def test_awm_db_diff_shows_what_a_hostile_database_holds(tmp_path, capsys):
    from awm_engine.cli import main as awm

    before, after = hostile_pair(tmp_path)
    assert awm(["db", "diff", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    assert "deleted everything" in out and "\\udcffA" in out and "not read" in out
    assert awm(["db", "diff", "--json", str(before), str(after)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["inserted"] == 2


def test_a_lone_surrogate_in_a_data_files_sql_does_not_crash_awm_db_build(tmp_path, capsys):
    from awm_engine.cli import main as awm

    data = make_env_dir(tmp_path / "d", {"Surro": "", "Honest": ""})
    path = data / "gen_sample.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["sample_data"]["tables"][0]["insert_statements"].append("INSERT INTO notes (id, text) VALUES (3, 'S');")
    path.write_text("".join(json.dumps(r).replace("'S'", "'\\ud800'") + "\n" for r in rows))
    assert awm(["db", "build", "--data", str(data), "--out", str(tmp_path / "built"), "--json"]) == 0
    reports = {r["scenario"]: r for r in json.loads(capsys.readouterr().out)}
    assert reports["honest"]["built"] and sum(reports["honest"]["row_counts"].values()) == 2
    assert "surro" in reports  # built, its failed statement reported
    assert json.loads((tmp_path / "built" / "build_report.json").read_text())


async def test_a_final_db_of_garbage_does_not_break_the_tuis_end_of_rollout(tmp_path):
    import sqlite3

    from textual.app import App

    from awm_tui.widgets.diff_view import DiffView
    from awm_tui.widgets.verdict import SideBySide

    run = tmp_path / "run"
    run.mkdir()
    sqlite3.connect(run / "initial.db").close()
    (run / "final.db").write_bytes(b"not a database at all " * 100)

    class Host(App):
        def compose(self):
            yield SideBySide()

    app = Host()
    async with app.run_test() as pilot:
        side = app.query_one(SideBySide)
        side.show_finished(run, 0, "done")  # raised sqlite3.DatabaseError
        await pilot.pause()
        view = side.query_one(DiffView)
        assert view.diff is None and "could not be compared" in (view.error or "")
