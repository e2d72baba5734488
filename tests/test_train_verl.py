"""awm's verl agent loop run by verl 0.9.1's own ``AgentLoopWorker`` on CPU (issue 28, item 3).

The worker is verl's real class, configured from verl's own generated trainer configuration: it reads the
agent-loop file (``agent_loop_config_path``) into its registry, hydra-instantiates ``awm_agent`` per sample from that
entry, runs every rollout of the batch concurrently and post-processes the outputs into verl's padded batch
(``responses``, ``response_mask``, ``rm_scores`` …). The batch comes from verl's ``RLHFDataset`` over the rows of
``awm train tasks``, repeated per rollout as verl's trainer does. The model and tokenizer are the tiny ones of
``trainer_kit`` (built here, nothing downloaded); the only stand-in is the inference server: a scripted token server
in ``server_manager``'s place (``generate(request_id, prompt_ids, sampling_params)`` → verl's ``TokenOutput``) that
answers each rollout with its scripted turns — no vLLM, no GPU, no Ray cluster.

The yaml bug of issue 28: importing awm's loop module (which hydra does on the first instantiation, after the worker
has read the yaml) used to re-register ``awm_agent`` and replace the yaml's keys, so from the second rollout on the
settings were the defaults. The module is therefore made unimported, and verl's registry entry removed, before the
worker starts, as in a fresh verl process.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

from trainer_kit import requires_trainers

requires_trainers("torch", "transformers", "datasets", "verl")

import awm_engine.train  # noqa: E402
from awm_engine.agent.policies import OraclePolicy  # noqa: E402
from awm_engine.cli import main as awm  # noqa: E402
from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.train.sessions import close_loop_pool  # noqa: E402
from trainer_kit import ROOT, save_model_dir  # noqa: E402

SCENARIO = "maple_library_lending"
NULL_NAME = '<tool_call>{"name": null, "arguments": {}}</tool_call>'
GIVE_UP = "I give up."


def oracle(task):
    policy = OraclePolicy(Catalog.load().get(SCENARIO).solution(task))
    return [t.content for t in policy.turns] + [policy.final]


class ScriptedTokenServer:
    """``server_manager``: each new request id (one per rollout) takes the next script; every generate call answers
    the script's next turn as token ids ending with the end-of-turn token, as an inference server does; a script
    that has run out answers ``GIVE_UP``."""

    def __init__(self, tokenizer, scripts, fail_at=None):
        from verl.workers.rollout.replica import TokenOutput

        self.tokenizer, self.scripts, self.TokenOutput = tokenizer, [list(s) for s in scripts], TokenOutput
        self.fail_at = fail_at  # the number of calls answered before the server goes down (None: never)
        self.by_request: dict[str, list[str]] = {}
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        if request_id not in self.by_request:
            self.by_request[request_id] = self.scripts[len(self.by_request)]
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise RuntimeError("server down")
        script = self.by_request[request_id]
        text = script.pop(0) if script else GIVE_UP
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "text": text})
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return self.TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")


def verl_config(tmp_path, model_dir, agent_yaml, data_file, n, response_length=16384):
    """verl's own trainer configuration (its generated ppo_trainer.yaml), set up as the docs' command line does."""
    import verl.trainer.config
    from omegaconf import OmegaConf

    config = OmegaConf.load(Path(verl.trainer.config.__file__).parent / "_generated_ppo_trainer.yaml")
    config.actor_rollout_ref.model.path = str(model_dir)
    rollout = config.actor_rollout_ref.rollout
    rollout.name, rollout.n, rollout.prompt_length, rollout.response_length = "vllm", n, 2048, response_length
    rollout.agent.agent_loop_config_path = str(agent_yaml)
    rollout.agent.default_agent_loop, rollout.agent.num_workers = "awm_agent", 1
    config.data.train_files = config.data.val_files = str(data_file)
    config.data.max_prompt_length, config.data.max_response_length = 2048, response_length
    config.data.cache_dir = str(tmp_path / "verl-cache")
    return config


@pytest.fixture
def fresh_verl_process(monkeypatch):
    """As in a new verl worker process: awm's loop module not imported yet, no ``awm_agent`` in verl's registry."""
    from verl.experimental.agent_loop import agent_loop

    monkeypatch.delitem(sys.modules, "awm_engine.train.verl_loop", raising=False)
    monkeypatch.delattr(awm_engine.train, "verl_loop", raising=False)
    monkeypatch.delitem(agent_loop._agent_loop_registry, "awm_agent", raising=False)
    return agent_loop


@pytest.mark.timeout(300)
def test_agent_loop_worker_runs_awm_rollouts_with_the_yaml_settings_on_every_one(tmp_path, monkeypatch,
                                                                                  fresh_verl_process, capsys):
    import datasets
    from transformers import AutoTokenizer
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.chdir(tmp_path)  # a rollout that lost the yaml would write to ./outputs/train/verl: here, not the repo
    model_dir = save_model_dir(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    data = tmp_path / "data"
    shutil.copytree(ROOT / "sample_envs", data)  # a data directory of its own (the yaml's data_dirs)
    tasks = tmp_path / "tasks.parquet"
    assert awm(["train", "tasks", "--data", str(data), "--scenario", SCENARIO, "--task", "0", "--out",
                str(tasks)]) == 0
    runs = tmp_path / "yaml-runs"
    agent_yaml = tmp_path / "awm_agent.yaml"
    agent_yaml.write_text(f"""- name: awm_agent
  _target_: awm_engine.train.verl_loop.AWMAgentLoop
  data_dirs: [{data}]
  verify: code
  on_format_error: stop
  workers: 1
  out_dir: {runs}
