"""Contract tests of the trainer adapters that need no trainer installed: each test plays the part of the trainer,
calling the adapter exactly as that library's code does. The trainers' own code runs them in tests/test_train_verl.py
(verl's AgentLoopWorker) and tests/test_train_trl_grpo.py (TRL's GRPOTrainer), with the CPU trainer extra.

* TRL 1.16.0 (``trl/trainer/grpo_trainer.py``, ``environment_factory``): the factory is called without
  arguments; the public functions of the class other than ``reset`` / ``get_reward`` are the tools (type hints
  and a docstring with ``Args:``, as ``transformers.utils.get_json_schema`` requires); ``reset(**row)`` starts
  each episode and may return ``None``; the tools are called with the model's arguments; reward functions get
  ``completions`` and ``environments``.
* verl: registering the agent loop keeps an entry the agent-loop yaml configured; without verl the module still
  imports and says what is missing.
"""
from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from pathlib import Path

import pytest

from awm_engine.agent.policies import OraclePolicy
from awm_engine.data.catalog import Catalog
from awm_engine.train import verl_loop
from awm_engine.train.gym import LoopThread
from awm_engine.train.tasks import task_rows
from awm_engine.train.trl_env import awm_reward, trl_environment

SCENARIO = "maple_library_lending"


def oracle(task):
    policy = OraclePolicy(Catalog.load().get(SCENARIO).solution(task))
    return [t.content for t in policy.turns] + [policy.final]


# -- verl: what does not need verl ------------------------------------------------------------------
# verl's own AgentLoopWorker runs the loop in tests/test_train_verl.py (the CPU trainer extra).

def test_registration_keeps_a_configured_entry():
    """verl reads the agent-loop yaml into its registry before hydra imports this module: an entry that is there
    stays as it is (issue 28: re-registering replaced the yaml's keys from the second rollout on)."""
    class Loop:
        pass

    target = f"{Loop.__module__}.{Loop.__qualname__}"
    assert verl_loop.register_agent_loop({}, Loop) == {"_target_": target}
    registry = {"awm_agent": {"_target_": "x.Y", "on_format_error": "stop", "workers": 1}}
    assert verl_loop.register_agent_loop(registry, Loop) == {"_target_": "x.Y", "on_format_error": "stop",
                                                               "workers": 1}
    assert verl_loop.register_agent_loop({"awm_agent": {"workers": 2}}, Loop) == {"workers": 2, "_target_": target}


def test_without_verl_the_module_imports_and_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop", None)  # not importable
    try:
        importlib.reload(verl_loop)
        assert verl_loop.AWMAgentLoop is None
        with pytest.raises(ImportError, match="needs verl"):
            verl_loop.require_verl()
    finally:
        monkeypatch.undo()
        importlib.reload(verl_loop)  # as installed: with verl where the trainer extra is set up


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
