"""The databases awm diffs (``awm db diff``, ``awm agent replay --step``, the TUI's verdict and replay views) are
usually an episode's: written by the environment's code, anything at all. The diff read every table whole into the
awm process, computing whatever the schema said (found by attacking awm as a hostile environment author would; the
test fails while the gap is open): a generated column ``AS (zeroblob(400000000))`` on 20 rows — an 8 KB
``final.db`` — took the process to 8 GB (and 28 s), a few more rows to whatever memory the machine has."""
from __future__ import annotations

import sqlite3

from test_sandbox_attacks_found import peak_rss_mb

DIFF = '''
import json, sys
from awm_engine.db.diff import diff_databases
diff = diff_databases(sys.argv[1], sys.argv[2])
OUT = {"counts": diff.counts(), "incomplete": getattr(diff, "incomplete", None)}
'''


def test_a_hostile_final_db_cannot_take_the_diffing_process_to_gigabytes(tmp_path):
    before, after = tmp_path / "initial.db", tmp_path / "final.db"
    con = sqlite3.connect(before)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    con.execute("INSERT INTO notes VALUES (1, 'first')")
    con.commit()
    con.close()
    con = sqlite3.connect(after)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    con.execute("INSERT INTO notes VALUES (1, 'changed')")
    con.execute("CREATE TABLE zz_bomb (id INTEGER PRIMARY KEY, x, g AS (zeroblob(400000000)))")
    con.executemany("INSERT INTO zz_bomb (id, x) VALUES (?, ?)", [(i, i) for i in range(6)])
    con.commit()
    con.close()
    assert after.stat().st_size < 64 << 10
    out = peak_rss_mb(DIFF, str(before), str(after))
    assert out["peak_mb"] < 500, f"diffing an {after.stat().st_size >> 10} KB database took {out['peak_mb']} MB: {out}"
    assert out["counts"]["updated"] == 1, out  # what it could read is there
    assert out["incomplete"] and "16 MiB" in out["incomplete"], out  # and it says it stopped


def test_a_diff_that_stops_at_its_bounds_says_so(tmp_path):
    from awm_engine.db.diff import DiffLimits, diff_databases

    before, after = tmp_path / "a.db", tmp_path / "b.db"
    for path, rows in ((before, 10), (after, 5000)):
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        con.executemany("INSERT INTO notes VALUES (?, ?)", [(i, f"note {i}") for i in range(rows)])
        con.commit()
        con.close()
    whole = diff_databases(before, after)
    assert whole.incomplete is None and whole.counts()["inserted"] == 4990
    cut = diff_databases(before, after, DiffLimits(values=1000))
    assert cut.incomplete and "1,000 values" in cut.incomplete
    assert "incomplete" in cut.to_dict()


DUMP = '''
import json, sys
from awm_engine.gen.stage_verifier import database_dump
text = database_dump(sys.argv[1])
OUT = {"length": len(text), "head": text[:200]}
'''


def test_awm_gen_shows_the_model_a_bounded_dump_of_a_generated_database(tmp_path):
    """``awm gen``'s verifier stage dumps the scenario's initial database (built from generated SQL) to show the
    model its first 40,000 characters — after reading the whole of it into one string: 300 rows of a megabyte
    (what one generated INSERT builds) took the process to 600 MB, twice the database, whatever its size (a
    template may take a worker's whole 1 GB quota). Only what is shown is read now."""
    db = tmp_path / "initial.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    con.execute("INSERT INTO notes (text) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300) "
                "SELECT printf('%.*c', 1000000, 'x') FROM c")
    con.commit()
    con.close()
    out = peak_rss_mb(DUMP, str(db))
    assert out["peak_mb"] < 300, f"dumping a {db.stat().st_size >> 20} MB database took {out['peak_mb']} MB: {out}"
    assert out["length"] < 50_000 and "CREATE TABLE" in out["head"], out


def test_a_diff_never_opens_a_virtual_table_of_the_environments(tmp_path):
    """Hardening, no exploit shown: a virtual table's module (FTS3/4/5, R-tree) parses its shadow tables — written
    by the environment — inside the awm process, which runs as root: SQLite's FTS code has had memory-safety bugs
    reachable from crafted shadow tables (Magellan). The diff now reads only ordinary tables; a virtual table's
    data is in its shadow tables, which are ordinary, so its changes still show."""
    from awm_engine.db.diff import diff_databases

    for name, rows in (("a.db", 1), ("b.db", 3)):
        con = sqlite3.connect(tmp_path / name)
        con.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")
        con.executemany("INSERT INTO docs VALUES (?)", [(f"doc {i}",) for i in range(rows)])
        con.commit()
        con.close()
    diff = diff_databases(tmp_path / "a.db", tmp_path / "b.db")
    assert "docs" not in [t.table for t in diff.tables], diff.tables
    assert diff.skipped == ["docs"]
    assert "docs_content" in [t.table for t in diff.tables]  # the rows it holds, compared as plain data
