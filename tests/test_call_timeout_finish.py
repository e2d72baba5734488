"""A tool call past its timeout: the reference leaves the handler running and its write lands; robust stops it.

The AWM reference's agent gives up on an MCP call after 60 s, but the reference's server goes on running the
handler, so a slow write still reaches the final database. ``on_timeout="finish"`` (the reference profile's
default) does the same: the call is answered with the timeout text, the handler keeps going, and closing or
resetting the episode waits for it. ``"interrupt"`` (robust) stops it, so a timed-out call writes nothing more.

No test here depends on the machine's speed: the handler takes at least 1.5 s (sleeps are lower bounds) and the
timeout is 0.3 s, so the timeout always comes first; whatever the handler does after that is waited for.
"""
from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from tinyenv import make_env_dir

from awm_engine.agent.policies import AssistantTurn, ScriptedTurns, _meta_call
from awm_engine.agent.rollout import AgentConfig
from awm_engine.data.catalog import Catalog
from awm_engine.db.templates import TemplateCache
from awm_engine.eval.episode import run_episode
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.pool import EnvPool

SLOW_WRITE = '''
@app.post("/api/slow_note", summary="Add a note slowly", description="Takes a while, then writes.", tags=["notes"],
          operation_id="slow_note", response_model=NoteOut)
async def slow_note(req: NoteIn):
    import time
    for _ in range(30):  # short sleeps: an interrupt lands between them
        time.sleep(0.05)
    session = SessionLocal()
    row = Note(text=req.text)
    session.add(row)
    session.commit()
    out = NoteOut(id=row.id, text=row.text)
    session.close()
    return out
'''

LANDS = {"finish": True, "interrupt": False}


def load(scenario, workdir: Path) -> LoadedEnv:
    template, _ = TemplateCache(workdir / "tpl").get(scenario)
    return LoadedEnv(scenario.key, scenario.code, template, workdir / "work")


def notes(db: Path) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute("SELECT text FROM notes ORDER BY id")]


@pytest.fixture
def scenario(tmp_path):
    return Catalog.load([make_env_dir(tmp_path / "d", {"Tiny": SLOW_WRITE})]).get("tiny")


@pytest.mark.parametrize("on_timeout", sorted(LANDS))
def test_in_process_episode(on_timeout, scenario, tmp_path):
    ep = Episode(load(scenario, tmp_path / "w"), tmp_path / "run")

    async def go():
        timed_out = await ep.call_tool("slow_note", {"text": "late"}, timeout=0.3, on_timeout=on_timeout)
        listed = await ep.call_tool("list_notes", {}, timeout=30)  # waits for a handler left running
        await ep.close()
        return timed_out, listed

    timed_out, listed = asyncio.run(go())
    assert timed_out.is_error and timed_out.error_kind == "timeout" and "timed out after 0.3s" in timed_out.text
    assert listed.status == 200
    assert ("late" in [n["text"] for n in json.loads(listed.text)["notes"]]) is LANDS[on_timeout]
    assert ("late" in notes(tmp_path / "run" / "final.db")) is LANDS[on_timeout]
    assert not ep.stuck


def test_reset_waits_for_a_handler_left_running(scenario, tmp_path):
    ep = Episode(load(scenario, tmp_path / "w"), tmp_path / "run")

    async def go():
        await ep.call_tool("slow_note", {"text": "late"}, timeout=0.3, on_timeout="finish")
        await ep.reset()  # the late write lands first, then the fresh copy replaces it
        return await ep.call_tool("list_notes", {}, timeout=30)

    after = asyncio.run(go())
    assert [n["text"] for n in json.loads(after.text)["notes"]] == ["first", "second"]
    assert ep.left_running == 0


def test_unknown_on_timeout_is_refused(scenario, tmp_path):
    ep = Episode(load(scenario, tmp_path / "w"), tmp_path / "run")
    with pytest.raises(ValueError, match="on_timeout must be one of"):
        asyncio.run(ep.call_tool("list_notes", {}, on_timeout="ignore"))
    with pytest.raises(ValueError, match="unknown on_timeout"):
        AgentConfig(on_timeout="ignore")


