"""Contract tests of the trainer adapters: verl and TRL pull in torch and are not installed here, so each test
plays the part of the trainer, calling the adapter exactly as that library's code does.

* verl 0.9.1 (``verl/experimental/agent_loop/agent_loop.py``): ``@register(name)`` records ``{"_target_": fqdn}``;
  ``AgentLoopWorker._run_agent_loop`` instantiates the target per sample with ``trainer_config``,
  ``server_manager``, ``tokenizer``, ``processor``, ``hf_model_type``, ``dataset_cls``, ``data_config``, ``tools``
  plus the keys of the agent-loop config entry, awaits ``run(sampling_params, **dataset_fields)`` and reads the
  ``AgentLoopOutput``; ``server_manager.generate(request_id=…, prompt_ids=…, sampling_params=…)`` answers a
  ``TokenOutput`` (``token_ids``, ``log_probs``).
* TRL 1.16.0 (``trl/trainer/grpo_trainer.py``, ``environment_factory``): the factory is called without
  arguments; the public functions of the class other than ``reset`` / ``get_reward`` are the tools (type hints
  and a docstring with ``Args:``, as ``transformers.utils.get_json_schema`` requires); ``reset(**row)`` starts
  each episode and may return ``None``; the tools are called with the model's arguments; reward functions get
  ``completions`` and ``environments``.
"""
from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest
from pydantic import BaseModel

from awm_engine.agent.policies import OraclePolicy
from awm_engine.data.catalog import Catalog
from awm_engine.train import verl_loop
from awm_engine.train.gym import LoopThread
from awm_engine.train.sessions import close_loop_pool
from awm_engine.train.tasks import task_rows
from awm_engine.train.trl_env import awm_reward, trl_environment

SCENARIO = "maple_library_lending"
NULL_NAME = '<tool_call>{"name": null, "arguments": {}}</tool_call>'


def oracle(task):
    policy = OraclePolicy(Catalog.load().get(SCENARIO).solution(task))
    return [t.content for t in policy.turns] + [policy.final]


# -- verl 0.9.1's side of the contract --------------------------------------------------------------

def fake_verl_module() -> types.ModuleType:
    """``verl.experimental.agent_loop.agent_loop`` as far as an agent loop touches it (verl 0.9.1)."""
    module = types.ModuleType("verl.experimental.agent_loop.agent_loop")

    class AgentLoopMetrics(BaseModel):
        generate_sequences: float = 0.0
        tool_calls: float = 0.0
        compute_score: float = 0.0
        num_preempted: int = -1

    class AgentLoopOutput(BaseModel):
        prompt_ids: list[int]
        response_ids: list[int]
        response_mask: list[int]
        response_logprobs: Optional[list[float]] = None
        routed_experts: Optional[Any] = None
        multi_modal_data: Optional[dict[str, Any]] = None
        reward_score: Optional[float] = None
        num_turns: int = 0
        metrics: AgentLoopMetrics
        extra_fields: dict[str, Any] = {}

    class AgentLoopBase:
        def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config,
                     hf_model_type=None, **kwargs):
            self.config = trainer_config.config
            self.rollout_config = self.config.actor_rollout_ref.rollout
            self.server_manager = server_manager
            self.tokenizer = tokenizer
            self.processor = processor
            self.dataset_cls = dataset_cls
            self.data_config = data_config.config
            self.apply_chat_template_kwargs = self.data_config.get("apply_chat_template_kwargs", {})

    registry: dict[str, dict] = {}

    def register(agent_name):
        def decorator(subclass):
            registry[agent_name] = {"_target_": f"{subclass.__module__}.{subclass.__qualname__}"}
            return subclass
        return decorator

    module.AgentLoopBase, module.AgentLoopOutput, module.AgentLoopMetrics = AgentLoopBase, AgentLoopOutput, \
        AgentLoopMetrics
    module.register, module._agent_loop_registry = register, registry
    return module


class ChatTokenizer:
    """A tokenizer with a chat template that, like Qwen2.5's, opens with a default system prompt when the
    conversation has none (verl cuts it from tool results); one token per character."""

    def render(self, messages, add_generation_prompt):
        text = "" if messages and messages[0].get("role") == "system" else "<system>DEFAULT</>"
        text += "".join(f"<{m['role']}>{m.get('content') or ''}</>" for m in messages if m.get("role"))
        return text + ("<assistant>" if add_generation_prompt else "")

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True, **kwargs):
        text = self.render(messages, add_generation_prompt)
        return [ord(c) for c in text] if tokenize else text

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


