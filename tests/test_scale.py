"""The pool at scale: back-pressure instead of timeouts, LRU-bounded scenario modules, prefetched episodes,
isolation under concurrency, a worker killed mid-episode replaced while the others go on."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time

from tinyenv import make_env_dir, slow_write

from awm_engine.data.catalog import Catalog
from awm_engine.runtime.pool import EnvPool

SLOW = slow_write(0.3)


async def test_an_overload_waits_for_room_instead_of_timing_out(tmp_path):
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Slow": SLOW})]).get("slow")
    async with EnvPool(workers=1, max_inflight=2, call_timeout=1.0) as pool:
        episodes = await asyncio.gather(*(pool.open_episode(scenario) for _ in range(24)))
        started = time.monotonic()
        results = await asyncio.gather(*(e.call_tool("slow_write", {"text": f"e{i}"}) for i, e in enumerate(episodes)))
        waited = time.monotonic() - started
        assert waited > 3  # 24 calls of 0.3 s, two at a time: most waited far past the 1 s call timeout
        assert [r for r in results if r.is_error] == []
        for i, e in enumerate(episodes):  # isolation under concurrency: each sees exactly its own write
            notes = [n["text"] for n in json.loads((await e.call_tool("list_notes", {})).text)["notes"]]
            assert notes == ["first", "second", f"e{i}"]
        await asyncio.gather(*(e.close() for e in episodes))


async def test_one_scenario_per_sandbox_and_sandboxes_are_lru_bounded(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"A": "", "B": "", "C": ""})])
    async with EnvPool(workers=1, max_sandboxes=2) as pool:
        seen = {}
        for key in ("a", "b", "c"):
            episode = await pool.open_episode(catalog.get(key))
            seen[key] = episode.worker
            assert set(episode.worker.loaded) == {key}  # no two scenarios ever share a process
            await episode.close()
            assert len([w for w in pool.workers if w.scenario is not None]) <= 2
        assert len({id(w) for w in seen.values()}) == 3
        assert seen["a"] not in pool.workers and not seen["a"].home.exists()  # the least recently used went
        episode = await pool.open_episode(catalog.get("a"))  # a new sandbox on demand
        assert not (await episode.call_tool("list_notes", {})).is_error
        # each load leaves the module's objects frozen, out of the collector's full passes (which paused opens
        # and calls by 30-150 ms in a loaded worker)
        assert (await episode.worker.request("ping"))["frozen"] > 1000
        await episode.close()


async def test_prefetched_episodes_are_handed_out_at_once(tmp_path):
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Good": ""})]).get("good")
    async with EnvPool(workers=2) as pool:
        await pool.prefetch(scenario, 6)
        assert pool.ready_count(scenario) == 6
        started = time.perf_counter()
        episodes = [await pool.open_episode(scenario, run_dir=tmp_path / f"run{i}") for i in range(6)]
        assert time.perf_counter() - started < 0.05 * 6
        assert pool.ready_count(scenario) == 0 and len({e.id for e in episodes}) == 6
        await episodes[0].call_tool("add_note", {"text": "mine"})
        for e in episodes:
            await e.close()
        assert (tmp_path / "run0" / "final.db").is_file() and (tmp_path / "run5" / "initial.db").is_file()
        later = await pool.open_episode(scenario)  # none left: opened normally
        await later.close()


async def test_warm_loads_a_scenario_on_every_worker_before_any_episode(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Good": "", "Other": ""})])
    async with EnvPool(workers=2) as pool:
        seconds = await pool.warm(catalog.get("good"))  # the cold start, per worker (benchmarks/pool.py reports it)
        assert sorted(seconds) == [0, 1] and all(s > 0 for s in seconds.values())
        assert all(set(w.loaded) == {"good"} for w in pool.workers if w.scenario == "good")
        assert max((await pool.warm(catalog.get("good"))).values()) < 0.05  # loaded already: nothing to do
        episodes = await asyncio.gather(*(pool.open_episode(catalog.get("good")) for _ in range(4)))
        assert {e.worker.index for e in episodes} == {0, 1}  # opens find the module loaded wherever they land
        await asyncio.gather(*(e.close() for e in episodes))


async def test_a_worker_killed_mid_episode_is_replaced_and_the_others_go_on(tmp_path):
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Slow": SLOW})]).get("slow")
    async with EnvPool(workers=2) as pool:
        episodes = await asyncio.gather(*(pool.open_episode(scenario) for _ in range(4)))
        victim = pool.workers[0]
        old_pid = victim.proc.pid
        on_victim = [e for e in episodes if e.worker is victim]
        others = [e for e in episodes if e.worker is not victim]
        assert on_victim and others
        calls = [asyncio.create_task(e.call_tool("slow_write", {"text": "x"})) for e in episodes]
        await asyncio.sleep(0.1)
        os.kill(old_pid, signal.SIGKILL)
        results = await asyncio.gather(*calls)
        for e, r in zip(episodes, results):
            if e.worker is victim:
                assert r.is_error and r.error_kind == "internal", r.text  # only its episodes saw the failure
            else:
                assert not r.is_error, r.text
        assert victim.alive and victim.proc.pid != old_pid  # replaced
        for e in on_victim:  # and its episodes carry on from their databases
            assert not (await e.call_tool("list_notes", {})).is_error
        await asyncio.gather(*(e.close() for e in episodes))


async def test_closing_an_episode_twice_at_once_moves_its_databases_once(tmp_path):
    """A rollout's own close and the pool's (an app quitting mid-episode) at the same time: no error, and both
    return with the databases in the run directory (this raced: FileNotFoundError from the second move)."""
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"A": ""})])
    async with EnvPool(workers=1) as pool:
        for _ in range(5):
            run_dir = tmp_path / "runs" / os.urandom(4).hex()
            episode = await pool.open_episode(catalog.get("a"), run_dir=run_dir)
            await asyncio.gather(episode.close(), episode.close(), episode.close())
            assert (run_dir / "final.db").is_file() and (run_dir / "initial.db").is_file()
        episode = await pool.open_episode(catalog.get("a"), run_dir=tmp_path / "runs" / "last")
        await asyncio.gather(episode.close(), pool.close())
        assert (tmp_path / "runs" / "last" / "final.db").is_file()
