"""``awm_engine.train.gymnasium_env.AWMGymEnv``: a real ``gymnasium.Env`` (issue 28, item 5) — it passes
Gymnasium's own ``check_env``, resets with ``seed`` and ``options={"scenario", "task"}``, steps text actions to the
reward ``awm agent run`` gives, and ends with ``terminated``/``truncated``."""
from __future__ import annotations

import json

import pytest

gymnasium = pytest.importorskip("gymnasium", reason="gymnasium is in awm's 'train' extra (make setup installs it)")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from awm_engine.agent.policies import OraclePolicy  # noqa: E402
from awm_engine.agent.rollout import AgentConfig  # noqa: E402
from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.train.gym import EpisodeNotRunning  # noqa: E402
from awm_engine.train.gymnasium_env import ENV_ID, AnyText, AWMGymEnv  # noqa: E402

SCENARIO = "maple_library_lending"


def oracle_contents(task):
    policy = OraclePolicy(Catalog.load().get(SCENARIO).solution(task))
    return [t.content for t in policy.turns] + [policy.final]


def test_passes_gymnasiums_check_env_made_and_constructed(tmp_path):
    env = gymnasium.make(ENV_ID, scenario=SCENARIO, out_dir=str(tmp_path / "made"))
    try:
        assert isinstance(env.unwrapped, gymnasium.Env) and env.spec.id == ENV_ID
        check_env(env.unwrapped)  # with a spec: seeded resets, render modes and a double close are checked too
    finally:
        env.close()
    direct = AWMGymEnv(out_dir=tmp_path / "direct")  # no defaults: each reset draws a task with np_random
    try:
        check_env(direct, skip_render_check=True)
    finally:
        direct.close()
        direct.close()  # closing twice is allowed


def test_oracle_episode_reaches_the_reward_with_text_actions(tmp_path):
    catalog = Catalog.load()
    env = AWMGymEnv(catalog, out_dir=tmp_path, render_mode="ansi")
    try:
        obs, info = env.reset(seed=7, options={"scenario": SCENARIO, "task": 0})
        assert obs == catalog.get(SCENARIO).task(0).text and obs in env.observation_space
        assert (info["scenario"], info["task_id"], info["turn"]) == (SCENARIO, 0, 1) and info["tools"]
        assert info["messages"][-1] == {"role": "user", "content": obs}
        steps = [env.step(c) for c in oracle_contents(0)]
        assert all(a in env.action_space for a in oracle_contents(0))
        assert steps[0][0].startswith("Tool response:\nAvailable MCP Tools") and steps[0][4]["tool_response"]
        assert all(s[1:4] == (0.0, False, False) for s in steps[:-1])
        obs, reward, terminated, truncated, info = steps[-1]
        assert (obs, reward, terminated, truncated) == ("", 1.0, True, False)
        assert (info["stop_reason"], info["label"], info["reward"]) == ("final_answer", "complete", 1.0)
        assert env.verification["reward"] == 1.0 and (env.run_dir / "verify.json").is_file()
        assert "run_dir" not in info  # info holds only what the same seed and actions reproduce
        assert "[assistant]" in env.render()
        with pytest.raises(EpisodeNotRunning):
            env.step("again")
    finally:
        env.close()


def test_seeds_choose_tasks_and_max_turns_truncates(tmp_path):
    env = AWMGymEnv(scenario=SCENARIO, out_dir=tmp_path, config=AgentConfig(max_turns=2), observation="chat")
    try:
        first = [env.reset(seed=s)[1]["task_id"] for s in (1, 2, 3)]
        assert [env.reset(seed=s)[1]["task_id"] for s in (1, 2, 3)] == first  # the same seed, the same task
        obs, info = env.reset(options={"task": 3})
        assert json.loads(obs) == info["messages"] and info["task_id"] == 3
        contents = oracle_contents(3)
        step = env.step(contents[0])
        assert not (step[2] or step[3])
        obs, reward, terminated, truncated, info = env.step(contents[1])
        assert (terminated, truncated, info["stop_reason"]) == (False, True, "max_turns")
        with pytest.raises(KeyError):
            env.reset(options={"scenario": "no_such_scenario"})
    finally:
        env.close()


def test_native_mode_takes_a_json_turn_as_its_text_action(tmp_path):
    env = AWMGymEnv(out_dir=tmp_path, config=AgentConfig(mode="native"))
    try:
        env.reset(options={"scenario": SCENARIO, "task": 0})
        action = json.dumps({"content": "", "tool_calls": [{"id": "c1", "name": "list_my_loans", "arguments": {}}]})
        obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated and "loans" in obs and info["messages"][-1]["tool_call_id"] == "c1"
        *_, terminated, truncated, info = env.step("The due date is in the loans list.")
        assert terminated and info["stop_reason"] == "final_answer"
    finally:
        env.close()


def test_a_native_call_whose_arguments_are_no_object_is_told_so_in_native_terms(tmp_path):
    """Native mode has no <tool_call>: a call with arguments that are JSON but no object hears what was wrong."""
    env = AWMGymEnv(out_dir=tmp_path, config=AgentConfig(mode="native", protocol="robust"))
    try:
        env.reset(options={"scenario": SCENARIO, "task": 0})
        action = json.dumps({"content": "", "tool_calls": [{"id": "c1", "name": "list_my_loans", "arguments": "[1, 2]"}]})
        obs, *_ = env.step(action)
        assert obs == "Error: the arguments of your function call are not a JSON object." and "<tool_call>" not in obs
    finally:
        env.close()


def test_the_text_space_holds_any_string_and_samples_short_ones():
    space = AnyText(10)
    assert "héllo ✓\n" in space and "" in space and "x" * 11 not in space and 3 not in space
    space.seed(0)
    assert all(len(space.sample()) <= 10 for _ in range(20))
    assert len(AnyText(10_000, sample_length=5).sample()) <= 5
    assert len(space.sample(mask=(4, None))) == 4
