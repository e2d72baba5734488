"""MCP-Universe end to end, offline (issue 16): `awm bench mcp-universe run | score | report` with the scripted
OpenAI-compatible server against stand-in MCP servers with fixed data (tests/mcpu_standins.py), stdio and streamable
HTTP, each in awm's sandbox; function-call and ReAct modes; resume; the report marks the run as a simulation."""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.bench.mcp_universe.episode import McpServersEpisode
from awm_engine.bench.mcp_universe.servers import load_servers
from awm_engine.cli import main
from awm_engine.eval.results import read_records
from awm_engine.runtime.ports import free_port
from tests.conftest import SHARED

CONFIGS = SHARED / "data" / "mcp-universe" / "configs"
STANDINS = str(Path(__file__).with_name("mcpu_standins.py"))
TASKS = ["playwright_sports_task_0001", "playwright_paper_task_0001", "google_maps_task_0004",
         "info_search_task_0001", "yfinance_task_0001", "multi-server_task_weather_google_map_0001"]


def _call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _answer(answer):
    return {"content": json.dumps({"thought": "done", "answer": answer})}


ROUTES = {"starting_city": "Los Angeles", "destination_city": "San Francisco", "routes": [
    {"route_id": "1", "route_name": "Inland", "cities_visited": ["Bakersfield", "Coalinga", "Gilroy"]},
    {"route_id": "2", "route_name": "Coast", "cities_visited": ["Santa Barbara", "Coalinga", "Monterey"]}]}

SCRIPT = {"model": "scripted", "rules": [
    {"match": "[correct_answer]", "responses": [{"content": "extracted_final_answer: Ollie Watkins\n"
                                                             "reasoning: same person\ncorrect: yes"}]},
    {"match": "3P% of Bronny James", "responses": [
        _call("playwright__browser_navigate", url="https://www.nba.com/stats"), _call("playwright__browser_snapshot"),
        _answer({"Bronny James": "28.1", "Markieff Morris": "30.4"})]},
    {"match": "ICLR 2025 is a", "responses": [
        _call("playwright__browser_navigate", url="https://iclr.cc/"), _call("date__get_today_date"),
        _answer({"Some paper": "2501.00001"})]},
    {"match": "pre-wedding road trip", "responses": [
        _call("google-maps__maps_search_places", query="Coalinga"), _answer(ROUTES)]},
    {"match": "Score 16 goals", "responses": [
        _call("google-search__search", query="Ollie Watkins goals"), _answer("Ollie Watkins")]},
    {"match": "curious about investments", "responses": [
        _call("yfinance__get_historical_stock_prices", ticker="MSFT", start_date="2023-01-09", end_date="2025-01-08"),
        _call("calculator__calculate", expression="25000*1.64"),
        _answer({"total value": 41000.0, "total percentage return": 64.0})]},
    {"match": "Holiday Inn Brooklyn", "responses": [
        _call("google-maps__maps_search_places", query="park"),
        _answer({"stops": [{"name": "Fort Greene Park", "place id": "p1", "place type": "park"}]})]},
]}


@pytest.fixture
def configs():
    if not (CONFIGS / "web_search.yaml").is_file():
        pytest.skip(f"MCP-Universe configs not found at {CONFIGS} (../shared is absent)")
    return CONFIGS


@pytest.fixture
def servers_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SERP_API_KEY", "serp-test-key")
    monkeypatch.setenv("SOME_OTHER_SECRET", "must-not-leak")
    port = free_port()
    stdio = {n: {"command": sys.executable, "args": [STANDINS, n]}
             for n in ("playwright", "google-maps", "fetch", "yfinance", "calculator", "weather")}
    stdio["google-search"] = {"command": sys.executable, "args": [STANDINS, "google-search", f"marker={tmp_path}"],
                              "env": {"SERP_API_KEY": "${SERP_API_KEY}"}}
    stdio["date"] = {"type": "http", "url": f"http://127.0.0.1:{port}/mcp", "command": sys.executable,
                     "args": [STANDINS, "date", "--http", str(port), f"marker={tmp_path}"]}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": stdio}))
    return path


async def test_servers_run_sandboxed_with_only_their_declared_variables(servers_file, tmp_path):
    defs = load_servers(servers_file)
    episode = await McpServersEpisode.start([defs["google-search"], defs["date"]], tmp_path / "ep")
    try:
        names = {t["name"] for t in episode.list_tools()}
        assert {"google-search__search", "date__get_today_date"} <= names
        env = json.loads((await episode.call_tool("google-search__env_names")).text)
        assert "SERP_API_KEY" in env and "SOME_OTHER_SECRET" not in env and "AWM_SANDBOXED" in env
        assert (await episode.call_tool("date__get_today_date")).text == "2025-08-20"  # over streamable HTTP
        assert (await episode.call_tool("nosuch__tool")).error_kind == "unknown_tool"
        assert _processes_with(f"marker={tmp_path}")
    finally:
        await episode.close()
    await asyncio.sleep(0.5)
    assert not _processes_with(f"marker={tmp_path}")  # closing the episode ends its servers


