"""Databases an environment's SQL or code grows, and the host's disk (found by attacking awm as a hostile
environment author would; each test fails while its gap is open):

- the database build runs a scenario's SQL in a sandbox, but its scratch directory (in the template cache, on the
  host's disk) had no quota: a few hundred bytes of sample SQL built a template of up to the 2 GB file-size limit —
  each such scenario kept one in the cache for good, and copied it into every worker that loaded it;
- an episode's databases leave its worker's capped directory when it closes: the next episode could fill the
  directory again, so a run's directories grew by the worker's whole quota per episode.
"""
from __future__ import annotations

import sqlite3

from tinyenv import SCHEMA

from awm_engine.db.build import build_database_sandboxed
from awm_engine.sandbox import host, limits

MB = 1 << 20


def test_a_scenarios_sql_cannot_build_a_template_past_a_workers_quota(tmp_path, monkeypatch):
    """48 one-megabyte rows from one INSERT, with the quota at 16 MB (it is ``AWM_SANDBOX_DISK_MB``, 1 GB, by
    default): the template stays within the quota, and the build says what failed."""
    monkeypatch.setattr(limits, "DISK_MB", 16)
    sample = {"tables": [{"table_name": "notes", "insert_statements": [
        "INSERT INTO notes (id, text) VALUES (1, 'first')",
        "INSERT INTO notes (text) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 48) "
        "SELECT hex(zeroblob(500000)) FROM c"]}]}
    path = tmp_path / "cache" / "fill.db"
    report = build_database_sandboxed("fill", SCHEMA, sample, path)
    size = path.stat().st_size if path.exists() else 0
    assert size <= 16 * MB, f"the build wrote a {size / MB:.0f} MB template ({report.fatal or report.failures})"
    assert report.fatal or report.failures, report  # said, not silent
    if host.protections().disk_quota:
        assert "disk quota of 16 MB" in report.fatal, report.fatal
    if report.built:
        assert sqlite3.connect(path).execute("SELECT text FROM notes WHERE id = 1").fetchone() == ("first",)


def test_an_episodes_databases_take_a_bounded_size_out_of_its_sandbox(tmp_path, monkeypatch):
    """A worker's directory is capped (1 GiB), but its episodes' databases leave it when each episode closes and
    stay in the run directory: a scenario refilling it for every episode filled the host's disk one episode at a time
    (a thousand tasks: a terabyte), and each verification copied two of them into a tmpfs. With the cap at 16 MiB
    (``AWM_EPISODE_DB_MB``, 256 by default), a 48 MB final.db stays behind, named in ``unsafe_entries.txt``."""
    import asyncio

    from tinyenv import grow, make_env_dir

    from awm_engine.data.catalog import Catalog
    from awm_engine.runtime import pool as pool_module
    from awm_engine.runtime.pool import EnvPool

    monkeypatch.setattr(pool_module, "EPISODE_DB_MB", 16, raising=False)
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Grower": grow(48)})]).get("grower")
    run = tmp_path / "run"

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=run)
            assert not (await episode.call_tool("grow", {})).is_error
            await episode.close()

    asyncio.run(go())
    taken = sum(p.stat().st_size for p in run.iterdir() if p.name.startswith(("initial.db", "final.db")))
    assert taken <= 16 * MB, f"the episode's databases took {taken / MB:.0f} MB out of its sandbox"
    assert (run / "initial.db").is_file()  # what fits still comes out
    assert "final.db" in (run / "unsafe_entries.txt").read_text() and "AWM_EPISODE_DB_MB" in (
        run / "unsafe_entries.txt").read_text()
