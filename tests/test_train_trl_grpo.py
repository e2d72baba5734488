"""A two-step TRL ``GRPOTrainer`` run with awm's environment and ``awm_reward`` (issue 28), on CPU, no download.

TRL 1.16.0's own trainer, on the rows of ``awm train tasks --tools-in-template`` loaded with ``datasets``, with the
tiny random-initialised Qwen3 model of ``trainer_kit`` and TRL's Qwen3 chat template. The model's output is steered
by a generation setting, not a stand-in: transformers' ``sequence_bias`` makes the random model write one call of
awm's ``list_tools`` meta-tool (the biases follow the call's tokens), so TRL's own tool loop parses it, calls the
environment's ``list_tools`` and appends the result; the episode then ends in ``awm_reward`` with the completion's
last assistant text as the final answer and is verified. Every completion of both steps is a real awm episode with a
run directory, a trajectory and a verdict.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_kit import requires_trainers

requires_trainers("torch", "transformers", "datasets", "trl")

from awm_engine.cli import main as awm  # noqa: E402
from awm_engine.train.gym import LoopThread  # noqa: E402
from awm_engine.train.trl_env import awm_reward, trl_environment  # noqa: E402
from trainer_kit import build_model, build_tokenizer  # noqa: E402

SCENARIO = "maple_library_lending"
LIST_TOOLS = '<tool_call>\n{"name": "list_tools", "arguments": {}}\n</tool_call>'


def forced_sequence_bias(tokenizer, text):
    """``sequence_bias`` entries under which greedy or sampled decoding writes ``text`` and then ends the turn: the
    k-th token is favoured after the first k, each bias larger than all earlier ones together."""
    ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    return [[ids[:k + 1], float(100 * 2 ** k)] for k in range(len(ids))]


@pytest.mark.timeout(300)
def test_grpo_trains_two_steps_on_awm_episodes_with_awm_reward(tmp_path, monkeypatch, capsys):
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    tasks = tmp_path / "tasks.parquet"
    assert awm(["train", "tasks", "--scenario", SCENARIO, "--task", "0", "--task", "1", "--tools-in-template",
                "--out", str(tasks)]) == 0
    dataset = datasets.load_dataset("parquet", data_files=str(tasks), split="train",
                                    cache_dir=str(tmp_path / "hf-datasets"))
    assert len(dataset) == 2

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    calls = []

    def reward(completions, environments, **kwargs):
        rewards = awm_reward(completions, environments, **kwargs)
        calls.append({"completions": completions, "rewards": rewards, "scenario": list(kwargs["scenario"]),
                      "task_id": list(kwargs["task_id"]), "infos": [dict(e.info) for e in environments]})
        return rewards

    reward.__name__ = "awm_reward"
    runs = tmp_path / "runs"
    factory = trl_environment(workers=1, verify="code", out_dir=str(runs))
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=2, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=64, max_tool_calling_iterations=1,
                      learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
                      bf16=False, seed=0, chat_template_kwargs={"enable_thinking": False},
                      generation_kwargs={"sequence_bias": forced_sequence_bias(tokenizer, LIST_TOOLS)})
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, train_dataset=dataset, reward_funcs=reward,
                          args=args, environment_factory=factory)
    try:
        result = trainer.train()
    finally:
        LoopThread.shared().run(factory._pool.close())
    capsys.readouterr()

    assert trainer.state.global_step == result.global_step == 2
    steps = [log for log in trainer.state.log_history if "rewards/awm_reward/mean" in log]
    assert [log["step"] for log in steps] == [1, 2]
    assert all(log["tools/call_frequency"] == 1.0 and log["tools/failure_frequency"] == 0.0 for log in steps)
    # the reward function ran once per step, on the two completions of one task each: real, finished episodes
    assert len(calls) == 2 and all(len(c["completions"]) == 2 for c in calls)
    assert sorted(c["task_id"][0] for c in calls) == [0, 1] and all(len(set(c["task_id"])) == 1 for c in calls)
    run_dirs = set()
    for call in calls:
        for completion, value, info, task in zip(call["completions"], call["rewards"], call["infos"],
                                                 call["task_id"]):
            # TRL's completion: the model's list_tools call, parsed by TRL into a tool call
            calls_made = [tc["function"]["name"] for m in completion if m.get("role") == "assistant"
                          for tc in m.get("tool_calls") or []]
            assert calls_made == ["list_tools"]
            assert info["stop_reason"] == "final_answer" and info["has_verdict"] is True
            run_dir = Path(info["run_dir"])
            assert run_dir.parent == runs and run_dir not in run_dirs
            run_dirs.add(run_dir)
            verdict = json.loads((run_dir / "verify.json").read_text())
            assert (verdict["task_id"], verdict["reward"], verdict["stop_reason"]) == (task, value, "final_answer")
            # the episode awm recorded: the row's task, the model's list_tools turn and the environment's listing
            trajectory = json.loads((run_dir / "trajectory.json").read_text())
            messages = trajectory["messages"]
            assert messages[1]["content"] == dataset[task]["prompt"][1]["content"]
            assert (messages[2]["role"], messages[2]["content"]) == ("assistant", LIST_TOOLS)
            assert messages[3]["content"].startswith("Available MCP Tools")
    assert len(run_dirs) == 4