class ScriptedServer:
    """``server_manager``: answers each generate call with the next scripted turn, as token ids."""

    def __init__(self, turns, fail_at=None):
        self.turns, self.fail_at, self.calls = list(turns), fail_at, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids)})
        if self.fail_at is not None and len(self.calls) > self.fail_at:
            raise RuntimeError("server down")
        ids = [ord(c) for c in self.turns.pop(0)]
        return SimpleNamespace(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed",
                               num_preempted=None, extra_fields={})


@pytest.fixture
def verl(monkeypatch):
    module = fake_verl_module()
    for name in ("verl", "verl.experimental", "verl.experimental.agent_loop"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop", module)
    importlib.reload(verl_loop)
    yield module
    monkeypatch.undo()
    importlib.reload(verl_loop)  # back to "verl is not installed"


def instantiate(module, server, tmp_path, response_length=200_000, **entry):
    """What verl's AgentLoopWorker does for each sample: hydra-instantiate the registered target."""
    target = module._agent_loop_registry["awm_agent"]["_target_"]
    mod, _, cls = target.rpartition(".")
    config = SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=SimpleNamespace(
        prompt_length=8192, response_length=response_length)), data={})
    return getattr(importlib.import_module(mod), cls)(
        trainer_config=SimpleNamespace(config=config), server_manager=server, tokenizer=ChatTokenizer(),
        processor=None, hf_model_type=None, dataset_cls=None, data_config=SimpleNamespace(config={}),
        tools=SimpleNamespace(tools=[]), workers=1, out_dir=str(tmp_path), **entry)


def dataset_fields(task):
    row = task_rows(Catalog.load(), [SCENARIO], [task])[0]
    return {"raw_prompt": row["prompt"], "extra_info": row["extra_info"], "data_source": row["data_source"],
            "index": 0, "tools_kwargs": {}}


def test_verl_agent_loop_is_registered_and_plays_an_episode(verl, tmp_path):
    assert verl_loop.AWMAgentLoop is not None
    assert verl._agent_loop_registry["awm_agent"] == {"_target_": "awm_engine.train.verl_loop.AWMAgentLoop"}
    turns = oracle(0)

    async def go():
        server = ScriptedServer(turns)
        try:
            out = await instantiate(verl, server, tmp_path).run({"temperature": 1.0}, **dataset_fields(0))
            other = await instantiate(verl, ScriptedServer(["I cannot tell."]), tmp_path).run(
                {"temperature": 1.0}, **dataset_fields(0))
        finally:
            await close_loop_pool()
        return server, out, other

    server, out, other = asyncio.run(go())
    tok = ChatTokenizer()
    assert isinstance(out, verl.AgentLoopOutput) and out.reward_score == 1.0 and other.reward_score == 0.0
    awm = out.extra_fields["awm"]
    assert (awm["stop_reason"], awm["label"], awm["turns"]) == ("final_answer", "complete", 3)
    assert json.loads((Path(awm["run_dir"]) / "verify.json").read_text())["reward"] == 1.0
    # the prompt is the system prompt and the task; the model's tokens are masked 1, the tool results 0
    row = task_rows(Catalog.load(), [SCENARIO], [0])[0]
    assert tok.decode(out.prompt_ids) == tok.render(row["prompt"], True)
    generated = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
    assert tok.decode(generated) == "".join(turns)
    spans = re.findall(r"<user>Tool response:\n.*?</><assistant>", tok.decode(
        [t if m == 0 else 0 for t, m in zip(out.response_ids, out.response_mask)]).replace("\x00", ""), re.S)
    assert len(spans) == 2 and spans[0].startswith("<user>Tool response:\nAvailable MCP Tools")
    assert len(out.response_logprobs) == len(out.response_ids)
    assert {lp for lp, m in zip(out.response_logprobs, out.response_mask) if m} == {-0.5}
    # token in, token out: each request continues the exact tokens so far, under one request id per run
    assert len({c["request_id"] for c in server.calls}) == 1
    for k, call in enumerate(server.calls):
        assert call["prompt_ids"][:len(out.prompt_ids)] == out.prompt_ids
        if k:
            assert len(call["prompt_ids"]) > len(server.calls[k - 1]["prompt_ids"])
    assert len(verl_loop.SESSIONS) == 0  # released


