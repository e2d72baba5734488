"""The Gym-style API (``awm_engine.train.gym``): the same scripted turns give the same reward and trajectory as
``awm agent run``; format errors, max turns, batching, the blocking form, sessions keyed per request."""
from __future__ import annotations

import asyncio
import json

import pytest

from awm_engine.agent.policies import OraclePolicy
from awm_engine.agent.rollout import AgentConfig
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.runtime.pool import EnvPool
from awm_engine.train.gym import AWMEnv, AWMVectorEnv, EpisodeNotRunning, LoopThread, SharedPool, SyncAWMEnv
from awm_engine.train.sessions import SessionRegistry

SCENARIO = "maple_library_lending"
NULL_NAME = '<tool_call>{"name": null, "arguments": {}}</tool_call>'


def oracle_contents(task):
    policy = OraclePolicy(Catalog.load().get(SCENARIO).solution(task))
    return [t.content for t in policy.turns] + [policy.final]


def agent_run(tmp_path, name, contents, task, *flags):
    """``awm agent run`` with a scripted model answering ``contents``: (reward, label, stop, messages)."""
    with FakeLLMServer({"responses": [{"content": c} for c in contents], "cursor": "sequential"}) as llm:
        assert awm(["agent", "run", "--scenario", SCENARIO, "--task", str(task), "--model", "scripted",
                    "--base-url", llm.url, "--out", str(tmp_path / name), "--quiet", *flags]) == 0
    verdict = json.loads((tmp_path / name / "verify.json").read_text())
    trajectory = json.loads((tmp_path / name / "trajectory.json").read_text())
    return verdict["reward"], verdict["label"], trajectory["awm"]["stop_reason"], trajectory["messages"]


async def gym_run(tmp_path, name, contents, task, config=None):
    async with AWMEnv(Catalog.load(), config=config or AgentConfig()) as env:
        obs, info = await env.reset(SCENARIO, task, run_dir=tmp_path / name)
        assert obs == [{"role": "system", "content": obs[0]["content"]},
                       {"role": "user", "content": Catalog.load().get(SCENARIO).task(task).text}]
        assert info["task_id"] == task and info["tools"] and info["run_dir"] == str((tmp_path / name).resolve())
        steps = []
        for content in contents:
            step = await env.step(content)
            steps.append(step)
            if step[2] or step[3]:
                break
        with pytest.raises(EpisodeNotRunning):
            await env.step("again")
    trajectory = json.loads((tmp_path / name / "trajectory.json").read_text())
    return steps, trajectory["messages"]


@pytest.mark.parametrize("case", ["complete", "format_error", "max_turns"])
def test_gym_episode_gives_the_reward_of_awm_agent_run(tmp_path, case, capsys):
    task, flags, config = 0, [], AgentConfig()
    contents = oracle_contents(0)
    if case == "format_error":  # the reference protocol ends the episode on "name": null
        contents = [contents[0], NULL_NAME]
    if case == "max_turns":  # task 3 (renew a loan), cut before the final answer
        task, contents = 3, oracle_contents(3)
        flags, config = ["--max-turns", str(len(contents) - 1)], AgentConfig(max_turns=len(contents) - 1)
    reward, label, stop, messages = agent_run(tmp_path, "cli", contents, task, *flags)
    capsys.readouterr()
    steps, gym_messages = asyncio.run(gym_run(tmp_path, "gym", contents, task, config))
    obs, last_reward, terminated, truncated, info = steps[-1]
    assert (last_reward, info["label"], info["stop_reason"]) == (reward, label, stop)
    assert [m["content"] for m in gym_messages] == [m["content"] for m in messages]
    assert all(s[1] == 0.0 and not s[2] and not s[3] for s in steps[:-1])  # reward only at the end
    if case == "complete":
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert steps[0][4]["tool_response"].startswith("Available MCP Tools")
        assert steps[0][4]["new_messages"] == [{"role": "user",
                                                "content": "Tool response:\n" + steps[0][4]["tool_response"]}]
        assert steps[0][0][-2:] == [{"role": "assistant", "content": contents[0]}] + steps[0][4]["new_messages"]
    if case == "format_error":
        assert (reward, terminated, truncated, len(steps)) == (-1.0, True, False, 2)
        assert info["format_errors"][0]["kind"] == "invalid_name"
    if case == "max_turns":
        assert (reward, terminated, truncated, len(steps)) == (1.0, False, True, len(contents) - 1)


