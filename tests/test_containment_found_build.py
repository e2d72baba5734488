"""The database build runs a scenario's SQL in a sandbox, but its scratch directory (in the template cache, on the
host's disk) had no quota: a few hundred bytes of sample SQL built a template of up to the 2 GB file-size limit —
each such scenario kept one in the cache for good, and copied it into every worker that loaded it (found by
attacking awm as a hostile environment author would; the test fails while the gap is open)."""
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