def test_verl_format_error_failure_and_length_limit(verl, tmp_path):
    async def go():
        try:
            bad = await instantiate(verl, ScriptedServer([oracle(0)[0], NULL_NAME]), tmp_path).run(
                {}, **dataset_fields(0))
            with pytest.raises(RuntimeError, match="server down"):
                await instantiate(verl, ScriptedServer(oracle(0), fail_at=1), tmp_path).run({}, **dataset_fields(0))
            short = await instantiate(verl, ScriptedServer(oracle(0)), tmp_path, response_length=60).run(
                {}, **dataset_fields(0))
        finally:
            await close_loop_pool()
        return bad, short

    bad, short = asyncio.run(go())
    assert bad.reward_score == -1.0 and bad.extra_fields["awm"]["stop_reason"] == "format_error"
    assert len(verl_loop.SESSIONS) == 0  # the failed run's episode was released too
    assert short.extra_fields["awm"]["stop_reason"] == "response_length" and short.reward_score == 0.0
    assert len(short.response_ids) == len(short.response_mask) == 60


def test_verl_yaml_entry_holds_for_every_rollout(verl, tmp_path, monkeypatch):
    """verl reads ``agent_loop_config_path`` into its registry, then hydra-instantiates the entry per sample; the
    ``_target_``'s import (this module) must not replace the yaml's keys: every rollout gets them (issue 28)."""
    target = "awm_engine.train.verl_loop.AWMAgentLoop"
    yaml_entry = {"_target_": target, "on_format_error": "stop", "workers": 1, "out_dir": str(tmp_path / "yaml")}
    verl._agent_loop_registry.clear()
    verl._agent_loop_registry["awm_agent"] = dict(yaml_entry)
    importlib.reload(verl_loop)  # hydra imports the target on the first instantiate
    assert verl._agent_loop_registry["awm_agent"] == yaml_entry
    # a registry without the entry gets one; a yaml entry without _target_ gets awm's
    assert verl_loop.register_agent_loop({}, verl_loop.AWMAgentLoop) == {"_target_": target}
    assert verl_loop.register_agent_loop({"awm_agent": {"workers": 2}}, verl_loop.AWMAgentLoop) == \
        {"workers": 2, "_target_": target}

    def hydra_instantiate(server):
        entry = dict(verl._agent_loop_registry["awm_agent"])
        mod, _, cls = entry.pop("_target_").rpartition(".")
        config = SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=SimpleNamespace(
            prompt_length=8192, response_length=200_000)), data={})
        return getattr(importlib.import_module(mod), cls)(
            trainer_config=SimpleNamespace(config=config), server_manager=server, tokenizer=ChatTokenizer(),
            processor=None, hf_model_type=None, dataset_cls=None, data_config=SimpleNamespace(config={}),
            tools=SimpleNamespace(tools=[]), **entry)

    async def go():
        outs = []
        try:
            for k in range(2):  # the same malformed output in one group: the same settings, the same reward
                loop = hydra_instantiate(ScriptedServer([NULL_NAME]))
                assert (loop.settings.on_format_error, loop.settings.workers, loop.settings.out_dir) == \
                    ("stop", 1, str(tmp_path / "yaml")), k
                outs.append(await loop.run({}, **dataset_fields(0)))
                importlib.reload(verl_loop) if k == 0 else None  # a second import changes nothing
        finally:
            await close_loop_pool()
        return outs

    outs = asyncio.run(go())
    assert [o.reward_score for o in outs] == [-1.0, -1.0]
    for o in outs:
        assert len(o.response_mask) == len(o.response_ids) and set(o.response_mask) == {1}
        assert o.extra_fields["awm"]["stop_reason"] == "format_error"
        assert Path(o.extra_fields["awm"]["run_dir"]).is_relative_to(tmp_path / "yaml")


