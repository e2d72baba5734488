"""Template freshness: builds whose contents depend on the clock expire after a maximum age and are rebuilt (with
an injected clock, never a real wait of minutes); builds without time dependence never expire; runs record
their template's build time."""
import asyncio
import json
import sqlite3
import time

import pytest
from tinyenv import TIMED_SCHEMA, make_env_dir

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.db.build import time_dependence
from awm_engine.db.templates import DEFAULT_MAX_AGE, MAX_AGE_ENV, TemplateCache, max_age_from_env
from awm_engine.eval.episode import make_policy, run_episode
from awm_engine.runtime.pool import EnvPool


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def catalog(tmp_path):
    make_env_dir(tmp_path / "timed", {"timed": ""}, schema=TIMED_SCHEMA)
    make_env_dir(tmp_path / "plain", {"plain": ""})
    return Catalog.load([tmp_path / "timed", tmp_path / "plain"])


def created_at(db) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT created_at FROM notes WHERE id = 1").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("sql, found", [
    ("CREATE TABLE t (a DATETIME DEFAULT CURRENT_TIMESTAMP)", "CURRENT_TIMESTAMP"),
    ("create table t (a date default current_date, b time default Current_Time)", "CURRENT_DATE"),
    ("INSERT INTO t VALUES (datetime('now', '-3 days'))", "datetime('now', '-3 days')"),
    ("INSERT INTO t VALUES (DATE( 'NOW' ))", "DATE( 'NOW' )"),
    ("INSERT INTO t VALUES (strftime('%Y-%m-%d', 'now'))", "strftime('%Y-%m-%d', 'now')"),
    ("INSERT INTO t VALUES (strftime('%s'))", "strftime('%s')"),
    ("INSERT INTO t VALUES (julianday('now') - 30)", "julianday('now')"),
    ("INSERT INTO t VALUES (datetime())", "datetime()"),
    ("INSERT INTO t VALUES (unixepoch(\"now\"))", 'unixepoch("now")'),
])
def test_time_dependent_constructs_are_found(sql, found):
    findings = time_dependence(None, {"tables": [{"table_name": "t", "insert_statements": [sql]}]})
    assert findings and found in findings[0] and findings[0].startswith("t inserts: ")


@pytest.mark.parametrize("sql", [
    "INSERT INTO t VALUES ('2024-01-01 10:00:00')",
    "INSERT INTO t VALUES ('the CURRENT_TIMESTAMP of the meeting')",  # quoted text is not SQL
    "INSERT INTO t VALUES (datetime('2024-01-01', '+1 day'))",
    "INSERT INTO t VALUES (strftime('%Y', created_at))",
    "CREATE TABLE t (current_timestamp_col TEXT, t TIME(3))",
])
def test_fixed_values_are_not_time_dependent(sql):
    assert time_dependence({"tables": [{"name": "t", "ddl": sql}]}, {"tables": []}) == []


@pytest.mark.parametrize("schema, sample", [
    (None, None), ({"tables": "x"}, {"tables": [None, 5, "x"]}), ([], {}),
    ({"tables": [{"name": ["odd"], "ddl": 5, "indexes": {"a": 1}, "examples": [None, 3]}]},
     {"tables": [{"table_name": None, "insert_statements": "INSERT INTO t VALUES (1)"}]}),
])
def test_malformed_input_is_never_an_error(schema, sample):
    assert time_dependence(schema, sample) == []


def test_findings_name_the_table_and_the_statement_kind():
    schema = {"tables": [{"name": "users", "ddl": "CREATE TABLE users (c DATETIME DEFAULT CURRENT_TIMESTAMP)",
                          "indexes": [], "examples": ["INSERT INTO users (c) VALUES (date('now'))"]}]}
    sample = {"tables": [{"table_name": "users", "insert_statements": [
        "INSERT INTO users (c) VALUES (date('now'))", "INSERT INTO users (c) VALUES (date('now'))"]}]}
    assert time_dependence(schema, sample) == ["users ddl: CURRENT_TIMESTAMP", "users examples: date('now')",
                                               "users inserts: date('now')"]


def test_max_age_comes_from_the_environment(monkeypatch):
    for raw, expected in (("", DEFAULT_MAX_AGE), ("60", 60.0), ("0", 0.0), ("inf", float("inf")),
                          ("soon", DEFAULT_MAX_AGE), ("-5", DEFAULT_MAX_AGE), ("nan", DEFAULT_MAX_AGE)):
        monkeypatch.setenv(MAX_AGE_ENV, raw)
        assert max_age_from_env() == expected
        assert TemplateCache().max_age == expected
    assert TemplateCache(max_age=5).max_age == 5


