"""A server that found no warm service starts one and, once it serves, asks it to bind a spare to its scenario
(``EnvPool.bind_next``), so that the next server of that scenario starts warm. The service measures the host's
protections before it listens (seconds on a busy machine): the ask came first and was lost — no spare was bound,
and the next server started its own worker (seen as ``test_new_user_found_serve13``'s warm server failing under
load). The ask is now repeated while the service it started does not listen yet."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from awm_engine.data.catalog import Catalog
from awm_engine.runtime import warm
from awm_engine.runtime.pool import EnvPool
from tests.test_warm import SCENARIO, log, service_dir, until  # noqa: F401 - service_dir is a fixture

ROOT = Path(__file__).resolve().parents[1]


def test_a_bind_asked_before_the_started_service_listens_is_asked_again(tmp_path, service_dir, monkeypatch):
    scenario = Catalog.load([str(ROOT / "sample_envs")]).get(SCENARIO)
    asked: list = []
    first_missed = threading.Event()
    real = warm.bind_next

    def spy(*args, **kwargs):
        answer = real(*args, **kwargs)
        asked.append(answer)
        if answer is None:  # no service listens yet
            first_missed.set()
        return answer

    monkeypatch.setattr(warm, "bind_next", spy)
    start_service = warm.ensure_service
    monkeypatch.setattr(warm, "ensure_service", lambda: None)  # the pool's start starts none: done below

    async def main() -> bool:
        async with EnvPool(workdir=tmp_path / "pool", warm=True, serve_channel=True, spares=0) as pool:
            assert pool._started_service  # (it found none: as far as it knows, it started one)
            await pool._template(scenario)  # built, as a serving pool's is
            task = asyncio.create_task(pool.bind_next(scenario))
            await asyncio.to_thread(first_missed.wait, 60)  # the first ask found no service...
            start_service()  # ...which starts only now (one slow to listen, at its slowest)
            return await task

    assert asyncio.run(main()) is True
    assert asked[0] is None and asked[-1] is True
    until(lambda: f"bound to {SCENARIO!r}" in log(service_dir), "the spare bound to the scenario")


def test_a_pool_that_took_a_worker_asks_once(tmp_path, service_dir, monkeypatch):
    """Where the service was found running (a worker taken from it), a missing socket means it is gone: one ask,
    never a wait before the server goes on."""
    scenario = Catalog.load([str(ROOT / "sample_envs")]).get(SCENARIO)
    asked: list = []

    def spy(*args, **kwargs):
        asked.append(None)
        return None

    monkeypatch.setattr(warm, "bind_next", spy)

    async def main() -> bool:
        async with EnvPool(workdir=tmp_path / "pool", warm=True, serve_channel=True, spares=0) as pool:
            await pool._template(scenario)
            pool._started_service = False  # as ``start`` leaves it when it took a worker from the service
            return await pool.bind_next(scenario)

    assert asyncio.run(main()) is False
    assert len(asked) == 1