def test_without_verl_the_module_imports_and_says_what_is_missing():
    assert verl_loop.AWMAgentLoop is None
    with pytest.raises(ImportError, match="needs verl"):
        verl_loop.require_verl()


# -- TRL 1.16.0's side of the contract --------------------------------------------------------------

def tool_schema(method) -> dict:
    """What transformers' get_json_schema needs of a tool: a description, and every parameter typed and
    described under ``Args:``."""
    doc = inspect.getdoc(method) or ""
    description, _, rest = doc.partition("\n\n")
    assert description.strip(), method.__name__
    params = [p for p in inspect.signature(method).parameters.values()]
    # the Args block and its entries, parsed as transformers.utils.chat_template_utils does
    block = re.search(r"\n\s*Args:\n\s*(.*?)[\n\s]*(Returns:|Raises:|\Z)", "\n" + rest, re.S)
    args_doc = dict(re.findall(r"(?:^|\n)\s*(\w+):\s+(.*?)(?=\n\s*\w+:|\Z)", block.group(1), re.S)) if block else {}
    hints = inspect.get_annotations(method, eval_str=True)
    for p in params:
        assert hints.get(p.name) is str and args_doc.get(p.name), (method.__name__, p.name)
    return {"name": method.__name__, "parameters": [p.name for p in params]}


@pytest.fixture
def trl_factory(tmp_path):
    factory = trl_environment(workers=1, out_dir=str(tmp_path), protocol="robust", on_format_error="stop")
    yield factory
    LoopThread.shared().run(factory._pool.close())


def test_trl_environment_factory_contract(trl_factory):
    env = trl_factory()  # TRL calls the factory without arguments
    members = [n for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)]
    assert "reset" in members and "get_reward" not in members
    tools = [getattr(env, n) for n in members if n not in ("reset", "get_reward") and not n.startswith("_")]
    assert [tool_schema(t) for t in tools] == [
        {"name": "call_tool", "parameters": ["tool_name", "arguments"]}, {"name": "list_tools", "parameters": []}]
    assert all(not inspect.iscoroutinefunction(t) for t in tools)

    row = task_rows(Catalog.load(), [SCENARIO], [0])[0]
    assert env.reset(**row) is None  # the task is already in the row's prompt
    listing = env.list_tools()
    assert listing.startswith("Available MCP Tools")
    solution_call = Catalog.load().get(SCENARIO).solution(0)["calls"][0]  # list_my_loans {"status": "active"}
    args = json.dumps(solution_call["arguments"])
    loans = env.call_tool(tool_name="mcp_tool_mcp_server_list_my_loans", arguments=args)
    assert "The Silent Orchard" in loans or "loans" in loans
    final = oracle(0)[-1]
    completion = [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "list_tools", "arguments": {}}}]}, {"role": "tool", "name": "list_tools", "content": listing},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "call_tool", "arguments": {"tool_name": "mcp_tool_mcp_server_list_my_loans",
                                               "arguments": args}}}]},
        {"role": "tool", "name": "call_tool", "content": loans}, {"role": "assistant", "content": final}]
    assert awm_reward(completions=[completion], environments=[env], prompts=[row["prompt"]],
                      scenario=[SCENARIO], task_id=[0]) == [1.0]
    assert env.info["stop_reason"] == "final_answer" and env.info["label"] == "complete"
    run = json.loads((Path(env.info["run_dir"]) / "trajectory.json").read_text())
    assert [m["content"] for m in run["messages"] if m["role"] == "assistant"] == oracle(0)  # the AWM turns
    with pytest.raises(ValueError, match="episode is over"):
        env.call_tool(tool_name="mcp_tool_mcp_server_list_my_loans", arguments="{}")

    # TRL pools instances and resets them for the next batch: a format error (robust, stop) ends with -1
    env.reset(**task_rows(Catalog.load(), [SCENARIO], [1])[0])
    text = env.call_tool(tool_name="teleport", arguments="{}")
    assert "not found" in text and env.info["stop_reason"] == "format_error"
    assert awm_reward(completions=[[{"role": "assistant", "content": "sorry"}]], environments=[env]) == [-1.0]
    env.reset(**task_rows(Catalog.load(), [SCENARIO], [1])[0])
    assert awm_reward(completions=["I do not know."], environments=[env]) == [0.0]
    env._env.close()
