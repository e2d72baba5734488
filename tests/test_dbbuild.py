"""The database build reproduces AWM's statement-by-statement procedure, failures included."""
import json
import sqlite3

import pytest

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.db.build import build_database, table_row_counts


def reference_build(path, db_schema, sample_data):
    """spec/awm-format.md §3.1 and §3.2 written out literally, as an independent oracle."""
    conn = sqlite3.connect(path)
    cur = conn.cursor()
    failed_tables = 0
    for table in db_schema["tables"]:
        try:
            cur.execute(table["ddl"])
            for stmt in table.get("indexes", []):
                cur.execute(stmt)
            for stmt in table.get("examples", []):
                cur.execute(stmt)
        except Exception:
            failed_tables += 1
    conn.commit()
    conn.close()
    conn = sqlite3.connect(path)
    cur = conn.cursor()
    cur.execute("PRAGMA foreign_keys = ON;")
    failed = 0
    for table_data in sample_data["tables"]:
        for stmt in table_data["insert_statements"]:
            try:
                cur.execute(stmt)
            except sqlite3.Error:
                failed += 1
    conn.commit()
    conn.close()
    return failed_tables, failed


def test_real_data_row_counts_match_the_reference_procedure(awm_real, tmp_path):
    for s in Catalog.load([awm_real]):
        ref_path = tmp_path / f"ref_{s.key}.db"
        failed_tables, failed_inserts = reference_build(ref_path, s.db_schema, s.sample_data)
        report = build_database(s.key, s.db_schema, s.sample_data, tmp_path / f"{s.key}.db")
        assert report.row_counts == table_row_counts(ref_path), s.key
        assert report.tables_failed == failed_tables and report.inserts_failed == failed_inserts
        assert len([f for f in report.failures if f.phase == "sample"]) == failed_inserts


def test_real_data_keeps_the_failures(awm_real, tmp_path):
    s = Catalog.load([awm_real]).get("surveymonkey_apply")
    report = build_database(s.key, s.db_schema, s.sample_data, tmp_path / "x.db")
    assert report.tables_failed == 1 and report.tables_ok == 26
    schema_fail = next(f for f in report.failures if f.phase == "schema")
    assert schema_fail.table == "form_questions" and schema_fail.message.startswith("Table form_questions: ")
    assert report.inserts_failed == 22 and report.inserts_ok == 83
    assert all(f.statement.startswith("INSERT") for f in report.failures if f.phase == "sample")
    assert "form_questions" not in report.row_counts


def test_cli_db_build_lists_failed_statements(awm_real, tmp_path, capsys):
    out = tmp_path / "dbs"
    assert awm(["db", "build", "--data", str(awm_real), "--out", str(out), "--json"]) == 0
    reports = {r["scenario"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(reports) == {"gofundme", "rover", "surveymonkey_apply"}
    assert reports["surveymonkey_apply"]["inserts_failed"] == 22
    assert (out / "rover.db").is_file() and (out / "build_report.json").is_file()
    assert table_row_counts(out / "rover.db") == reports["rover"]["row_counts"]
    assert awm(["db", "build", "--data", str(awm_real), "--scenario", "GoFundMe", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "gofundme" in text


SCHEMA = {"tables": [
    {"name": "users", "ddl": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);",
     "indexes": ["CREATE INDEX idx_users_name ON users(name);"]},
    {"name": "orders", "ddl": "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL "
                              "REFERENCES users(id), total REAL);",
     "indexes": ["CREATE INDEX idx_bad ON orders(nope);"]},
    {"name": "notes", "ddl": "CREATE TABLE notes (body TEXT);", "examples": ["INSERT INTO notes VALUES ('ex');"]},
]}


def test_schema_phase_semantics(tmp_path):
    sample = {"tables": [
        {"table_name": "users", "insert_statements": [
            "INSERT INTO users (id, name) VALUES (1, 'me');",
            "INSERT INTO users (id, name) VALUES (2, 'me');",  # UNIQUE -> IntegrityError
            "INSERT INTO users (id, name) VALUES (3, 'it\\'s');",  # backslash escape -> SQL error, kept failed
            "INSERT INTO users (id, name) VALUES (4, 'a'); INSERT INTO users (id, name) VALUES (5, 'b');",
        ]},
        {"table_name": "orders", "insert_statements": [
            "INSERT INTO orders (id, user_id, total) VALUES (1, 1, 9.5);",
            "INSERT INTO orders (id, user_id, total) VALUES (2, 99, 1.0);",  # FK on -> IntegrityError
        ]},
    ]}
    report = build_database("t", SCHEMA, sample, tmp_path / "t.db")
    # the orders table was created but its bad index failed: the table counts as failed, CREATE stays
    assert (report.tables_ok, report.tables_failed) == (2, 1)
    assert report.row_counts == {"notes": 1, "orders": 1, "users": 1}
    assert report.inserts_ok == 2 and report.inserts_failed == 4
    kinds = [f.message.split(" - ")[1].split(":")[0] for f in report.failures if f.phase == "sample"]
    assert kinds == ["IntegrityError", "SQLError", "SQLError", "IntegrityError"]
    assert "Statement: INSERT INTO users (id, name) VALUES (3" in report.failures[2].message


def test_non_string_statement_rolls_back_everything(tmp_path):
    sample = {"tables": [{"table_name": "users", "insert_statements": [
        "INSERT INTO users (id, name) VALUES (1, 'me');", 42]}]}
    report = build_database("t", SCHEMA, sample, tmp_path / "t.db")
    assert report.fatal and "schema only" in report.fatal
    assert report.row_counts["users"] == 0


def test_missing_schema_or_sample_is_reported(tmp_path):
    no_schema = build_database("t", None, {"tables": []}, tmp_path / "a.db")
    assert no_schema.fatal.startswith("no database schema")
    no_sample = build_database("t", SCHEMA, None, tmp_path / "b.db")
    assert no_sample.fatal.startswith("no sample data") and no_sample.tables_ok == 2


def test_existing_file_is_replaced(tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"not a database")
    report = build_database("t", SCHEMA, {"tables": []}, path)
    assert report.tables_ok == 2


@pytest.mark.parametrize("bad", [{"tables": "nope"}, {}, []])
def test_malformed_schema_container(tmp_path, bad):
    report = build_database("t", bad, {"tables": []}, tmp_path / "t.db")
    assert report.fatal == "db_schema has no 'tables' list"


def test_db_build_to_a_relative_directory(tmp_path, monkeypatch, capsys):
    """The sandboxed build runs in a directory of its own: a relative --out must still get every table (it once
    built empty databases and exited 0)."""
    import sqlite3

    from awm_engine.cli import main as awm

    monkeypatch.chdir(tmp_path)
    assert awm(["db", "build", "--out", "reldbs", "--scenario", "maple_library_lending"]) == 0
    capsys.readouterr()
    with sqlite3.connect(tmp_path / "reldbs" / "maple_library_lending.db") as db:
        assert db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table'").fetchone()[0] > 3
