"""τ²-bench, MCP-Universe and `awm bench report` on inputs nobody should write but somebody will: malformed task and
server files, broken splits and missing databases, τ² results files with missing keys, run directories that are
empty, half-written or of the wrong kind. Each bad item gets its own clear error; the rest still loads and runs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.bench import report
from awm_engine.bench.mcp_universe import servers, tasks
from awm_engine.bench.tau2.data import Tau2Data
from awm_engine.bench.tau2.run import RunRefused, Tau2Config, preflight
from awm_engine.cli import main as awm
from awm_engine.eval.results import ResultsIndex
from tests.test_bench_report import mcpu_run, tau2_run
from tests.test_tau2_domains import FIXTURE

MCPU = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mcp-universe" / "configs"


# -- awm bench report ------------------------------------------------------------------------------------------

def test_results_lines_that_are_not_records_are_skipped(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a/0/0", "status": "ok"}\n[1, 2]\nnull\n{"id": 5}\n"text"\n{"id": "b/0/0"}\n')
    index = ResultsIndex(path)
    index.refresh()
    assert index.order == ["a/0/0", "b/0/0"] and index.bad_lines == 4


def test_bench_report_over_good_empty_half_written_and_wrong_kind_runs(tmp_path, capsys):
    good = mcpu_run(tmp_path, "m")
    with open(good / "results.jsonl", "a") as fh:  # junk appended by hand: the run is still read
        fh.write('[1]\nnull\n{"id": 7}\n')
    tau2 = tau2_run(tmp_path, "m")
    (tau2 / "metadata.json").write_text('{"report_columns": 5}')  # recomputed from results.jsonl anyway
    empty = tmp_path / "empty"
    empty.mkdir()
    half = tmp_path / "half"
    half.mkdir()
    (half / "config.json").write_text('{"benchmark": "tau2"')
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "config.json").write_text("[]")
    odd_mcpu = tmp_path / "odd-mcpu"
    odd_mcpu.mkdir()
    (odd_mcpu / "config.json").write_text('{"benchmark": "mcp-universe"}')
    a_file = tmp_path / "a-file"
    a_file.write_text("hi")
    runs = [good, tau2, empty, half, listed, odd_mcpu, a_file, tmp_path / "gone"]
    table = report.build_table(runs)
    assert table["present"] == ["mcp-universe", "tau2"]
    assert table["rows"][0]["benchmarks"]["mcp-universe"]["Browser"]["n"] == 5
    assert table["rows"][0]["benchmarks"]["tau2"]["Retail"]["value"] == 0.6
    reasons = {Path(s["run_dir"]).name: s["reason"] for s in table["skipped"]}
    assert reasons["empty"] == "no config.json: not a run directory"
    assert reasons["half"].startswith("config.json cannot be read")
    assert reasons["listed"] == "config.json is a list, not an object"
    assert "configuration without mcp_universe" in reasons["odd-mcpu"]
    assert reasons["a-file"] == "no config.json: not a directory"
    assert reasons["gone"] == "no config.json: no such directory"
    assert not any("Error" in r for r in reasons.values())  # said in words, not as an exception's class
    assert awm(["bench", "report", *map(str, runs), "--markdown"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.err.count("skipped ") == 6


# -- MCP-Universe ----------------------------------------------------------------------------------------------

@pytest.fixture
def bad_configs(tmp_path) -> Path:
    if not MCPU.is_dir():
        pytest.skip(f"MCP-Universe configs not found at {MCPU} (../shared is absent)")
    root = tmp_path / "configs"
    shutil.copytree(MCPU, root)
    folder = root / "browser_automation"
    for path in folder.iterdir():
        path.chmod(0o644)

    def edit(name: str, change) -> None:
        path = folder / f"{name}.json"
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))

    edit("playwright_sports_task_0003", lambda d: d.update(evaluators={"func": "json"}))
    edit("playwright_sports_task_0004", lambda d: d.update(question=None))
    edit("playwright_sports_task_0005", lambda d: d.update(mcp_servers="playwright"))
    edit("playwright_sports_task_0006", lambda d: d["evaluators"].append(None))
    (folder / "playwright_sports_task_0007.json").write_text('{"question": "cut off')
    suite = root / "browser_automation.yaml"
    suite.chmod(0o644)
    suite.write_text(suite.read_text().rstrip("\n") + "\n    - test/browser_automation/not_there_0001.json\n")
    return root


def test_mcpu_tasks_that_cannot_be_read_are_left_out_one_by_one(bad_configs, capsys):
    with pytest.raises(tasks.TaskError):  # without a problems list: raised, as before
        tasks.load_benchmark(bad_configs, ["browser"], env={})
    problems: list[str] = []
    loaded = tasks.load_benchmark(bad_configs, ["browser"], env={}, problems=problems)
    assert len(loaded) == 39 - 5 and len(problems) == 6
    said = "\n".join(problems)
    for expected in ("evaluators is a dict, not a list", "no question", "mcp_servers is a str, not a list",
                     "evaluator 1 has no func", "cannot read task", "not_there_0001.json"):
        assert expected in said
    assert awm(["bench", "mcp-universe", "tasks", "--mcp-universe", str(bad_configs), "--domain", "browser"]) == 0
    captured = capsys.readouterr()
    assert "Browser: 34 tasks" in captured.out and captured.err.count("warning:") == 6
    answers = bad_configs / "answers.json"
    answers.write_text(json.dumps({"playwright_sports_task_0001": {"Bronny James": "28.1", "Markieff Morris": "30.4"},
                                   "no_such_task": "x"}))
    assert awm(["bench", "mcp-universe", "score", "--answers", str(answers), "--mcp-universe", str(bad_configs),
                "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [(r["id"], r["label"]) for r in result["tasks"]] == [("browser_automation/playwright_sports_task_0001",
                                                                 "pass")]  # an object answer is read JSON-encoded
    assert "'no_such_task': no such task" in captured.err
    answers.write_text("[1]")
    assert awm(["bench", "mcp-universe", "score", "--answers", str(answers), "--mcp-universe",
                str(bad_configs)]) == 2
    assert "not an object" in capsys.readouterr().err


def test_a_bad_server_entry_stops_only_that_server():
    parsed = servers.parse_servers({"mcpServers": {
        "ok": {"command": "python3", "args": ["-m", "x"]},
        "number": 5, "env-list": {"command": "x", "env": ["A"]}, "args-str": {"command": "x", "args": "-m x"},
        "sse": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
        "needs-var": {"command": "x", "args": ["${AWM_TEST_SURELY_UNSET}"]}}}, env={})
    parsed["ok"].check_startable()
    for name, why in (("number", "not an object"), ("env-list", "env is a list, not an object"),
                      ("args-str", "args is a str, not a list"), ("sse", "SSE transport"),
                      ("needs-var", "AWM_TEST_SURELY_UNSET")):
        with pytest.raises(servers.ServerConfigError, match=why):
            parsed[name].check_startable()


# -- τ²-bench --------------------------------------------------------------------------------------------------

def _data_with_broken_retail(tmp_path: Path) -> Path:
    """The airline fixture with a malformed task (its split still runs without it), and a retail domain with no
    database."""
    root = tmp_path / "tau2"
    shutil.copytree(FIXTURE, root)
    tasks_file = root / "domains" / "airline" / "tasks.json"
    items = json.loads(tasks_file.read_text())
    items[0]["evaluation_criteria"]["actions"] = {"not": "a list"}
    tasks_file.write_text(json.dumps(items))
    retail = root / "domains" / "retail"
    retail.mkdir()
    (retail / "policy.md").write_text("Be helpful.")
    (retail / "tasks.json").write_text(json.dumps(items[1:2]))
    return root


def test_a_malformed_task_leaves_its_split_usable_and_a_broken_domain_does_not_stop_the_others(tmp_path, capsys):
    root = _data_with_broken_retail(tmp_path)
    airline = Tau2Data(root).domain("airline")
    base = [t.id for t in airline.split_tasks("base")]
    bad_id = json.loads((root / "domains" / "airline" / "tasks.json").read_text())[0]["id"]
    assert bad_id not in base and len(base) == 3
    assert any("left out" in i.message and "the rest is used" in i.message for i in airline.issues)
    config = Tau2Config(data_dir=str(root), domains=["airline", "retail"])
    with pytest.raises(RunRefused, match="retail: no database"):
        preflight(config)
    skipped: dict[str, str] = {}
    _, chosen = preflight(config, skipped)
    assert list(chosen) == ["airline"] and "no database" in skipped["retail"]
    with pytest.raises(RunRefused, match="retail"):
        preflight(Tau2Config(data_dir=str(root), domains=["retail"]), {})  # nothing left to run
    out = tmp_path / "run"
    script = {"responses": [{"content": "Thanks, that is all. ###STOP###"}]}
    with FakeLLMServer(script) as server:
        code = awm(["bench", "tau2", "run", "--tau2-data", str(root), "--domain", "airline", "retail",
                    "--model", "scripted", "--base-url", server.url, "--out", str(out), "--quiet"])
    assert code == 0
    assert "warning: not run: retail: no database" in capsys.readouterr().err
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["rollouts"] == 3 and "retail" in meta["skipped_domains"]
    assert any("not run: retail" in n for n in meta["report_columns"]["notes"])


def test_score_reports_malformed_simulations_instead_of_scoring_them(tmp_path, capsys):
    data = json.loads((FIXTURE / "simulations_airline.json").read_text())
    good = data["simulations"][0]

    def variant(sid: str, change) -> dict:
        sim = json.loads(json.dumps(good))
        sim["id"] = sid
        change(sim)
        return sim

    data["simulations"] = [
        variant("ok", lambda s: None),
        variant("no-messages", lambda s: s.pop("messages")),
        variant("no-reason", lambda s: s.pop("termination_reason")),
        variant("messages-dict", lambda s: s.update(messages={"a": 1})),
        variant("args-string", lambda s: s["messages"][2]["tool_calls"][0].update(arguments="{}")),
        variant("null-message", lambda s: s["messages"].insert(0, None)),
    ]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    assert awm(["bench", "tau2", "score", str(path), "--tau2-data", str(FIXTURE), "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["simulations"]}
    assert rows["ok"]["reward"] == 1.0
    for sid, why in (("no-messages", "no messages"), ("no-reason", "no termination_reason"),
                     ("messages-dict", "messages is a dict"), ("args-string", "arguments are not an object"),
                     ("null-message", "message #0 is not an object")):
        assert rows[sid]["status"] == "error" and rows[sid]["reward"] is None, sid
        assert why in rows[sid]["error"], sid