""")
    n = 4  # one GRPO group of four rollouts of task 0
    config = verl_config(tmp_path, model_dir, agent_yaml, tasks, n)

    # verl's dataset and batch, as its trainer makes them: RLHFDataset rows, collated, repeated n times interleaved
    dataset = RLHFDataset(data_files=[str(tasks)], tokenizer=tokenizer, config=config.data, processor=None)
    assert len(dataset) == 1
    batch = DataProto.from_single_dict(collate_fn([dataset[0]]))
    batch = batch.repeat(repeat_times=n, interleave=True)

    solved = oracle(0)
    scripts = [solved, [NULL_NAME], [NULL_NAME], ["I cannot tell."]]
    server = ScriptedTokenServer(tokenizer, scripts)
    worker = fresh_verl_process.AgentLoopWorker(config, server)
    assert "awm_engine.train.verl_loop" not in sys.modules  # the yaml is in the registry; awm's module comes next
    assert dict(fresh_verl_process._agent_loop_registry["awm_agent"])["on_format_error"] == "stop"

    async def generate():
        try:
            return await worker.generate_sequences(batch)
        finally:
            await close_loop_pool()

    out = asyncio.run(generate())
    capsys.readouterr()

    # every rollout ran with the yaml's settings (not awm's defaults from the second rollout on)
    assert len(out) == n and len(server.by_request) == n
    infos = list(out.non_tensor_batch["awm"])
    for info in infos:
        s = info["settings"]
        assert (s["on_format_error"], s["workers"], s["out_dir"], s["data_dirs"], s["verify"]) == \
            ("stop", 1, str(runs), [str(data)], "code"), info
        assert Path(info["run_dir"]).parent == runs
    assert not (tmp_path / "outputs").exists()
    assert dict(fresh_verl_process._agent_loop_registry["awm_agent"])["on_format_error"] == "stop"

    # each rollout is told apart by the tokens its model produced (the rollouts run concurrently)
    responses, mask = out.batch["responses"], out.batch["response_mask"]
    attention = out.batch["attention_mask"][:, out.batch["prompts"].shape[1]:]
    rewards = out.batch["rm_scores"]
    by_script = {}
    for i, info in enumerate(infos):
        model_text = tokenizer.decode(responses[i][mask[i].bool()].tolist())
        script = next(k for k, turns in enumerate(scripts)
                      if model_text == "".join(t + tokenizer.eos_token for t in turns))
        by_script.setdefault(script, []).append(i)
        # the response mask is 1 on the model's tokens only: what is left (within the response) is tool results
        observation = tokenizer.decode(responses[i][(attention[i].bool() & ~mask[i].bool())].tolist())
        if script == 0:
            assert "Available MCP Tools" in observation and "The Silent Orchard" in observation
        else:
            assert observation == ""  # ended on its first turn: nothing but the model's own tokens
        # one run of ones per model turn, the tool results between them zeros
        length = int(attention[i].sum())
        flags = mask[i][:length].tolist()
        runs_of_ones = sum(1 for k, f in enumerate(flags) if f == 1 and (k == 0 or flags[k - 1] == 0))
        assert flags[0] == flags[-1] == 1 and runs_of_ones == len(scripts[script])
        assert not mask[i][length:].any()  # padding is never trained
        # verl puts the episode's reward on the last response token, nowhere else
        last = int(attention[i].sum()) - 1
        assert float(rewards[i].sum()) == float(rewards[i][last])
    # (the two malformed rollouts share a script: both are found under the first)
    assert {k: len(v) for k, v in by_script.items()} == {0: 1, 1: 2, 3: 1}

    def outcome_of(i):
        return float(rewards[i].sum()), infos[i]["stop_reason"], infos[i]["label"]

    def outcome(script):
        return outcome_of(by_script[script][0])

    assert outcome(0) == (1.0, "final_answer", "complete")
    # the same malformed turn twice in one group: the same reward (on_format_error=stop: -1 and the episode ends)
    assert [outcome_of(i) for i in by_script[1]] == [(-1.0, "format_error", "others")] * 2
    assert outcome(3) == (0.0, "final_answer", "others")
    assert GIVE_UP not in [c["text"] for c in server.calls]  # no rollout went on past its end
    for script, rollouts in by_script.items():
        for i in rollouts:
            verdict = json.loads((Path(infos[i]["run_dir"]) / "verify.json").read_text())
            assert verdict["reward"] == float(rewards[i].sum()) == {0: 1.0, 1: -1.0, 3: 0.0}[script]
    # the prompt is the row's system prompt and task, as the chat template renders it (left-padded by verl)
    expected_prompt = tokenizer.apply_chat_template(dataset[0]["raw_prompt"], add_generation_prompt=True,
                                                    tokenize=True, return_dict=False)
    prompts = out.batch["prompts"]
    prompt_attention = out.batch["attention_mask"][:, :prompts.shape[1]]
    for i in range(n):
        assert prompts[i][prompt_attention[i].bool()].tolist() == list(expected_prompt)
    # token in, token out: each turn's request continues that rollout's exact tokens so far
    for request in server.by_request:
        calls = [c["prompt_ids"] for c in server.calls if c["request_id"] == request]
        assert calls[0] == list(expected_prompt)
        assert all(later[:len(earlier)] == earlier for earlier, later in zip(calls, calls[1:]))


@pytest.mark.timeout(300)
def test_agent_loop_worker_on_a_failing_server_and_at_the_response_length(tmp_path, monkeypatch, fresh_verl_process,
                                                                          capsys):
    """A server that goes down fails the batch (verl's worker raises) and the episode is released; a rollout that
    reaches ``response_length`` is cut there, unverified, with reward 0."""
    import datasets
    from transformers import AutoTokenizer
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.chdir(tmp_path)
    model_dir = save_model_dir(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tasks = tmp_path / "tasks.parquet"
    assert awm(["train", "tasks", "--scenario", SCENARIO, "--task", "0", "--out", str(tasks)]) == 0
    agent_yaml = tmp_path / "awm_agent.yaml"
    agent_yaml.write_text(f"""- name: awm_agent
  _target_: awm_engine.train.verl_loop.AWMAgentLoop
  workers: 1
  out_dir: {tmp_path / "runs"}
""")

    def run(server, response_length):
        config = verl_config(tmp_path, model_dir, agent_yaml, tasks, 1, response_length)
        dataset = RLHFDataset(data_files=[str(tasks)], tokenizer=tokenizer, config=config.data, processor=None)
        batch = DataProto.from_single_dict(collate_fn([dataset[0]]))
        worker = fresh_verl_process.AgentLoopWorker(config, server)

        async def generate():
            try:
                return await worker.generate_sequences(batch)
            finally:
                await close_loop_pool()
        return asyncio.run(generate())

    with pytest.raises(RuntimeError, match="server down"):
        run(ScriptedTokenServer(tokenizer, [oracle(0)], fail_at=1), 16384)
    loop_module = sys.modules["awm_engine.train.verl_loop"]  # hydra imported it for the rollout
    assert len(loop_module.SESSIONS) == 0  # the failed rollout's episode was released

    first_turn = len(tokenizer.encode(oracle(0)[0], add_special_tokens=False)) + 1
    limit = first_turn + 10  # room for the first turn and a little of the tool listing
    out = run(ScriptedTokenServer(tokenizer, [oracle(0)]), limit)
    capsys.readouterr()
    (info,) = out.non_tensor_batch["awm"]
    assert info["stop_reason"] == "response_length" and info["has_verdict"] is None
    assert float(out.batch["rm_scores"].sum()) == 0.0
    assert out.batch["responses"].shape[1] == limit and int(out.batch["attention_mask"][0, -limit:].sum()) == limit
    assert out.batch["response_mask"][0].tolist() == [1] * first_turn + [0] * 10  # the listing is cut, untrained
