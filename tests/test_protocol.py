"""The agent protocol, table-driven: one assistant turn in, what the model sees next / whether the episode
ends / the reward, under ``--protocol reference`` (the reference agent's behaviour, the default) and
``--protocol robust``; plus the request shape the reference uses for local vLLM endpoints."""
from __future__ import annotations

import asyncio
import json

import pytest

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.meta_protocol import SYSTEM_PROMPT, render_tool_list, uses_vllm_extras
from awm_engine.agent.policies import AssistantTurn, LLMPolicy, ScriptedTurns
from awm_engine.agent.rollout import AgentConfig, Rollout
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.data.catalog import Catalog
from awm_engine.db.templates import TemplateCache
from awm_engine.eval.episode import run_episode
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.verify.rewards import RewardConfig

SCENARIO = "maple_library_lending"
LIST = '<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>'
UNKNOWN_FN = "Error: Unknown tool '{}'. Only 'list_tools' and 'call_tool' are available."


def call_tool(tool, args="{}"):
    return '<tool_call>' + json.dumps({"name": "call_tool", "arguments": {"tool_name": tool, "arguments": args}}) + \
        '</tool_call>'


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    scenario = Catalog.load().get(SCENARIO)
    template, _ = TemplateCache(tmp_path_factory.mktemp("tpl")).get(scenario)
    loaded = LoadedEnv(scenario.key, scenario.code, template, tmp_path_factory.mktemp("env"))
    yield scenario, loaded
    loaded.close()


def run_turn(env, tmp_path, content, protocol, **config):
    """One scripted turn, then a final answer: (first observation text or None, stop reason, turns, events)."""
    scenario, loaded = env
    episode = Episode(loaded, tmp_path / protocol)
    policy = ScriptedTurns([AssistantTurn(content)], final="done")
    rollout = Rollout(episode, scenario.key, 0, scenario.tasks[0], policy, AgentConfig(protocol=protocol, **config))

    async def go():
        return [e async for e in rollout.events()]

    events = asyncio.run(go())
    episode.close_now()
    observations = [e.text for e in events if e.type == "observation"]
    finished = events[-1]
    return (observations[0] if observations else None), finished.stop_reason, finished.iterations, events


def branches_text(env):
    scenario, loaded = env
    episode = Episode(loaded)
    text = episode.call_tool_sync("list_branches", {}).text
    episode.close_now()
    return text


# (case, turn content, expected under reference, expected under robust); an expectation is either
# ("final",) — the turn is the final answer — or ("observe", text or callable) or ("format_error",)
CASES = [
    ("call inside <think> is executed", f"<think>{LIST}</think>", ("observe", "TOOLS"), ("final",)),
    ("unclosed <tool_call>", '<tool_call>{"name": "list_tools"', ("final",),
     ("observe", "Error: you opened <tool_call> but never closed it with </tool_call>.")),
    ("empty <tool_call>", "<tool_call></tool_call>", ("final",), ("observe", "Error: your <tool_call> is not valid JSON.")),
    ("empty object", "<tool_call>{}</tool_call>", ("final",), ("observe", "Error: your <tool_call> is not valid JSON.")),
    ("list whose first element is not an object", '<tool_call>[1, {"name": "list_tools"}]</tool_call>', ("final",),
     ("observe", "TOOLS")),
    ("bare tool name", '<tool_call>{"name": "list_branches", "arguments": {}}</tool_call>',
     ("observe", UNKNOWN_FN.format("list_branches")), ("observe", "BRANCHES")),
    ("server-prefixed name", '<tool_call>{"name": "mcp_server_list_branches", "arguments": {}}</tool_call>',
     ("observe", UNKNOWN_FN.format("mcp_server_list_branches")), ("observe", "BRANCHES")),
    ("name with spaces", '<tool_call>{"name": "list branches", "arguments": {}}</tool_call>',
     ("observe", UNKNOWN_FN.format("list branches")), ("observe", UNKNOWN_FN.format("list branches"))),
    ("direct call by the shown name", '<tool_call>{"name": "mcp_tool_mcp_server_list_branches"}</tool_call>',
     ("observe", "BRANCHES"), ("observe", "BRANCHES")),
    ("unknown prefixed tool", '<tool_call>{"name": "mcp_tool_mcp_server_nope", "arguments": {}}</tool_call>',
     ("observe", "Error: Unknown tool: nope"), ("observe", "Error: Tool 'nope' not found")),
    ("two calls in one turn", LIST + call_tool("mcp_tool_mcp_server_list_branches"), ("observe", "TOOLS"),
     ("observe", "TOOLS+NOTE")),
    ("call_tool arguments not an object", '<tool_call>{"name": "call_tool", "arguments": "[1, 2]"}</tool_call>',
     ("observe", "Error: Tool '' not found"),
     ("observe", 'Error: call_tool needs {"tool_name": ..., "arguments": "{...}"}.')),
    ("inner arguments not an object", call_tool("mcp_tool_mcp_server_list_branches", "[1, 2]"),
     ("observe", "BRANCHES"), ("observe", "Error: call_tool needs {\"tool_name\": ..., \"arguments\": \"{...}\"}.")),
    ("call_tool without a tool name", '<tool_call>{"name": "call_tool", "arguments": {"arguments": "{}"}}</tool_call>',
     ("observe", "Error: Tool '' not found"),
     ("observe", 'Error: call_tool needs {"tool_name": ..., "arguments": "{...}"}.')),
    # issue 25: the reference calls tool_name.startswith(...) and crashes without a trajectory
    ("call_tool tool_name null", call_tool(None), ("format_error",), ("observe", 'Error: call_tool needs {"tool_name": ..., "arguments": "{...}"}.')),
    ("call_tool tool_name a number", call_tool(7), ("format_error",), ("observe", 'Error: call_tool needs {"tool_name": ..., "arguments": "{...}"}.')),
    ("name null", '<tool_call>{"name": null, "arguments": {}}</tool_call>', ("format_error",),
     ("observe", "Error: your <tool_call> has no function name.")),
    ("name not a string", '<tool_call>{"name": 7}</tool_call>', ("format_error",),
     ("observe", "Error: your <tool_call> has no function name.")),
]