def _processes_with(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text.encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr().out
    return code, out


def test_function_call_run_score_report(configs, servers_file, tmp_path, capsys):
    out = tmp_path / "run"
    with FakeLLMServer(SCRIPT) as llm:
        code, _ = _run(["bench", "mcp-universe", "run", "--mcp-universe", str(configs), "--task", *TASKS,
                        "--servers", str(servers_file), "--model", "scripted", "--base-url", llm.url,
                        "--simulation", "--out", str(out), "--quiet"], capsys)
        assert code == 0
        records = {r["task_id"]: r for r in read_records(out / "results.jsonl")}
        assert set(records) == set(TASKS)
        assert all(r["status"] == "ok" for r in records.values()), [r.get("error") for r in records.values()]
        labels = {k: r["label"] for k, r in records.items()}
        assert labels == {"playwright_sports_task_0001": "pass", "playwright_paper_task_0001": "fail",
                          "google_maps_task_0004": "pass", "info_search_task_0001": "needs",
                          "yfinance_task_0001": "needs", "multi-server_task_weather_google_map_0001": "needs"}
        sports = records["playwright_sports_task_0001"]
        assert sports["steps"] == 3 and sports["tool_calls"] == 2
        trajectory = json.loads((Path(sports["run_dir"]) / "trajectory.json").read_text())
        assert trajectory["awm"]["stop_reason"] == "final_answer"
        # the first request: the instruction, the question and the answer format; tools named server__tool
        first = next(r for r in llm.requests if "3P% of Bronny James" in json.dumps(r["messages"]))
        assert {t["function"]["name"] for t in first["tools"]} == {
            "playwright__browser_navigate", "playwright__browser_snapshot", "playwright__browser_close",
            "date__get_today_date"}
        assert '"Bronny James": "xx.x"' in first["messages"][1]["content"]

        # score again with a judge: the web-search task is now graded
        code, text = _run(["bench", "mcp-universe", "score", str(out), "--judge-model", "judge",
                           "--judge-base-url", llm.url, "--json"], capsys)
        assert code == 0
    meta = json.loads(text)
    assert meta["simulation"] is True and "not comparable" in meta["note"]
    paper = meta["paper"]["table"]
    assert paper["Browser"]["passed"] == 1 and paper["Browser"]["scored"] == 2
    assert paper["Web"]["passed"] == 1 and paper["Location"]["needs"] == 1  # the multi-server task is in Location
    assert paper["Overall"]["scored"] == 4 and paper["Overall"]["passed"] == 3
    # the official rate divides by every task of the run; the decided-here rate is next to it
    assert paper["Overall"]["sr"] == 3 / paper["Overall"]["tasks"] and paper["Overall"]["sr_decidable"] == 3 / 4
    assert paper["Overall"]["partial"]  # 6 of the paper's 231 tasks
    assert meta["evaluator"]["package"] == "mcpuniverse==1.0.0"
    assert meta["evaluator"]["judge"]["model"] == "judge" and meta["evaluator"]["judge"]["official_model"] == "gpt-4.1"
    awm = meta["awm"]["table"]
    assert awm["Multi"]["needs"] == 1 and awm["Location"]["scored"] == 1 and "Repository" not in awm
    assert meta["awm"]["needs_by_service"] == {"google-maps": 1, "weather": 1, "yfinance": 1}

    code, text = _run(["bench", "mcp-universe", "report", str(out), "--markdown", "--grouping", "awm"], capsys)
    assert code == 0 and "Offline simulation" in text and "| SR % (all tasks, official) |" in text


def test_react_mode_and_resume(configs, servers_file, tmp_path, capsys):
    react = {"model": "scripted", "rules": [{"match": "3P% of Bronny James", "responses": [
        {"content": "I should open the stats page.\n<tool_call>\n" + json.dumps(
            {"name": "call_tool", "arguments": {"tool_name": "playwright__browser_navigate",
                                                "arguments": json.dumps({"url": "https://www.nba.com/stats"})}})
         + "\n</tool_call>"},
        _answer({"Bronny James": "28.1", "Markieff Morris": "30.4"})]},
        {"match": "ICLR 2025 is a", "responses": [{"status": 400, "body": "bad request"}]}]}
    out = tmp_path / "react"
    args = ["bench", "mcp-universe", "run", "--mcp-universe", str(configs), "--domain", "browser",
            "--task", "playwright_sports_task_0001", "playwright_paper_task_0001", "--servers", str(servers_file),
            "--model", "scripted", "--mode", "react", "--simulation", "--quiet"]
    with FakeLLMServer(react) as llm:
        code, _ = _run(args + ["--base-url", llm.url, "--out", str(out)], capsys)
        assert code == 0
        records = {r["task_id"]: r for r in read_records(out / "results.jsonl")}
        assert records["playwright_sports_task_0001"]["label"] == "pass"
        assert records["playwright_paper_task_0001"]["status"] == "error"  # the model failed: not scored
        system = llm.requests[0]["messages"][0]["content"]
        assert "playwright__browser_navigate" in system and "<tool_call>" in system
        assert "tools" not in llm.requests[0]
        asked = len(llm.requests)
        # resume runs only the errored task again
        code, _ = _run(["bench", "mcp-universe", "run", "--resume", str(out), "--base-url", llm.url, "--quiet"],
                       capsys)
        assert code == 0
        reasked = [r for r in llm.requests[asked:] if "3P% of Bronny James" in json.dumps(r["messages"])]
        assert not reasked


def test_a_run_that_scores_nothing_exits_1(configs, servers_file, tmp_path, capsys):
    out = tmp_path / "needs-only"
    with FakeLLMServer(SCRIPT) as llm:  # both tasks need a service the offline run does not have
        code = main(["bench", "mcp-universe", "run", "--mcp-universe", str(configs), "--task", "info_search_task_0001",
                     "yfinance_task_0001", "--servers", str(servers_file), "--model", "scripted", "--base-url",
                     llm.url, "--simulation", "--out", str(out), "--quiet"])
    assert code == 1
    assert "nothing was scored: of 2 tasks, 0 errored and 2 need a service" in capsys.readouterr().err
