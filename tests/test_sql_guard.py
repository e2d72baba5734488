"""SQL awm did not write cannot reach other files, runaway queries stop, any table name can be quoted."""
from __future__ import annotations

import sqlite3

import pytest

from awm_engine.db.build import build_database
from awm_engine.data.sql_guard import Deadline, forbid_attach, read_only


def test_attach_in_data_sql_is_a_failed_statement(tmp_path):
    outside = tmp_path / "outside.db"
    schema = {"tables": [{"name": "t", "ddl": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", "indexes": [],
                          "examples": []}]}
    sample = {"tables": [{"table_name": "t", "insert_statements": [
        "INSERT INTO t (v) VALUES ('a')", f"ATTACH DATABASE '{outside}' AS evil",
        f"VACUUM INTO '{tmp_path / 'copy.db'}'", "INSERT INTO t (v) VALUES ('b')"]}]}
    path = tmp_path / "out.db"
    report = build_database("s", schema, sample, path)
    assert not outside.exists() and not (tmp_path / "copy.db").exists()
    assert report.inserts_ok == 2 and report.inserts_failed == 2
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2


def test_read_only_authorizer(tmp_path):
    db = tmp_path / "x.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (a)")
        conn.execute("INSERT INTO t VALUES (1)")
    conn = sqlite3.connect(db)
    conn.set_authorizer(read_only)
    assert conn.execute("SELECT * FROM t").fetchall() == [(1,)]
    assert conn.execute("PRAGMA table_info(t)").fetchall()
    for statement in ("DELETE FROM t", "DROP TABLE t", f"ATTACH '{tmp_path / 'y.db'}' AS y",
                      f"VACUUM INTO '{tmp_path / 'z.db'}'", "PRAGMA journal_mode = wal", "CREATE TABLE u (b)"):
        with pytest.raises(sqlite3.DatabaseError, match="authoriz"):
            conn.execute(statement)
    assert not (tmp_path / "y.db").exists() and not (tmp_path / "z.db").exists()


def test_forbid_attach_and_deadline(tmp_path):
    conn = forbid_attach(sqlite3.connect(tmp_path / "a.db"))
    with pytest.raises(sqlite3.DatabaseError):
        conn.execute(f"ATTACH '{tmp_path / 'b.db'}' AS b")
    deadline = Deadline(0.2)
    conn.set_progress_handler(deadline, 1000)
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        conn.execute("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r")
    assert deadline.expired()
    cancelled = Deadline(None)
    cancelled.cancel()
    conn.set_progress_handler(cancelled, 1000)
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r")


def test_quote_ident_and_a_table_named_weird(tmp_path):
    from awm_engine.data.sql_guard import quote_ident
    from awm_engine.db.build import table_row_counts
    from awm_engine.db.diff import diff_databases

    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for path, rows in ((a, 1), (b, 2)):
        with sqlite3.connect(path) as conn:
            conn.execute('CREATE TABLE "we""ird" (id INTEGER PRIMARY KEY, "co""l" TEXT)')
            conn.executemany('INSERT INTO "we""ird" ("co""l") VALUES (?)', [("x",)] * rows)
    assert quote_ident('we"ird') == '"we""ird"'
    assert table_row_counts(b) == {'we"ird': 2}
    diff = diff_databases(a, b)
    assert diff.counts()["inserted"] == 1
