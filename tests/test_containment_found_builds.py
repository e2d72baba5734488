"""A scenario's database build runs its SQL in a sandbox with a timeout of 600 s — in a thread of the awm process's
default executor, the one that also moves every episode's databases out of its worker, copies templates in and
writes results lines. A few scenarios whose sample SQL never finishes held all of its threads (six on two cores),
and every other scenario of the same ``awm eval run`` waited behind them (found by attacking awm as a hostile
environment author would; the test fails while the gap is open)."""
from __future__ import annotations

import asyncio
import functools
import json
from concurrent.futures import ThreadPoolExecutor

from tinyenv import make_env_dir

from awm_engine.data.catalog import Catalog
from awm_engine.db import build, templates
from awm_engine.runtime.pool import EnvPool
from awm_engine.sandbox import launcher

SPIN = {"tables": [{"table_name": "notes", "insert_statements": [
    "INSERT INTO notes (text) SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
    "SELECT x FROM c)"]}]}


def running_builds() -> int:
    return sum(1 for s in list(launcher._live) if s.label == "build" and s.proc is not None and s.proc.poll() is None)


def test_builds_that_never_finish_do_not_hold_up_the_parents_other_work(tmp_path, monkeypatch):
    monkeypatch.setattr(templates, "build_database_sandboxed",
                        functools.partial(build.build_database_sandboxed, timeout=15))
    data = make_env_dir(tmp_path / "d", {f"Spin{i}": "" for i in range(8)})
    path = data / "gen_sample.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    path.write_text("".join(json.dumps({**row, "sample_data": SPIN}) + "\n" for row in rows))
    catalog = Catalog.load([data])

    async def go():
        # the default executor's size on two cores (min(32, cores + 4)), whatever this machine has
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(6))
        async with EnvPool(workers=1, spares=0) as pool:
            builds = [asyncio.create_task(pool._template(s)) for s in catalog]
            while running_builds() < 4:  # they are all handed to their threads by now; four at least are running
                await asyncio.sleep(0.05)
            await asyncio.to_thread(lambda: None)  # anything else the parent does on a thread (a close, a result)
            waited_for_a_build = any(b.done() for b in builds)
            await asyncio.gather(*builds)
            return waited_for_a_build

    assert not asyncio.run(go()), "the parent's other work waited for a scenario's build to time out"
