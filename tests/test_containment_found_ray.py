"""``--executor ray``: an episode's databases came back from its actor as one object each — read whole into the
actor, Ray's object store and the calling process, for every episode closing at once (measured: twice the
database in the caller). An environment fills its ``final.db`` up to what an episode may take out of its sandbox
(``AWM_EPISODE_DB_MB``, 256 MiB; it was its worker's whole 1 GB quota), so a few episodes closing together took the
awm process to gigabytes (found by attacking awm as a hostile environment author would; the test fails while the gap
is open)."""
from __future__ import annotations

import pytest
from tinyenv import grow, make_env_dir

pytest.importorskip("ray", reason="Ray is not installed (pip install 'awm[ray]'; make test installs it)")

from test_sandbox_attacks_found import peak_rss_mb  # noqa: E402


CLOSE_ON_RAY = '''
import asyncio, json, os, sys
from awm_engine.data.catalog import Catalog
from awm_engine.runtime.ray_pool import RayEnvPool
catalog = Catalog.load([sys.argv[1]])

async def go():
    async with RayEnvPool([sys.argv[1]], actors=1) as pool:
        episode = await pool.open_episode(catalog.get("filler"), run_dir=sys.argv[2])
        result = await episode.call_tool("grow", {}, timeout=300)
        base = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:")][0] // 1024
        await episode.close()
        return result.text, base

text, base = asyncio.run(go())
OUT = {"text": text, "rss_before_close_mb": base, "final_mb": os.path.getsize(os.path.join(sys.argv[2], "final.db")) >> 20}
'''


def test_an_episodes_databases_come_back_from_a_ray_actor_a_chunk_at_a_time(tmp_path):
    data = make_env_dir(tmp_path / "d", {"Filler": grow(200)})
    out = peak_rss_mb(CLOSE_ON_RAY, str(data), str(tmp_path / "run"))
    assert out["final_mb"] >= 190, out  # the whole database came back
    grown = out["peak_mb"] - out["rss_before_close_mb"]
    assert grown < 150, f"closing one episode of a {out['final_mb']} MB database took the caller {grown} MB more: {out}"