@pytest.mark.parametrize("on_timeout", sorted(LANDS))
def test_sandboxed_pool_episode(on_timeout, scenario, tmp_path):
    async def go():
        async with EnvPool(workers=1, workdir=tmp_path / "pool") as pool:
            ep = await pool.open_episode(scenario, run_dir=tmp_path / "run")
            timed_out = await ep.call_tool("slow_note", {"text": "late"}, timeout=0.3, on_timeout=on_timeout)
            await ep.close()
            return timed_out

    timed_out = asyncio.run(go())
    assert timed_out.error_kind == "timeout" and "restarted" not in timed_out.text
    assert ("late" in notes(tmp_path / "run" / "final.db")) is LANDS[on_timeout]


@pytest.mark.parametrize("profile,expected", [("reference", "finish"), ("robust", "interrupt")])
def test_each_profile_through_a_rollout(profile, expected, scenario, tmp_path):
    """The profile's default reaches the environment, is recorded in the run's config, and decides final.db."""
    config = AgentConfig(protocol=profile, call_timeout=0.3)
    assert config.on_timeout == expected
    policy = ScriptedTurns([AssistantTurn(_meta_call("call_tool", {"tool_name": "slow_note",
                                                                    "arguments": json.dumps({"text": "late"})}))],
                           final="done")
    outcome = asyncio.run(run_episode(Catalog.load([tmp_path / "d"]), scenario, 0, policy, config, tmp_path / "r",
                                      verify_mode=None))
    trajectory = json.loads((tmp_path / "r" / "trajectory.json").read_text())
    assert trajectory["awm"]["config"]["on_timeout"] == expected
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    observed = [e for e in events if e.get("type") == "observation"]
    assert observed and observed[0].get("error_kind") == "timeout", observed
    assert ("late" in notes(tmp_path / "r" / "final.db")) is LANDS[expected]
    assert outcome.rollout.finished is not None


BLOCKED_IN_C = '''
@app.post("/api/stuck_note", summary="Never stops", description="Blocks in C.", tags=["bad"],
          operation_id="stuck_note", response_model=NoteOut)
async def stuck_note(req: NoteIn):
    import time
    time.sleep(600)
'''


def test_a_left_running_handler_that_will_not_stop_costs_its_worker(tmp_path, monkeypatch):
    """Hostile: a handler left running blocks in C past the settle limit. Closing interrupts it, finds it stuck and
    restarts the worker before the databases move, so no thread of it can write final.db afterwards."""
    monkeypatch.setenv("AWM_SETTLE_LIMIT", "1")
    monkeypatch.setattr("awm_engine.runtime.pool.SETTLE_LIMIT", 1.0)
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Tiny": BLOCKED_IN_C})]).get("tiny")

    async def go():
        async with EnvPool(workers=1, workdir=tmp_path / "pool") as pool:
            ep = await pool.open_episode(scenario, run_dir=tmp_path / "run")
            pid = ep.worker.proc.pid
            timed_out = await ep.call_tool("stuck_note", {"text": "x"}, timeout=0.3, on_timeout="finish")
            await ep.close()
            return timed_out, pid != ep.worker.proc.pid

    timed_out, restarted = asyncio.run(go())
    assert timed_out.error_kind == "timeout" and restarted
    assert notes(tmp_path / "run" / "final.db") == ["first", "second"]


def test_time_queued_behind_another_call_is_not_on_the_clock(scenario, tmp_path):
    """A call that waits for the episode behind a slow handler (>= 1.5 s) gets its whole timeout once it runs."""
    ep = Episode(load(scenario, tmp_path / "w"), tmp_path / "run")

    async def go():
        slow = asyncio.create_task(ep.call_tool("slow_note", {"text": "slow"}, timeout=60))
        while not ep._lock.locked():  # the slow handler holds the episode
            await asyncio.sleep(0.01)
        listed = await ep.call_tool("list_notes", {}, timeout=1.0)
        return await slow, listed

    slow, listed = asyncio.run(go())
    assert not slow.is_error
    assert listed.status == 200 and not listed.is_error, listed.text
    assert "slow" in [n["text"] for n in json.loads(listed.text)["notes"]]
