"""Rollouts end to end: oracle and baseline on every sample task; scripted LLMs in meta and native mode on a
real AWM environment; malformed model output; history window; dead endpoints; replay."""
import asyncio
import json

import pytest

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.meta_protocol import parse_meta_turn, render_tool_list
from awm_engine.agent.policies import LLMPolicy
from awm_engine.agent.rollout import AgentConfig
from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import make_policy, run_episode
from awm_engine.runtime.pool import EnvPool

TRAJECTORY_KEYS = {"scenario", "task_id", "task", "model", "api_url", "max_iterations", "temperature",
                   "total_iterations", "timestamp", "trajectory", "messages"}


def call(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def tool_call(tool, args):
    return call("call_tool", {"tool_name": f"mcp_tool_mcp_server_{tool}", "arguments": json.dumps(args)})


async def run_all(kind, tmp_path):
    catalog = Catalog.load()
    labels = {}
    async with EnvPool(workers=2) as pool:
        async def one(s, i):
            outcome = await run_episode(catalog, s, i, make_policy(kind, s, i), AgentConfig(),
                                        tmp_path / f"{s.key}_{i}", pool=pool)
            labels[(s.key, i)] = (outcome.verification.label, outcome.finished.stop_reason, outcome.reward)
        await asyncio.gather(*(one(s, i) for s in catalog for i in range(len(s.tasks))))
    return labels


def test_oracle_completes_every_sample_task(tmp_path):
    labels = asyncio.run(run_all("oracle", tmp_path))
    assert len(labels) == 50
    assert {k: v for k, v in labels.items() if v != ("complete", "final_answer", 1.0)} == {}


def test_a_policy_that_answers_at_once_completes_none(tmp_path):
    labels = asyncio.run(run_all("immediate", tmp_path))
    assert len(labels) == 50
    assert all(v[0] == "others" and v[2] == 0.0 for v in labels.values())


JUDGE_OK = {"reasoning": "The history was fetched.", "confidence_score": [90, 5, 2, 3], "classification": "Complete",
            "evidence": {"status": "done", "iterations": 3, "error_signals": [], "last_actions": ["x"],
                         "database_verification": "unchanged"}}


def judge_rule(content):
    return {"match": "verification_json", "responses": [{"content": content}]}


@pytest.mark.parametrize("mode", ["meta", "native"])
def test_scripted_llm_on_a_real_environment_then_verify(awm_real, tmp_path, mode, capsys):
    if mode == "meta":
        responses = [{"content": "<think>start by listing</think>" + call("list_tools", None)},
                     {"content": tool_call("fetch_my_donation_history", {})},
                     {"content": "You have donated to several campaigns."}]
    else:
        responses = [{"tool_calls": [{"name": "fetch_my_donation_history", "arguments": {}}]},
                     {"content": "You have donated to several campaigns."}]
    script = {"responses": responses, "rules": [judge_rule("```json\n" + json.dumps(JUDGE_OK) + "\n```")]}
    run_dir = tmp_path / "run"
    with FakeLLMServer(script) as llm:
        assert awm(["agent", "run", "--data", str(awm_real), "--scenario", "GoFundMe", "--task", "0", "--policy", "llm",
                    "--model", "scripted", "--base-url", llm.url, "--mode", mode, "--verify", "none",
                    "--out", str(run_dir), "--json"]) == 0
        capsys.readouterr()
        traj = json.loads((run_dir / "trajectory.json").read_text())
        assert TRAJECTORY_KEYS <= set(traj)
        assert traj["scenario"] == "gofundme" and traj["task_id"] == 0 and traj["awm"]["stop_reason"] == "final_answer"
        steps = traj["trajectory"]
        assert all(len(s["tool_calls"]) == 1 and set(s["tool_response"]) == {"tool_call_id", "content"}
                   for s in steps[:-1])
        assert steps[-1]["is_final"] is True and steps[-1]["tool_calls"] == []
        assert '"donations"' in steps[-2]["tool_response"]["content"]
        if mode == "meta":
            assert steps[0]["tool_calls"][0]["name"] == "list_tools"
            assert steps[0]["tool_response"]["content"].startswith("Available MCP Tools (10 tools):\n" + "=" * 80)
            assert "1. mcp_tool_mcp_server_" in steps[0]["tool_response"]["content"]
            sent = llm.requests[1]["messages"]
            assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("Tool response:\nAvailable MCP")
            assert "tools" not in llm.requests[0]
        else:
            assert {t["function"]["name"] for t in llm.requests[0]["tools"]} >= {"fetch_my_donation_history"}
            assert llm.requests[1]["messages"][-1]["role"] == "tool"
        for name in ("initial.db", "final.db", "events.jsonl"):
            assert (run_dir / name).is_file()
        events = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
        assert events[0] == "rollout_started" and events[-1] == "rollout_finished" and "observation" in events
        assert awm(["verify", str(run_dir), "--mode", "sql", "--judge-base-url", llm.url, "--judge-model", "judge",
                    "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        judged = [r for r in llm.requests if "verification_json" in r["messages"][-1]["content"]]
    # real pipeline output holds code-mode verifiers only (in gen_verifier.jsonl): the code-mode verifier decides and
    # the judge is not asked (the judge's request: tests/test_verify.py)
    assert report["has_verdict"] and report["code"]["function"] == "verify_task_completion" and judged == []
    assert report["sql"] is None and report["judge"] is None and "no sql-mode verifier" in report["note"]
    ref = json.loads((run_dir / "verify.code.json").read_text())
    assert ref["mode"] == "code" and ref["reward_type"] == report["label"] in ("complete", "others")


def test_verify_without_judge_falls_back_to_code_mode(tmp_path, capsys):
    s = Catalog.load().get("maple_library_lending")
    outcome = asyncio.run(run_episode(Catalog.load(), s, 1, make_policy("oracle", s, 1), run_dir=tmp_path / "r",
                                      verify_mode=None))
    assert outcome.verification is None
    assert awm(["verify", str(tmp_path / "r"), "--mode", "sql", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["label"] == "complete" and report["reward"] == 1.0
    assert "no judge endpoint" in report["note"] and report["sql"]["label"] == "incomplete"


# -- malformed model output ----------------------------------------------------------------------

MALFORMED = {
    "bad_json": ("<tool_call>this is not json</tool_call>", "invalid_json"),
    "truncated_json": ("<tool_call>{\"name\": \"call_tool\", \"arguments\": </tool_call>", "invalid_arguments"),
    "name_null": ("<tool_call>{\"name\": null, \"arguments\": {}}</tool_call>", "missing_name"),
    "unknown_tool": (tool_call("teleport", {}), "tool_not_found"),
    "missing_args": (tool_call("get_event", {}), "invalid_args"),
    "several_calls": (call("list_tools", {}) + tool_call("list_branches", {}), "multiple_calls"),
    "unclosed": ("<tool_call>{\"name\": \"list_tools\"", "unclosed_tool_call"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("on_error", ["observe", "stop"])
def test_malformed_output_never_crashes(case, on_error, tmp_path):
    content, kind = MALFORMED[case]
    script = {"responses": [{"content": content}, {"content": "giving up"}]}
    s = Catalog.load().get("maple_library_lending")
    with FakeLLMServer(script) as llm:
        policy = LLMPolicy(Endpoint(base_url=llm.url, model="m", max_retries=0))
        config = AgentConfig(protocol="robust", on_format_error=on_error)  # the reference: tests/test_protocol.py
        outcome = asyncio.run(run_episode(Catalog.load(), s, 0, policy, config, tmp_path / "r", verify_mode="code"))
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    errors = [e for e in events if e["type"] == "format_error"]
    assert kind in {e["kind"] for e in errors}
    if on_error == "stop":
        assert outcome.finished.stop_reason == "format_error"
        assert outcome.verification.reward == -1.0
    else:
        assert outcome.finished.stop_reason == "final_answer"
        observations = [e for e in events if e["type"] == "observation"]
        assert observations and observations[0]["text"]
        if case == "unknown_tool":
            assert observations[0]["text"] == "Error: Tool 'teleport' not found"
        if case == "missing_args":
            assert observations[0]["text"] == "Error: Input validation error: 'event_id' is a required property"
        if case == "several_calls":
            assert observations[0]["text"].startswith("Available MCP Tools") and "only the first" in \
                observations[0]["text"]


def test_parser_accepts_every_tool_name_form():
    for name in ("list_branches", "mcp_tool_list_branches", "mcp_server_list_branches",
                 "mcp_tool_mcp_server_list_branches"):
        turn = parse_meta_turn(call("call_tool", {"tool_name": name, "arguments": "{\"q\": \"x\"}"}))
        assert turn.calls[0].tool == "list_branches" and turn.calls[0].tool_arguments == {"q": "x"}
        direct = parse_meta_turn(call(name, {"q": "x"}), known_tools={"list_branches"})
        assert direct.calls[0].name == "call_tool" and direct.calls[0].tool == "list_branches"
    repaired = parse_meta_turn('<tool_call>{"name": "call_tool", "arguments": {"tool_name": "x", '
                               '"arguments": "{"q": "a"}"}}</tool_call>')
    assert repaired.calls and repaired.calls[0].tool == "x"
    thinking = parse_meta_turn("<think>" + call("list_tools", {}) + "</think>The answer is 4.")
    assert thinking.is_final
    assert parse_meta_turn("<think>" + call("list_tools", {}) + "</think>", parse_think_calls=True).calls


def test_tool_list_rendering():
    tools = [{"name": "get_x", "description": "Get X\n\nLonger text.\n\n### Responses:", "inputSchema": {
        "type": "object", "properties": {"x_id": {"type": "integer", "description": "the id"},
                                         "kind": {"type": "string", "enum": ["a", "b"], "default": "a"}},
        "required": ["x_id"]}}, {"name": "ping", "description": "Ping", "inputSchema": {"properties": {}}}]
    text = render_tool_list(tools)
    assert text.split("\n")[:4] == ["Available MCP Tools (2 tools):", "=" * 80, "",
                                    "1. mcp_tool_mcp_server_get_x"]
    assert "   Description: Get X\n   Longer text.\n   ### Responses:\n   Parameters:" in text
    assert "      - x_id: integer (required)\n        Description: the id" in text
    assert "        Default: a\n        Allowed values: ['a', 'b']" in text
    assert text.endswith("2. mcp_tool_mcp_server_ping\n   Description: Ping\n   Parameters: None")


def test_history_window_keeps_system_task_first_list_and_last_turns(tmp_path):
    responses = [{"content": call("list_tools", {})}] + [{"content": tool_call("list_branches", {})}] * 5 + \
        [{"content": "done"}]
    s = Catalog.load().get("maple_library_lending")
    with FakeLLMServer({"responses": responses, "cursor": "sequential"}) as llm:
        policy = LLMPolicy(Endpoint(base_url=llm.url, model="m"))
        asyncio.run(run_episode(Catalog.load(), s, 0, policy, AgentConfig(history_window=2), tmp_path / "r",
                                verify_mode=None))
        last = llm.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user"] + ["assistant", "user"] * 3
    assert "list_tools" in last[2]["content"] and last[3]["content"].startswith("Tool response:\nAvailable")
    assert len(llm.requests) == 7


def test_dead_endpoint_stops_with_llm_error(tmp_path):
    s = Catalog.load().get("maple_library_lending")
    policy = LLMPolicy(Endpoint(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, timeout=2))
    outcome = asyncio.run(run_episode(Catalog.load(), s, 0, policy, run_dir=tmp_path / "r", verify_mode="code"))
    assert outcome.finished.stop_reason == "llm_error" and "Connection" in outcome.finished.error
    assert outcome.verification is None  # no model answer: nothing was judged (not a failed task)


def test_agent_run_on_a_dead_endpoint_exits_1_without_a_verdict(tmp_path, capsys):
    code = awm(["agent", "run", "--scenario", "maple_library_lending", "--task", "0", "--model", "x", "--base-url",
                "http://127.0.0.1:9/v1", "--retries", "0", "--out", str(tmp_path / "r"), "--quiet"])
    assert code == 1 and "the model endpoint failed" in capsys.readouterr().err
    assert not (tmp_path / "r" / "verify.json").exists()


def test_failing_endpoint_is_retried(tmp_path):
    script = {"responses": [{"status": 503, "body": "busy"}, {"content": "final"}]}
    s = Catalog.load().get("maple_library_lending")
    with FakeLLMServer(script) as llm:
        policy = LLMPolicy(Endpoint(base_url=llm.url, model="m", max_retries=2))
        outcome = asyncio.run(run_episode(Catalog.load(), s, 0, policy, run_dir=tmp_path / "r", verify_mode=None))
    assert outcome.finished.stop_reason == "final_answer" and len(llm.requests) == 2


def test_replay_reproduces_a_run(tmp_path):
    catalog = Catalog.load()
    s = catalog.get("pinecrest_online_store")
    first = asyncio.run(run_episode(catalog, s, 3, make_policy("oracle", s, 3), run_dir=tmp_path / "a"))
    again = asyncio.run(run_episode(catalog, s, 3, make_policy("replay", s, 3, replay_from=tmp_path / "a"),
                                    run_dir=tmp_path / "b"))
    assert first.verification.label == again.verification.label == "complete"
    a = json.loads((tmp_path / "a" / "trajectory.json").read_text())["trajectory"]
    b = json.loads((tmp_path / "b" / "trajectory.json").read_text())["trajectory"]
    assert [x["tool_response"]["content"] for x in a[1:-1]] == [x["tool_response"]["content"] for x in b[1:-1]]


def test_agent_run_cli_oracle(tmp_path, capsys):
    assert awm(["agent", "run", "--scenario", "skyway_travel_bookings", "--task", "2", "--policy", "oracle",
                "--out", str(tmp_path / "r"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verification"]["label"] == "complete" and out["rollout"]["stop_reason"] == "final_answer"
    assert awm(["agent", "run", "--scenario", "skyway_travel_bookings", "--task", "2", "--policy", "llm",
                "--out", str(tmp_path / "x")]) == 2  # no endpoint configured


def test_human_policy_from_a_terminal(tmp_path):
    """`awm agent run --policy human`: the CLI twin of playing in the TUI."""
    import os
    import subprocess
    import sys

    lines = 'tools\nno_such_tool {}\nlist_my_loans {"status": "active"}\nrenew_loan {bad json\nrenew_loan {"loan_id": 3}\n' \
            "answer Renewed until 2026-04-03.\n"
    done = subprocess.run([sys.executable, "-m", "awm_engine.cli", "agent", "run", "--scenario", "maple_library_lending",
                           "--task", "3", "--policy", "human", "--out", str(tmp_path / "r"), "--json"],
                          input=lines, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["verification"]["label"] == "complete"
    assert "unknown tool 'no_such_tool'" in done.stderr and "arguments must be a JSON object" in done.stderr
    assert "renew_loan(loan_id*)" in done.stderr
