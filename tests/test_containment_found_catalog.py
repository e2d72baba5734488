"""Attacks on what the awm process itself parses from an environment's data (found by attacking it as a hostile
environment author would): each test fails while its gap is open.

- the catalog's in-memory DDL build (``awm catalog show``, the TUI's environment screen) caps its database at 64 MiB
  of pages, but the DDL is generated: a ``PRAGMA max_page_count`` statement lifts the cap for every statement after
  it (1.2 GB from a few kilobytes of schema);
- each DDL statement gets 2 s, with no bound on how many run: a schema of many spinning statements holds the awm
  process for as long as its author likes;
- one data row nested past Python's recursion limit made ``Catalog.load`` raise: every scenario of the directory
  was gone with it (``awm catalog list``, ``awm eval run`` crashed);
- the scan for clock-dependent SQL (``db.build.time_dependence``, run by the awm process before every template
  build) split a date function's arguments with a regular expression that is quadratic in them: a megabyte of
  ``date(',',…)`` in one sample INSERT held the awm process — the GIL, so every other scenario's rollouts of the same
  ``awm eval run`` — for about an hour;
- the DDL could call ``fts3_tokenizer`` with two arguments (this host's SQLite, like Debian's, is built with
  SQLITE_ENABLE_FTS3_TOKENIZER): it registers an FTS3 tokenizer module at any address, in the awm process (root),
  and a virtual table then calls into it — the primitive of the published SQLite code-execution technique.
"""
from __future__ import annotations

from tinyenv import make_env_dir
from test_sandbox_attacks_found import peak_rss_mb

from awm_engine.data.catalog import Catalog

CATALOG_TABLES = '''
import json, sys
from awm_engine.data.catalog import Catalog
tables = Catalog.load([sys.argv[1]]).get("ddl").tables()
OUT = {"errors": {t.name: t.error for t in tables}}
'''

MEGABYTE_ROWS = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 500) "
                 "SELECT zeroblob(1000000) AS b FROM c")


def table(name: str, ddl: str) -> dict:
    return {"name": name, "ddl": ddl, "indexes": []}


def test_generated_ddl_cannot_lift_the_catalogs_caps_with_a_pragma(tmp_path):
    """``PRAGMA main.max_page_count`` (and ``temp.``, ``cache_size``) first, then the rows: the 64 MiB total the catalog
    set on its in-memory database no longer holds (measured: 1.2 GB for two tables of 600 one-megabyte rows)."""
    tables = [table("lift", "PRAGMA main.max_page_count = 2147483646"),
              table("lift_temp", "PRAGMA temp.max_page_count = 2147483646"),
              table("cache", "PRAGMA cache_size = -4000000")]
    tables += [table(f"big{i}", f"CREATE TABLE big{i} AS {MEGABYTE_ROWS}") for i in range(3)]
    tables.append(table("notes", "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)"))
    data = make_env_dir(tmp_path / "d", {"Ddl": ""}, schema={"tables": tables})
    out = peak_rss_mb(CATALOG_TABLES, str(data))
    assert out["peak_mb"] < 400, f"introspecting the DDL took the awm process to {out['peak_mb']} MB: {out}"
    assert out["errors"]["notes"] is None, out
    assert all(out["errors"][name] for name in ("lift", "lift_temp", "cache")), out  # refused, not run


def test_generated_ddl_gets_a_total_time_not_only_a_time_per_statement(tmp_path):
    """Twelve statements that compute forever: each is interrupted after 2 s, and all twelve run (24 s of the awm
    process; a schema of a thousand such tables holds it for half an hour). With a total of 10 s, at most six can
    even start (each takes at least its 2 s); the rest are reported as not introspected."""
    spin = "CREATE TABLE spin{} AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    tables = [table("notes", "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")]
    tables += [table(f"spin{i}", spin.format(i)) for i in range(12)]
    data = make_env_dir(tmp_path / "d", {"Ddl": ""}, schema={"tables": tables})
    errors = {t.name: t.error for t in Catalog.load([data]).get("ddl").tables()}
    assert errors["notes"] is None, errors
    ran = [name for name, error in errors.items() if error and "interrupt" in error.lower()]
    assert len(ran) <= 6, f"{len(ran)} spinning statements ran in the awm process, 2 s each: {errors}"
    assert all(errors[f"spin{i}"] for i in range(12)), errors


def test_one_deeply_nested_row_does_not_take_down_the_catalog(tmp_path):
    """A data file row nested 100,000 levels deep made ``Catalog.load`` raise RecursionError: ``awm catalog list``,
    ``awm eval run`` and everything else over that data directory crashed with a traceback — every other scenario
    in it with them. Nested just under the limit (985 levels) it parsed at load, then broke a later read deeper in a
    call stack. Such a row is a bad line: reported, skipped, the rest loads."""
    import json

    from tinyenv import SCHEMA

    for depth in (100_000, 985):
        data = make_env_dir(tmp_path / f"d{depth}", {"Good": "", "Nested": ""})
        rows = [json.dumps({"scenario": "Good", "db_schema": SCHEMA}),
                '{"scenario": "Nested", "db_schema": {"tables": [], "x": ' + "[" * depth + "]" * depth + "}}"]
        (data / "gen_db.jsonl").write_text("\n".join(rows) + "\n")
        catalog = Catalog.load([data])
        assert catalog.get("good").db_schema == SCHEMA
        assert [t.name for t in catalog.get("good").tables()] == ["notes"]
        assert catalog.get("nested").db_schema is None  # its row was refused
        assert any("nested deeper" in issue.message for issue in catalog.issues), catalog.issues


TIME_SCAN = """
import sys
from awm_engine.db.build import time_dependence
n = int(sys.argv[1])
sql = "INSERT INTO notes (id, text) VALUES (3, date(" + "','" * n + "))"
print(time_dependence(None, {"tables": [{"table_name": "notes", "insert_statements": [sql]}]}))
"""


def test_the_clock_scan_of_sample_sql_is_linear():
    """1 MB of ``date(',',…)``: 20,000 repetitions took 12 s, a third of a million took about an hour (quadratic).
    Run in a fresh interpreter with a deadline sixty times shorter than that hour; linear, it takes a fraction of a
    second."""
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", TIME_SCAN, str(333_333)], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("the clock scan of one 1 MB sample INSERT held the awm process past 60 s") from None
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"  # no argument is 'now': not time-dependent


def test_generated_ddl_cannot_hand_sqlite_a_pointer_in_the_awm_process(tmp_path):
    """An alias of the real tokenizer stands in for a forged one (``fts3_tokenizer('simple')`` is its address): the
    DDL registered it and made a virtual table on it. No pointer-taking function, and no virtual table, runs in the
    awm process now; the ordinary tables are introspected as before."""
    tables = [table("pointer", "SELECT fts3_tokenizer('awm_alias', fts3_tokenizer('simple'))"),
              table("leak", "CREATE TABLE leak AS SELECT hex(fts3_tokenizer('simple')) AS p"),
              table("docs", "CREATE VIRTUAL TABLE docs USING fts3(body, tokenize=awm_alias)"),
              table("extension", "SELECT load_extension('/nonexistent/awm-test.so')"),
              table("notes", "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")]
    data = make_env_dir(tmp_path / "d", {"Ddl": ""}, schema={"tables": tables})
    errors = {t.name: t.error for t in Catalog.load([data]).get("ddl").tables()}
    for name in ("pointer", "leak", "docs", "extension"):
        assert errors[name] and "not authorized" in errors[name], errors
    assert errors["notes"] is None, errors
