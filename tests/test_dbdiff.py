"""Row-level diffs report exactly what a scripted set of writes changed."""
import json
import sqlite3

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.db.build import build_database
from awm_engine.db.diff import diff_databases, snapshot
from awm_engine.db.templates import TemplateCache


def make_db(path):
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT);
        CREATE TABLE tags (user_id INTEGER, tag TEXT, PRIMARY KEY (user_id, tag));
        CREATE TABLE log (msg TEXT);
        INSERT INTO users VALUES (1, 'ann', 'ann@x'), (2, 'bob', 'bob@x'), (3, 'cy', 'cy@x');
        INSERT INTO tags VALUES (1, 'a'), (2, 'b');
        INSERT INTO log VALUES ('one'), ('two');
        CREATE TABLE untouched (id INTEGER PRIMARY KEY);
    """)
    conn.commit()
    conn.close()


def test_scripted_writes_are_reported_exactly(tmp_path):
    before, after = tmp_path / "before.db", tmp_path / "after.db"
    make_db(before)
    snapshot(before, after)
    conn = sqlite3.connect(after)
    conn.executescript("""
        INSERT INTO users VALUES (4, 'dee', 'dee@x');
        UPDATE users SET email = 'bob@y' WHERE id = 2;
        UPDATE users SET name = name WHERE id = 3;
        DELETE FROM users WHERE id = 1;
        INSERT INTO tags VALUES (2, 'c');
        DELETE FROM log WHERE msg = 'one';
        INSERT INTO log VALUES ('three');
        CREATE TABLE extra (id INTEGER PRIMARY KEY);
        INSERT INTO extra VALUES (7);
    """)
    conn.commit()
    conn.close()
    diff = diff_databases(before, after)
    assert [t.table for t in diff.tables] == ["users", "tags", "log", "extra"]
    users = diff.table("users")
    assert users.key_columns == ["id"]
    assert users.inserted == [{"id": 4, "name": "dee", "email": "dee@x"}]
    assert users.deleted == [{"id": 1, "name": "ann", "email": "ann@x"}]
    assert len(users.updated) == 1
    up = users.updated[0]
    assert up.key == {"id": 2} and up.changed == ["email"] and (up.before["email"], up.after["email"]) == ("bob@x", "bob@y")
    tags = diff.table("tags")
    assert tags.key_columns == ["user_id", "tag"] and tags.inserted == [{"user_id": 2, "tag": "c"}]
    log = diff.table("log")
    assert log.key_columns == ["rowid"]
    assert log.deleted == [{"msg": "one"}] and log.inserted == [{"msg": "three"}]
    assert diff.table("extra").status == "added" and diff.table("extra").inserted == [{"id": 7}]
    assert diff.counts() == {"tables": 4, "inserted": 4, "deleted": 2, "updated": 1}
    assert diff_databases(before, before).is_empty


def test_cli_db_diff(tmp_path, capsys):
    before, after = tmp_path / "before.db", tmp_path / "after.db"
    make_db(before)
    snapshot(before, after)
    conn = sqlite3.connect(after)
    conn.execute("UPDATE users SET name = 'ANN' WHERE id = 1")
    conn.commit()
    conn.close()
    assert awm(["db", "diff", str(before), str(after), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"] == {"tables": 1, "inserted": 0, "deleted": 0, "updated": 1}
    assert data["tables"][0]["updated"][0]["changed"] == ["name"]
    assert awm(["db", "diff", str(before), str(after)]) == 0
    assert "'ann' -> 'ANN'" in capsys.readouterr().out
    assert awm(["db", "diff", str(before), str(tmp_path / "missing.db")]) == 2


def test_template_cache_builds_once_and_copies(awm_real, tmp_path):
    s = Catalog.load([awm_real]).get("rover")
    cache = TemplateCache(tmp_path / "templates")
    path1, report1 = cache.get(s)
    mtime = path1.stat().st_mtime_ns
    path2, report2 = cache.get(s)
    assert path1 == path2 and path2.stat().st_mtime_ns == mtime and report2.row_counts == report1.row_counts
    assert s.content_hash()[:16] in path1.name
    ep = cache.episode_db(s, tmp_path / "ep" / "final.db")
    assert diff_databases(path1, ep).is_empty
    fresh = build_database(s.key, s.db_schema, s.sample_data, tmp_path / "fresh.db")
    assert fresh.row_counts == report1.row_counts


def test_template_cache_is_safe_under_concurrent_first_use(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    s = Catalog.load().get("pinecrest_online_store")
    cache = TemplateCache(tmp_path / "templates")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: cache.get(s), range(16)))
    assert len({str(p) for p, _ in results}) == 1
    assert all(r.ok for _, r in results)
    assert not list((tmp_path / "templates").glob("*.tmp*"))
