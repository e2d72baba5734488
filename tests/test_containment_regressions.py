"""Regressions from attacking the bubblewrap sandbox through a live pool: a module planted in the worker's own
directory never runs before (or instead of) the confinement after a restart; sysctls are read-only; the disk quota
holds; a sparse file is not copied out densely; generated DDL the awm process introspects is bounded."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import pytest
from tinyenv import make_env_dir

from awm_engine.data.catalog import Catalog
from awm_engine.runtime import pool as pool_module
from awm_engine.runtime.pool import EnvPool
from awm_engine.sandbox import host

RUNNER = '''
class RunIn(BaseModel):
    code: str

@app.post("/api/run", summary="Run", description="Run code.", tags=["x"], operation_id="run")
def run(req: RunIn):
    scope = {}
    exec(req.code, scope)
    return {"out": scope.get("out")}
'''

PLANT = r'''
import os
for name in ("json.py", "ctypes.py", "runpy.py", "resource.py", "signal.py"):
    with open(os.path.join(os.getcwd(), name), "w") as fh:
        fh.write("import os\nopen(os.path.join(os.getcwd(), 'PLANTED-RAN'), 'w').write(str(os.getuid()))\n")
os.makedirs(os.path.join(os.getcwd(), "awm_engine", "sandbox"), exist_ok=True)
for rel in ("awm_engine/__init__.py", "awm_engine/sandbox/__init__.py", "awm_engine/sandbox/init.py"):
    with open(os.path.join(os.getcwd(), rel), "w") as fh:
        fh.write("import os\nopen(os.path.join(os.getcwd(), 'PLANTED-RAN'), 'w').write(str(os.getuid()))\n")
out = "planted"
'''

STATUS = r'''
import os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
try:
    open("/proc/sys/kernel/core_pattern", "w").write("core")
    sysctl = "written"
except OSError as exc:
    sysctl = type(exc).__name__
out = {"uid": status["Uid"].split(), "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(),
       "seccomp": status["Seccomp"].strip(), "planted_ran": os.path.exists(os.path.join(os.getcwd(), "PLANTED-RAN")),
       "sysctl": sysctl}
'''


def _call(episode, code):
    return episode.call_tool("run", {"code": code})


def test_a_module_planted_in_the_workers_directory_never_runs_before_the_confinement(tmp_path):
    if not host.protections().namespaces:
        pytest.skip(f"no namespace layer here: {host.protections().off.get('namespaces')}")
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Runner": RUNNER})]).get("runner")

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario)
            assert not (await _call(episode, PLANT)).is_error
            pid = episode.worker.proc.pid
            await _call(episode, "import os\nos._exit(3)")  # the worker dies: the pool restarts it on the same home
            result = await _call(episode, STATUS)
            assert episode.worker.proc.pid != pid
            await episode.close()
            return json.loads(result.text)["out"]

    status = asyncio.run(go())
    assert status["planted_ran"] is False  # python -I: the working directory is never on sys.path
    assert "0" not in status["uid"]  # never the host's root, in no uid slot
    assert int(status["cap_eff"], 16) == 0 and int(status["cap_bnd"], 16) == 0
    assert status["seccomp"] == "2"  # the filter is loaded
    assert status["sysctl"] != "written"


FILL = r'''
import os
written = 0
try:
    with open(os.path.join(os.getcwd(), "filler"), "wb") as fh:
        for _ in range(64):
            fh.write(b"x" * (1 << 20))
            fh.flush()
            written += 1
except OSError as exc:
    err = type(exc).__name__
else:
    err = None
out = {"written_mb": written, "error": err}
'''

SPARSE = r'''
import glob, os
for live in glob.glob(os.path.join(os.getcwd(), "episodes", "*")):
    with open(os.path.join(live, "final.db-wal"), "wb") as fh:
        fh.truncate(1536 * 1024 ** 2)
out = "sparse"
'''


def test_the_disk_quota_holds_and_sparse_files_are_not_copied_out(tmp_path, monkeypatch):
    if not host.protections().disk_quota:
        pytest.skip(f"no disk quota here: {host.protections().off.get('disk_quota')}")
    monkeypatch.setattr(pool_module, "DISK_MB", 16)
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Runner": RUNNER})]).get("runner")
    run = tmp_path / "run"

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=run)
            filled = json.loads((await _call(episode, FILL)).text)["out"]
            await _call(episode, "import os\nos.unlink(os.path.join(os.getcwd(), 'filler'))\nout = 1")
            assert not (await _call(episode, SPARSE)).is_error
            await episode.close()
            return filled

    filled = asyncio.run(go())
    assert filled["error"] == "OSError" or filled["written_mb"] < 16, filled  # ENOSPC at the quota
    assert filled["written_mb"] < 16
    assert not (run / "final.db-wal").exists()
    assert "sparse" in (run / "unsafe_entries.txt").read_text()
    assert sqlite3.connect(run / "final.db").execute("SELECT count(*) FROM notes").fetchone()[0] >= 1


def test_generated_ddl_the_catalog_introspects_is_bounded(tmp_path):
    """The catalog builds a scenario's DDL in memory in the awm process to read its columns: a runaway recursive
    query is interrupted and a giant value refused, instead of spinning or taking gigabytes."""
    schema = {"tables": [
        {"name": "spin", "ddl": "CREATE TABLE spin AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                "SELECT count(*) AS n FROM c", "indexes": []},
        {"name": "big", "ddl": "CREATE TABLE big AS SELECT zeroblob(400000000) AS b", "indexes": []},
        {"name": "notes", "ddl": "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)", "indexes": []}]}
    data = make_env_dir(tmp_path / "d", {"Ddl": ""}, schema=schema)
    started = time.monotonic()
    tables = {t.name: t for t in Catalog.load([data]).get("ddl").tables()}
    assert time.monotonic() - started < 60
    assert tables["spin"].error and "interrupt" in tables["spin"].error.lower()
    assert tables["big"].error and "too big" in tables["big"].error.lower()
    assert tables["notes"].error is None and [c.name for c in tables["notes"].columns] == ["id", "text"]