def test_history_window_observations_and_native_actions(tmp_path):
    async def go():
        async with AWMEnv(Catalog.load(), config=AgentConfig(history_window=1)) as env:
            await env.reset(SCENARIO, 0, run_dir=tmp_path / "w")
            list_call = '<tool_call>{"name": "list_tools", "arguments": null}</tool_call>'
            branches = ('<tool_call>{"name": "call_tool", "arguments": {"tool_name": '
                        '"mcp_tool_mcp_server_list_branches", "arguments": "{}"}}</tool_call>')
            obs1 = (await env.step(list_call))[0]
            obs2 = (await env.step(branches))[0]
            obs3, _, _, _, info = await env.step(branches)
            # window 1: system, task, the first list_tools exchange, the last turn
            assert [len(o) for o in (obs1, obs2, obs3)] == [4, 6, 6]
            assert obs3[2]["content"] == list_call and obs3[4]["content"] == branches
            assert info["new_messages"] == obs3[-1:]
        async with AWMEnv(Catalog.load(), config=AgentConfig(mode="native")) as env:
            await env.reset(SCENARIO, 0, run_dir=tmp_path / "n")
            obs, _, _, _, info = await env.step({"content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "list_my_loans", "arguments": "{}"}}]})
            assert obs[-1]["role"] == "tool" and obs[-1]["tool_call_id"] == "c1" and "loans" in info["tool_response"]
            *_, done, truncated, info = await env.step("The due date is in the loans list.")
            assert done and info["stop_reason"] == "final_answer"

    asyncio.run(go())


def test_batched_reset_and_step_over_one_pool(tmp_path):
    async def go():
        contents = {0: oracle_contents(0), 1: ["I do not know."]}
        async with AWMVectorEnv(2, Catalog.load(), workers=1, out_dir=str(tmp_path)) as venv:
            obs, infos = await venv.reset([(SCENARIO, 0), (SCENARIO, 1)])
            assert [i["task_id"] for i in infos] == [0, 1] and len(obs) == 2
            rewards, dones = [0.0, 0.0], [False, False]
            for turn in range(3):
                actions = [None if dones[i] else contents[i][turn] for i in range(2)]
                obs, r, terminated, truncated, infos = await venv.step(actions)
                for i in range(2):
                    if not dones[i] and (terminated[i] or truncated[i]):
                        rewards[i], dones[i] = r[i], True
            assert dones == [True, True] and rewards == [1.0, 0.0]
            assert venv.envs[0].pool is venv.envs[1].pool is venv.pool

    asyncio.run(go())


def test_blocking_env_over_a_background_loop(tmp_path):
    loop, pool = LoopThread.shared(), SharedPool(workers=1)
    env = SyncAWMEnv(Catalog.load(), loop=loop, shared_pool=pool, out_dir=str(tmp_path))
    try:
        env.reset(SCENARIO, 0)
        for content in oracle_contents(0):
            obs, reward, terminated, truncated, info = env.step(content)
        assert (reward, terminated, env.running) == (1.0, True, False)
        env.reset(SCENARIO, 1)  # an instance is reused: reset starts the next episode
        env.reset(SCENARIO, 1)  # and aborts one still running
        assert env.running
    finally:
        env.close()
        loop.run(pool.close())


def test_sessions_are_keyed_per_request(tmp_path):
    async def go():
        registry = SessionRegistry()
        async with EnvPool(workers=1) as pool:
            a, b = AWMEnv(Catalog.load(), pool=pool), AWMEnv(Catalog.load(), pool=pool)
            await registry.open("req-a", a, SCENARIO, 0, run_dir=tmp_path / "a")
            await registry.open("req-b", b, SCENARIO, 1, run_dir=tmp_path / "b")
            with pytest.raises(KeyError, match="already"):
                await registry.open("req-a", a, SCENARIO, 0)
            assert registry.get("req-a") is a and registry.get("req-b") is b and len(registry) == 2
            await registry.get("req-a").step("done")
            await registry.release("req-a")
            assert "req-a" not in registry and b.running
            with pytest.raises(KeyError, match="no episode"):
                registry.get("req-a")
            await registry.release("req-b")  # a running episode is aborted
            assert not b.running and len(registry) == 0
            await registry.release("never")

    asyncio.run(go())