def test_a_time_dependent_template_expires_and_a_plain_one_never(catalog, tmp_path):
    clock = Clock()
    cache = TemplateCache(tmp_path / "tpl", max_age=300, clock=clock)
    timed, plain = catalog.get("timed"), catalog.get("plain")
    path, first = cache.get(timed)
    first_created = created_at(path)
    assert first.built_at == clock.now and first.time_dependent == ["notes ddl: CURRENT_TIMESTAMP"]
    _, plain_first = cache.get(plain)
    assert plain_first.time_dependent == []
    clock.now += 299
    assert cache.get(timed)[1].built_at == first.built_at  # still fresh: the same template
    assert cache.due(first) and not cache.expired(first)
    time.sleep(1.1)  # CURRENT_TIMESTAMP has one-second resolution
    clock.now += 2
    path_again, second = cache.get(timed)  # expired: rebuilt before use, at the same path
    assert path_again == path and second.built_at == clock.now
    assert created_at(path) > first_created  # the values the clock gave are those of the new build
    assert not list((tmp_path / "tpl").glob("*.tmp*"))  # written beside and renamed over: nothing half-written
    assert json.loads(path.with_name(path.stem + ".build.json").read_text())["built_at"] == clock.now
    clock.now += 10 ** 9
    assert cache.get(plain)[1].built_at == plain_first.built_at  # no time dependence: never expires
    assert not cache.expired(plain_first) and not cache.due(plain_first)
    # a cache that never expires, and one that rebuilds for every use (the reference's behaviour)
    assert TemplateCache(tmp_path / "tpl", max_age=float("inf"), clock=clock).get(timed)[1].built_at == \
        second.built_at
    always = TemplateCache(tmp_path / "tpl", max_age=0, clock=clock)
    clock.now += 0.001
    assert always.get(timed)[1].built_at == clock.now


async def test_the_pool_refreshes_in_the_background_and_rebuilds_expired_templates(catalog, tmp_path):
    clock = Clock()
    cache = TemplateCache(tmp_path / "tpl", max_age=300, clock=clock)
    timed, plain = catalog.get("timed"), catalog.get("plain")
    async with EnvPool(workers=1, workdir=tmp_path / "pool", templates=cache) as pool:
        first = await pool.open_episode(timed)
        built = first.template["built_at"]
        assert built == clock.now and first.template["time_dependent"] == ["notes ddl: CURRENT_TIMESTAMP"]
        plain_built = (await pool.open_episode(plain)).template["built_at"]

        clock.now += 200  # past half the maximum age: this episode still gets the current template ...
        second = await pool.open_episode(timed)
        assert second.template["built_at"] == built
        deadline = time.monotonic() + 60  # ... while the next one is built in the background and swapped in
        while True:
            third = await pool.open_episode(timed)
            if third.template["built_at"] != built or time.monotonic() > deadline:
                break
            await third.close()
            await asyncio.sleep(0.05)
        assert third.template["built_at"] == clock.now
        assert json.loads((await second.call_tool("list_notes", {})).text)["notes"]  # older episodes keep working
        await second.reset()
        assert created_at(second.initial_db) == created_at(first.initial_db)

        time.sleep(1.1)
        clock.now += 10_000  # long expired: rebuilt before use
        fourth = await pool.open_episode(timed)
        assert fourth.template["built_at"] == clock.now
        assert created_at(fourth.initial_db) > created_at(first.initial_db)
        assert (await pool.open_episode(plain)).template["built_at"] == plain_built  # never expires


def test_runs_record_their_templates_build_time(catalog, tmp_path):
    scenario = catalog.get("timed")
    outcome = asyncio.run(run_episode(catalog, scenario, 0, make_policy("immediate", scenario, 0),
                                      run_dir=tmp_path / "run", verify_mode=None))
    template = json.loads((outcome.run_dir / "trajectory.json").read_text())["awm"]["template"]
    assert abs(template["built_at"] - time.time()) < 120 and template["built"].endswith("Z")
    assert template["time_dependent"] == ["notes ddl: CURRENT_TIMESTAMP"]


def test_db_build_refresh_rebuilds_the_cached_templates(catalog, tmp_path, capsys):
    scenario = catalog.get("timed")
    _, before = TemplateCache().get(scenario)
    assert awm(["db", "build", "--data", str(tmp_path / "timed"), "--refresh", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)[0]
    assert report["built_at"] > before.built_at and report["time_dependent"]
    assert TemplateCache().get(scenario)[1].built_at == report["built_at"]
    with pytest.raises(SystemExit):
        awm(["db", "build", "--data", str(tmp_path / "timed")])  # --out or --refresh