@pytest.mark.parametrize("protocol", ["reference", "robust"])
@pytest.mark.parametrize("case, content, reference, robust", CASES, ids=[c[0] for c in CASES])
def test_protocol_case(env, tmp_path, protocol, case, content, reference, robust):
    expected = reference if protocol == "reference" else robust
    observation, stop, turns, events = run_turn(env, tmp_path, content, protocol)
    if expected[0] == "final":
        assert (stop, turns, observation) == ("final_answer", 1, None), case
        return
    if expected[0] == "format_error":
        assert stop == "format_error" and turns == 1 and observation is None, case
        assert RewardConfig().reward("others", stop) == -1.0
        return
    assert stop == "final_answer" and turns == 2, (case, stop, observation)
    tools_text = render_tool_list(env[1].mcp_tools())
    want = {"TOOLS": tools_text, "BRANCHES": branches_text(env),
            "TOOLS+NOTE": tools_text + "\n\nNote: your reply contained 2 function calls; only the first was "
                                       "executed. Make one call per reply."}.get(expected[1], expected[1])
    assert observation == want, case


def test_protocol_defaults():
    ref, rob = AgentConfig(), AgentConfig(protocol="robust")
    assert (ref.max_turns, ref.episode_timeout, ref.call_timeout, ref.parse_think_calls) == (30, None, 60.0, True)
    assert (rob.max_turns, rob.episode_timeout, rob.call_timeout, rob.parse_think_calls) == (20, 900.0, None, False)
    assert AgentConfig(max_turns=5, episode_timeout=None).max_turns == 5
    assert AgentConfig.from_dict({"mode": "meta", "max_turns": 20}).protocol == "robust"  # runs from before
    with pytest.raises(ValueError):
        AgentConfig(protocol="nope")


def test_reference_stops_after_30_turns(env, tmp_path):
    scenario, loaded = env
    episode = Episode(loaded, tmp_path / "long")
    rollout = Rollout(episode, scenario.key, 0, "t", ScriptedTurns([AssistantTurn(LIST)] * 40), AgentConfig())
    finished = asyncio.run(rollout.run())
    episode.close_now()
    assert (finished.stop_reason, finished.iterations) == ("max_turns", 30)
    trajectory = json.loads((tmp_path / "long" / "trajectory.json").read_text())
    assert not any(e.get("is_final") for e in trajectory["trajectory"]) and trajectory["max_iterations"] == 30


def test_custom_system_prompt_is_used_and_recorded(env, tmp_path):
    scenario, loaded = env
    episode = Episode(loaded, tmp_path / "p")
    config = AgentConfig(system_prompt="You are trained this way.")
    asyncio.run(Rollout(episode, scenario.key, 0, "t", ScriptedTurns([]), config).run())
    episode.close_now()
    data = json.loads((tmp_path / "p" / "trajectory.json").read_text())
    assert data["messages"][0]["content"] == "You are trained this way."
    assert data["awm"]["config"]["system_prompt_sha256"] == config.system_prompt_sha256 != AgentConfig().system_prompt_sha256
    assert AgentConfig().system_prompt_text == SYSTEM_PROMPT
    # native mode: the request's functions are the tools, and the prompt describes no meta-tools or call format
    native = AgentConfig(mode="native").system_prompt_text
    assert native != SYSTEM_PROMPT and "list_tools" not in native and "<tool_call>" not in native
    assert AgentConfig(mode="native", system_prompt="mine").system_prompt_text == "mine"


def test_the_vllm_switch_follows_the_reference_rule():
    assert uses_vllm_extras("http://localhost:8000/v1")
    assert not uses_vllm_extras("http://127.0.0.1:8000/v1")
    assert not uses_vllm_extras("http://localhost:8000/api")
    assert not uses_vllm_extras("https://localhost.openai.azure.com/openai/v1")


@pytest.mark.parametrize("host, protocol, vllm", [("localhost", "reference", True), ("127.0.0.1", "reference", False),
                                                  ("localhost", "robust", False)])
def test_request_shape_on_the_scripted_llm(tmp_path, host, protocol, vllm):
    script = {"responses": [{"content": LIST}, {"content": "done"}]}
    catalog = Catalog.load()
    scenario = catalog.get(SCENARIO)
    with FakeLLMServer(script) as server:
        url = server.url.replace("127.0.0.1", host)

        async def go():
            policy = LLMPolicy(Endpoint(url, "scripted"))
            try:
                return await run_episode(catalog, scenario, 0, policy, AgentConfig(protocol=protocol),
                                         tmp_path / "run", verify_mode=None)
            finally:
                await policy.aclose()

        outcome = asyncio.run(go())
        requests = list(server.requests)
    assert outcome.finished.stop_reason == "final_answer" and len(requests) == 2
    extras = {"add_generation_prompt": True, "min_tokens": 16, "chat_template_kwargs": {"enable_thinking": True}}
    for body in requests:
        assert all(body.get(k) == v for k, v in extras.items()) is vllm
        assert "tools" not in body
    last = requests[1]["messages"][-1]
    if vllm:
        assert last["role"] == "tool" and last["tool_call_id"].startswith("call_") and last["content"].startswith(
            "Available MCP Tools")
    else:
        assert last["role"] == "user" and last["content"].startswith("Tool response:\nAvailable MCP Tools")
