"""One episode lifecycle: every backend implements the episode interface, and ``run_episode`` takes a task
to a reward on each of them, reporting load failures as typed results."""
from __future__ import annotations

import json
import sqlite3

from tinyenv import make_env_dir

from awm_engine.agent.rollout import AgentConfig, Observation, RolloutFinished, RolloutStarted
from awm_engine.data.catalog import Catalog
from awm_engine.data.schema_examples import example_arguments
from awm_engine.eval.episode import make_policy, run_episode
from awm_engine.runtime.episode import (
    ENVIRONMENT_ERROR_KINDS,
    EpisodeHandle,
    EpisodeLoadFailure,
    is_environment_error,
)
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.mcp_client import McpEpisode
from awm_engine.runtime.pool import EnvPool
from awm_engine.db.templates import TemplateCache

SCENARIO = "maple_library_lending"


def rows(db, table):
    with sqlite3.connect(db) as conn:
        return conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()


async def test_every_backend_implements_the_episode_interface(tmp_path):
    catalog = Catalog.load()
    scenario = catalog.get(SCENARIO)
    template, _ = TemplateCache().get(scenario)
    env = LoadedEnv(scenario.key, scenario.code, template, tmp_path / "inproc")
    inproc = Episode(env, tmp_path / "a")
    assert isinstance(inproc, EpisodeHandle)
    await inproc.close()
    async with EnvPool(workers=1) as pool:
        pooled = await pool.open_episode(scenario, run_dir=tmp_path / "b", task_idx=0)
        assert isinstance(pooled, EpisodeHandle)
        await pooled.close()
    served = await McpEpisode.start(scenario.key, tmp_path / "c", [str(d) for d in catalog.dirs], 0)
    try:
        assert isinstance(served, EpisodeHandle)
        tables = [t.name for t in scenario.tables()]
        before = {t: rows(served.final_db, t) for t in tables}
        # one write over MCP, a snapshot, then reset brings back the initial state on a restarted server
        solution = next(s for s in map(scenario.solution, range(len(scenario.tasks)))
                        if not s["calls"][-1]["tool"].startswith(("list_", "get_", "search_")))
        for step in solution["calls"]:
            await served.call_tool(step["tool"], step.get("arguments") or {})
        snap = served.snapshot(tmp_path / "snap.db")
        after = {t: rows(snap, t) for t in tables}
        assert after != before  # the solution wrote something, and the snapshot holds it
        await served.reset()
        assert {t: rows(served.final_db, t) for t in tables} == before
        assert served.list_tools() and (await served.call_tool("list_branches", {})).is_error is False
    finally:
        await served.close()
    assert served.server.proc.poll() is not None  # close stops the server it started


async def test_run_episode_gives_the_same_reward_on_pool_and_mcp(tmp_path):
    catalog = Catalog.load()
    scenario = catalog.get(SCENARIO)
    rewards = {}
    opened = []
    for backend in ("pool", "mcp"):
        seen = []
        outcome = await run_episode(catalog, scenario, 1, make_policy("oracle", scenario, 1), AgentConfig(),
                                    tmp_path / backend, backend=backend, on_open=opened.append,
                                    on_event=seen.append)
        assert outcome.ok and outcome.failure is None
        assert isinstance(seen[0], RolloutStarted) and isinstance(seen[-1], RolloutFinished)
        assert any(isinstance(e, Observation) for e in seen)
        rewards[backend] = (outcome.verification.label, outcome.reward)
        assert json.loads((tmp_path / backend / "trajectory.json").read_text())["awm"]["backend"] == backend
    assert rewards["pool"] == rewards["mcp"] == ("complete", 1.0)
    assert [type(e).__name__ for e in opened] == ["PoolEpisode", "McpEpisode"]


async def test_async_hooks_are_awaited_and_both_verification_runs(tmp_path):
    catalog = Catalog.load()
    scenario = catalog.get(SCENARIO)
    order = []

    async def on_open(episode):
        order.append("open")

    async def on_event(event):
        order.append(type(event).__name__)

    outcome = await run_episode(catalog, scenario, 0, make_policy("oracle", scenario, 0), AgentConfig(),
                                tmp_path / "r", verify_mode="both", on_open=on_open, on_event=on_event)
    assert order[0] == "open" and order[1] == "RolloutStarted" and order[-1] == "RolloutFinished"
    assert outcome.verification.code is not None and outcome.reward == 1.0


async def test_a_broken_environment_is_a_typed_failure_not_an_exception(tmp_path):
    data = make_env_dir(tmp_path / "d", {"Broken": "#FULLthis is not python("})
    catalog = Catalog.load([data])
    scenario = catalog.get("broken")
    for backend in ("pool", "mcp"):
        outcome = await run_episode(catalog, scenario, 0, make_policy("immediate", scenario, 0), AgentConfig(),
                                    tmp_path / backend, backend=backend)
        assert isinstance(outcome.failure, EpisodeLoadFailure), backend
        assert outcome.failure.scenario == "broken" and outcome.failure.kind == "load_error"
        assert outcome.finished is None and outcome.verification is None and outcome.reward is None
    outcome = await run_episode(catalog, scenario, 99, make_policy("immediate", scenario, 0), AgentConfig(),
                                tmp_path / "t")
    assert outcome.failure.kind == "bad_task" and "no task 99" in outcome.failure.message


def test_one_definition_of_environment_error():
    assert ENVIRONMENT_ERROR_KINDS == {"http_5xx", "internal", "timeout", "invalid_schema"}
    assert is_environment_error("timeout") and not is_environment_error("http_4xx")
    assert not is_environment_error(None) and not is_environment_error("unknown_tool")


def test_example_arguments_accept_every_shape_of_examples():
    schema = {"properties": {
        "a": {"type": "integer", "examples": [7]},
        "b": {"type": "string", "examples": {"example": {"value": "x"}}},  # OpenAPI mapping (valid)
        "c": {"type": "number", "example": 1.5},
        "d": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        "e": "not a schema",
        "f": {"type": "string", "default": "z"},
    }, "required": ["d", "e", 5]}
    assert example_arguments(schema) == {"a": 7, "b": "x", "c": 1.5, "d": True, "e": "string", "f": "z"}
    assert example_arguments({"properties": ["not", "a", "dict"]}) == {}
    assert example_arguments(None) == {}

