"""Training samples from recorded rollouts (made with the engine: a scripted LLM over a sample environment):
history windows, loss masks and token ids, step rewards (complete, format error, max turns), GRPO advantages,
and their export as JSONL and Parquet through ``awm train export``."""
from __future__ import annotations

import asyncio
import builtins
import json
import math

import pytest

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import LLMPolicy, OraclePolicy
from awm_engine.agent.rollout import AgentConfig
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import run_episode
from awm_engine.train.export import MissingDependency, read_records, write_records
from awm_engine.train.grpo import assign_advantages, group_advantages
from awm_engine.train.samples import build_samples, load_rollout, rollout_samples

SCENARIO = "maple_library_lending"


def call(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def tool(name, args=None):
    return call("call_tool", {"tool_name": f"mcp_tool_mcp_server_{name}", "arguments": json.dumps(args or {})})


def oracle_contents(task):
    policy = OraclePolicy(Catalog.load().get(SCENARIO).solution(task))
    return [t.content for t in policy.turns] + [policy.final]


def scripted_run(run_dir, contents, task=0, config=None, extra=None, verify="code"):
    """Roll out ``contents`` (one assistant turn each) through the scripted LLM; the requests it received."""
    responses = [{"content": c, **((extra or {}).get(i, {}))} for i, c in enumerate(contents)]
    catalog = Catalog.load()
    with FakeLLMServer({"responses": responses, "cursor": "sequential"}) as llm:
        policy = LLMPolicy(Endpoint(base_url=llm.url, model="scripted", max_retries=0))
        outcome = asyncio.run(run_episode(catalog, catalog.get(SCENARIO), task, policy, config or AgentConfig(),
                                          run_dir, verify_mode=verify))
        return outcome, [r["messages"] for r in llm.requests]


def test_windows_equal_what_inference_saw_and_the_hand_computed_contexts(tmp_path):
    contents = [call("list_tools", None)] + [tool("list_branches")] * 4 + ["done"]
    outcome, requests = scripted_run(tmp_path / "r", contents, config=AgentConfig(history_window=2))
    assert outcome.finished.stop_reason == "final_answer"
    samples, why = rollout_samples(load_rollout(tmp_path / "r"), window=2)
    assert why is None and len(samples) == 6
    # training sees exactly the messages the endpoint received for each turn
    assert [s.prompt for s in samples] == requests
    # hand-computed: g0 = list_tools exchange, g1..g4 = list_branches calls; each turn's context
    messages = json.loads((tmp_path / "r" / "trajectory.json").read_text())["messages"]
    groups = [messages[2 + 2 * i: 4 + 2 * i] for i in range(5)]

    def api(group):
        return [{"role": "assistant", "content": group[0]["content"]},
                {"role": "user", "content": "Tool response:\n" + group[1]["content"]}]

    expected = {1: [], 2: [0], 3: [0, 1], 4: [0, 1, 2], 5: [0, 2, 3], 6: [0, 3, 4]}
    for s in samples:
        assert s.prompt[:2] == [{"role": "system", "content": messages[0]["content"]},
                                {"role": "user", "content": messages[1]["content"]}]
        assert s.prompt[2:] == [m for g in expected[s.turn] for m in api(groups[g])], s.turn
        assert s.completion == [{"role": "assistant", "content": contents[s.turn - 1]}]
    # the same rollout exported with the paper's w = 3, and with the whole history
    w3 = {s.turn: len(s.prompt) for s in rollout_samples(load_rollout(tmp_path / "r"), window=3)[0]}
    assert w3 == {1: 2, 2: 4, 3: 6, 4: 8, 5: 10, 6: 10}  # turn 6: g0 + g2..g4 (g1 slid out)
    full = {s.turn: len(s.prompt) for s in rollout_samples(load_rollout(tmp_path / "r"), window=None)[0]}
    assert full == {1: 2, 2: 4, 3: 6, 4: 8, 5: 10, 6: 12}


def test_masks_cover_only_the_turn_and_token_ids_are_kept(tmp_path):
    contents = oracle_contents(0)
    ids = {i: {"prompt_token_ids": [100 + i, 7, 7], "token_ids": [i + 1] * (i + 2)} for i in range(len(contents))}
    scripted_run(tmp_path / "r", contents, extra=ids, config=AgentConfig(history_window=3))
    samples = rollout_samples(load_rollout(tmp_path / "r"), window=3)[0]
    assert len(samples) == 3
    for s in samples:
        record = s.to_record()
        assert record["loss_mask"] == [0] * len(s.prompt) + [1]
        assert record["messages"] == s.prompt + s.completion
        assert record["loss_spans"] == [[len(s.prompt), 0, len(contents[s.turn - 1])]]
        i = s.turn - 1
        assert record["prompt_ids"] == [100 + i, 7, 7]
        assert record["completion_ids"] == [i + 1] * (i + 2)
        assert record["completion_mask"] == [1] * (i + 2)
    # a window other than the one the rollout ran with: no token ids (they belong to another context)
    other = rollout_samples(load_rollout(tmp_path / "r"), window=1)[0]
    assert all(s.prompt_ids is None and s.completion_ids is None for s in other)
    assert build_samples(tmp_path / "r", window=1).window_mismatch == [load_rollout(tmp_path / "r").rollout_id]


def test_step_rewards_complete_format_error_and_max_turns(tmp_path):
    # complete: the task reward (1.0) on every action step
    scripted_run(tmp_path / "ok", oracle_contents(0))
    ok = rollout_samples(load_rollout(tmp_path / "ok"))[0]
    assert [(s.reward, s.is_final, s.is_format_error) for s in ok] == [(1.0, False, False), (1.0, False, False),
                                                                        (1.0, True, False)]
    # reference protocol, "name": null at turn 2: the episode ends with a format error, -1.0 at that step
    outcome, _ = scripted_run(tmp_path / "null", [call("list_tools", None),
                                                  '<tool_call>{"name": null, "arguments": {}}</tool_call>'])
    assert outcome.finished.stop_reason == "format_error" and outcome.reward == -1.0
    bad = rollout_samples(load_rollout(tmp_path / "null"))[0]
    assert [(s.turn, s.reward, s.is_format_error, s.stop_reason) for s in bad] == [
        (1, -1.0, False, "format_error"), (2, -1.0, True, "format_error")]
    # robust protocol, --on-format-error stop: an unknown tool ends it the same way, even unverified
    scripted_run(tmp_path / "stop", [call("list_tools", None), tool("teleport")], verify=None,
                 config=AgentConfig(protocol="robust", on_format_error="stop"))
    assert not (tmp_path / "stop" / "verify.json").exists()
    stop = rollout_samples(load_rollout(tmp_path / "stop"))[0]
    assert [(s.reward, s.is_format_error) for s in stop] == [(-1.0, False), (-1.0, True)]
    # max turns: renew the loan (task 3), cut before the final answer; the verified task reward is kept
    contents = oracle_contents(3)
    outcome, _ = scripted_run(tmp_path / "max", contents, task=3, config=AgentConfig(max_turns=len(contents) - 1))
    assert outcome.finished.stop_reason == "max_turns" and outcome.reward == 1.0
    cut = rollout_samples(load_rollout(tmp_path / "max"))[0]
    assert [(s.reward, s.is_final, s.stop_reason) for s in cut] == [(1.0, False, "max_turns")] * 2 + \
        [(1.0, True, "max_turns")]
    # and a max-turns ending that did nothing keeps its (zero) reward
    scripted_run(tmp_path / "idle", [call("list_tools", None)] * 3, config=AgentConfig(max_turns=2))
    assert [s.reward for s in rollout_samples(load_rollout(tmp_path / "idle"))[0]] == [0.0, 0.0]


def test_unverified_and_unverdicted_rollouts_are_left_out(tmp_path):
    scripted_run(tmp_path / "runs" / "a", oracle_contents(0), verify=None)
    scripted_run(tmp_path / "runs" / "b", oracle_contents(0))
    verify = tmp_path / "runs" / "b" / "verify.json"
    verify.write_text(json.dumps({**json.loads(verify.read_text()), "has_verdict": False, "label": "judge_error"}))
    result = build_samples(tmp_path / "runs")
    assert result.samples == [] and [why for _, why in result.skipped] == [
        "not verified (no verify.json; run awm verify)", "no verdict (judge_error): excluded from training"]


def test_grpo_advantages_equal_the_hand_computed_values(tmp_path):
    runs = tmp_path / "runs"
    scripted_run(runs / "t0_a", oracle_contents(0))  # R = 1.0
    scripted_run(runs / "t0_b", ["I cannot tell."])  # R = 0.0 (others)
    scripted_run(runs / "t0_c", ['<tool_call>{"name": null}</tool_call>'])  # R = -1.0 (format error)
    scripted_run(runs / "t0_d", oracle_contents(0))  # R = 1.0
    scripted_run(runs / "t1_a", ["No."], task=1)  # task 1: R = 0.0 twice -> zero variance
    scripted_run(runs / "t1_b", ["No."], task=1)
    result = build_samples(runs)
    groups = {g.group_id: g for g in assign_advantages(result.samples)}
    g0 = groups[f"{SCENARIO}/0"]
    assert g0.rewards == [1.0, 0.0, -1.0, 1.0] and g0.mean == 0.25
    std = math.sqrt((0.75 ** 2 * 2 + 0.25 ** 2 + 1.25 ** 2) / 3)  # unbiased, as TRL and verl
    assert g0.std == pytest.approx(std) and not g0.zero_variance
    by_rollout = {s.run_dir.rsplit("/", 1)[1]: s.advantage for s in result.samples}
    assert by_rollout["t0_a"] == by_rollout["t0_d"] == pytest.approx(0.75 / (std + 1e-6))
    assert by_rollout["t0_b"] == pytest.approx(-0.25 / (std + 1e-6))
    assert by_rollout["t0_c"] == pytest.approx(-1.25 / (std + 1e-6))
    assert round(by_rollout["t0_a"], 4) == 0.7833 and round(by_rollout["t0_c"], 4) == -1.3056
    g1 = groups[f"{SCENARIO}/1"]
    assert g1.zero_variance and g1.advantages == {"t1_a": 0.0, "t1_b": 0.0}
    assert all(s.zero_variance and s.advantage == 0.0 and s.group_size == 2 for s in result.samples
               if s.task_id == 1)
    assert group_advantages("g", {"only": 1.0}).zero_variance  # a group of one carries no signal


def test_export_from_an_evaluation_run_jsonl_and_parquet(tmp_path, capsys):
    out = tmp_path / "eval"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", SCENARIO, "--task", "0", "--task", "3", "-k", "2",
                "--workers", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert awm(["train", "export", str(out), "--window", "3", "--out", str(tmp_path / "s.jsonl"), "--grpo",
                "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["samples"] == 3 * 2 + 4 * 2 and summary["rollouts"] == 4 and summary["groups"] == 2
    assert sorted(summary["zero_variance_groups"]) == [f"eval/{SCENARIO}/0", f"eval/{SCENARIO}/3"]  # all complete
    rows = read_records(tmp_path / "s.jsonl")  # ids <run>/<scenario>/<task>/<sample> (tests/test_train_identity.py)
    assert {r["rollout_id"] for r in rows} == {f"eval/{SCENARIO}/{t}/{k}" for t in (0, 3) for k in (0, 1)}
    first = next(r for r in rows if r["group_id"] == f"eval/{SCENARIO}/0")  # rows follow the order rollouts finished in
    for key in ("prompt", "completion", "messages", "reward", "advantage", "group_id", "loss_mask", "data_source",
                "extra_info", "agent_name"):
        assert key in first
    assert first["group_id"] == f"eval/{SCENARIO}/0" and first["reward"] == 1.0 and first["advantage"] == 0.0
    assert awm(["train", "export", str(out), "--out", str(tmp_path / "s.parquet"), "--grpo"]) == 0
    parquet = read_records(tmp_path / "s.parquet")
    assert [r["id"] for r in parquet] == [r["id"] for r in rows]
    assert [[m["content"] for m in r["messages"]] for r in parquet] == [[m["content"] for m in r["messages"]]
                                                                          for r in rows]
    assert [r["advantage"] for r in parquet] == [r["advantage"] for r in rows]
    assert awm(["train", "tasks", "--scenario", SCENARIO, "--out", str(tmp_path / "tasks.parquet")]) == 0
    tasks = read_records(tmp_path / "tasks.parquet")
    assert len(tasks) == 10 and tasks[3]["task_id"] == 3 and tasks[3]["prompt"][0]["role"] == "system"


def test_parquet_without_pyarrow_is_a_clear_error_and_jsonl_still_works(tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.split(".")[0] == "pyarrow":
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(MissingDependency, match="pyarrow.*'train' extra"):
        write_records([{"a": 1}], tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()
    assert write_records([{"a": 1}], tmp_path / "x.jsonl") == 1
    scripted_run(tmp_path / "r", oracle_contents(0))
    assert awm(["train", "export", str(tmp_path / "r"), "--out", str(tmp_path / "s.parquet")]) == 2
    assert "needs pyarrow" in capsys.readouterr().err
    assert awm(["train", "export", str(tmp_path / "r"), "--out", str(tmp_path / "s.jsonl")]) == 0


def test_export_of_a_path_without_rollouts_is_an_input_error(tmp_path, capsys):
    assert awm(["train", "export", str(tmp_path), "--out", str(tmp_path / "s.jsonl")]) == 2
    assert "no rollouts" in capsys.readouterr().err
