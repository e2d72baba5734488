"""``awm agent run`` and ``awm eval run`` share one group of agent settings; an evaluation records them and
``--resume`` reuses them."""
from __future__ import annotations

import argparse
import json

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import build_parser
from awm_engine.cli import main as awm
from awm_engine.cli.options import AGENT_GROUP
from awm_engine.eval.results import read_records


def subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def agent_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    (group,) = [g for g in parser._action_groups if g.title == AGENT_GROUP]
    return group._group_actions


def agent_flags(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(opt for action in agent_actions(parser) for opt in action.option_strings)


def test_agent_run_and_eval_run_accept_the_same_agent_flags():
    parser = build_parser()
    agent, evaluation = subparser(parser, "agent", "run"), subparser(parser, "eval", "run")
    assert agent_flags(agent) == agent_flags(evaluation)
    assert {"--endpoint", "--model", "--base-url", "--api-key", "--mode", "--max-turns", "--window", "--temperature",
            "--max-tokens", "--retries", "--call-timeout", "--on-timeout", "--episode-timeout", "--on-format-error",
            "--tool-names",
            "--verify", "--judge-endpoint", "--judge-model", "--judge-base-url", "--protocol",
            "--system-prompt", "--result-cap", "--trajectory-cap"} == set(agent_flags(agent))
    flags = ["--retries", "1", "--call-timeout", "5", "--episode-timeout", "60", "--tool-names", "plain"]
    a = agent.parse_args(["--scenario", "s", "--task", "0", *flags])
    e = evaluation.parse_args(["--out", "x", *flags])
    dests = [action.dest for action in agent_actions(agent)]
    assert {d: getattr(a, d) for d in dests} == {d: getattr(e, d) for d in dests}  # same defaults, same parsing
    assert (a.retries, a.call_timeout, a.episode_timeout, a.tool_names) == (1, 5.0, 60.0, "plain")


def test_eval_run_records_the_agent_settings_and_resume_reuses_them(tmp_path, capsys):
    out = tmp_path / "run"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--task", "0", "--task", "1",
                "--call-timeout", "5", "--episode-timeout", "60", "--tool-names", "plain", "--max-turns", "9",
                "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    agent = json.loads((out / "config.json").read_text())["agent"]
    assert agent["call_timeout"] == 5 and agent["episode_timeout"] == 60 and agent["tool_name_style"] == "plain"
    assert agent["max_turns"] == 9
    (first, second) = read_records(out / "results.jsonl")
    (out / "results.jsonl").write_text(json.dumps({**second, "status": "error"}) + "\n")  # the first one is missing
    assert awm(["eval", "run", "--resume", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert len(read_records(out / "results.jsonl")) == 2
    trajectory = json.loads((out / "rollouts" / "maple_library_lending" / "0_0" / "trajectory.json").read_text())
    assert trajectory["awm"]["config"] == agent  # the resumed rollout ran with the recorded settings
    assert json.loads((out / "config.json").read_text())["agent"] == agent


def test_agent_run_takes_retries_and_eval_records_them(tmp_path, capsys):
    with FakeLLMServer({"responses": [{"status": 503}], "rules": []}) as llm:
        assert awm(["agent", "run", "--scenario", "maple_library_lending", "--task", "0", "--model", "m",
                    "--base-url", llm.url, "--retries", "1", "--verify", "none", "--out", str(tmp_path / "a"),
                    "--quiet", "--json"]) == 1  # the endpoint failed: exit 1
        assert json.loads(capsys.readouterr().out)["rollout"]["stop_reason"] == "llm_error"
        assert len(llm.requests) == 2  # 1 try + 1 retry
    out = tmp_path / "e"
    with FakeLLMServer({"responses": [{"status": 503}], "rules": []}) as llm:
        assert awm(["eval", "run", "--scenario", "maple_library_lending", "--task", "0", "--model", "m",
                    "--base-url", llm.url, "--retries", "0", "--out", str(out), "--quiet"]) == 1  # all errored
        assert len(llm.requests) == 1
    assert json.loads((out / "config.json").read_text())["endpoint"]["max_retries"] == 0
    with FakeLLMServer({"responses": [{"status": 503}], "rules": []}) as llm:
        assert awm(["eval", "run", "--resume", str(out), "--base-url", llm.url, "--quiet"]) == 1
        assert len(llm.requests) == 1  # the recorded --retries 0
    capsys.readouterr()


def test_every_rollout_runner_takes_the_one_executor_group(capsys):
    from awm_engine.cli.options import EXECUTOR_GROUP

    parser = build_parser()
    verbs = [("eval", "run"), ("bench", "tau2", "run"), ("bench", "bfcl", "run"), ("bench", "mcp-universe", "run")]
    for path in verbs:
        (group,) = [g for g in subparser(parser, *path)._action_groups if g.title == EXECUTOR_GROUP]
        assert sorted(o for a in group._group_actions for o in a.option_strings) == ["--executor", "--ray-address"]
    # where the environments are not in the pool, ray is refused with the reason (never silently run locally)
    assert awm(["bench", "bfcl", "run", "--policy", "ground-truth", "--executor", "ray", "--out", "/nonexistent/x"]) == 2
    assert "BFCL has no environments in the worker pool" in capsys.readouterr().err
    assert awm(["bench", "mcp-universe", "run", "--ray-address", "h:6379", "--out", "/nonexistent/x"]) == 2
    assert "MCP-Universe" in capsys.readouterr().err
    assert awm(["eval", "run", "--policy", "oracle", "--ray-address", "h:6379", "--out", "/nonexistent/x"]) == 2
    assert "--ray-address needs --executor ray" in capsys.readouterr().err
