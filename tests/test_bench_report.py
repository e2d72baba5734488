"""`awm bench report` (issue 16): one table across an AWM evaluation, BFCLv3, τ²-bench and MCP-Universe runs, one row
per model, n and confidence intervals where they apply; a benchmark without runs leaves its group empty."""
from __future__ import annotations

import json
from pathlib import Path

from awm_engine.bench import report
from awm_engine.bench.mcp_universe import run as mcpu
from awm_engine.cli import main
from awm_engine.data.run_formats import CONFIG, METADATA, EvalConfig
from awm_engine.eval.results import ResultsWriter


def _results(out: Path, records: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    writer = ResultsWriter(out / "results.jsonl")
    for r in records:
        writer.write(r)
    writer.close()


def awm_run(root: Path, model: str) -> Path:
    from awm_engine.eval.batch import write_metadata

    out = root / f"awm-{model}"
    config = EvalConfig(data_dirs=["x"], endpoint={"model": model, "base_url": "http://127.0.0.1:1/v1"})
    _results(out, [{"id": f"s/{i}/0", "scenario": "s", "task_id": i, "sample": 0, "status": "ok",
                    "label": "complete" if i < 3 else "incomplete", "reward": 1.0 if i < 3 else 0.0,
                    "has_verdict": True} for i in range(4)])
    (out / CONFIG.file).write_text(json.dumps(config.to_dict()))
    write_metadata(out, config)
    return out


def bfcl_run(root: Path, model: str) -> Path:
    """A BFCL run as `awm bench bfcl run` leaves it: 8 of 10 `simple` entries correct."""
    from awm_engine.bench.bfcl.run import BfclConfig, write_metadata

    out = root / f"bfcl-{model}"
    config = BfclConfig(categories=["simple"], endpoint={"model": model})
    _results(out, [{"id": f"simple_python_{i}/0", "scenario": "simple", "task_id": f"simple_python_{i}", "sample": 0,
                    "status": "ok", "label": "correct" if i < 8 else "incorrect"} for i in range(10)])
    (out / CONFIG.file).write_text(json.dumps(config.to_dict()))
    write_metadata(out, config)
    return out


def tau2_run(root: Path, model: str, passes: dict[str, int] | None = None, recorded: bool = True) -> Path:
    """A τ²-bench run as recorded (k = 1: pass^1 is the mean reward): by default airline 5/10, retail 6/10, telecom
    2/10, with its report_columns in metadata.json (the interface; ``recorded``), read through the τ² package when
    it is there."""
    out = root / f"tau2-{model}"
    passes = passes or {"airline": 5, "retail": 6, "telecom": 2}
    _results(out, [{"id": f"tau2_{d}/{i}/0", "scenario": f"tau2_{d}", "task_id": str(i), "sample": 0,
                    "status": "ok", "reward": 1.0 if i < p else 0.0, "stop_reason": "user_stop"}
                   for d, p in passes.items() for i in range(10)])
    (out / CONFIG.file).write_text(json.dumps(CONFIG.stamp({"benchmark": "tau2", "data_dir": str(root),
                                                            "domains": list(passes), "endpoint": {"model": model},
                                                            "k": 1})))
    if not recorded:
        return out
    columns = {d.capitalize(): report.cell(p / 10, 10, proportion=True) for d, p in passes.items()}
    columns["Avg"] = report.cell(13 / 30)
    (out / METADATA.file).write_text(json.dumps(METADATA.stamp({"benchmark": "tau2", "model": model,
                                                                "report_columns": {"benchmark": "tau2",
                                                                                   "model": model,
                                                                                   "columns": columns}})))
    return out


def mcpu_run(root: Path, model: str) -> Path:
    out = root / f"mcpu-{model}"
    config = mcpu.McpuConfig(mcp_universe="/nowhere", domains=["browser_automation"], endpoint={"model": model},
                             simulation=True)
    records = [{"id": f"browser_automation/t{i}", "scenario": "browser_automation", "task_id": f"t{i}", "sample": 0,
                "domain": "Browser", "awm_column": "Browser", "status": "ok", "label": "pass" if i < 2 else "fail",
                "steps": 3, "verdict": {"evaluator_score": 1.0 if i < 2 else 0.0, "needs": []}} for i in range(5)]
    records.append({"id": "multi_server/m1", "scenario": "multi_server", "task_id": "m1", "sample": 0,
                    "domain": "Web", "awm_column": "Multi", "status": "ok", "label": "needs",
                    "verdict": {"needs": ["notion"], "evaluator_score": None}})
    _results(out, records)
    (out / CONFIG.file).write_text(json.dumps(config.to_dict()))
    mcpu.write_metadata(out, config)
    return out


def test_one_row_per_model_across_four_benchmarks(tmp_path, capsys):
    runs = [awm_run(tmp_path, "m1"), bfcl_run(tmp_path, "m1"), tau2_run(tmp_path, "m1"), mcpu_run(tmp_path, "m1"),
            awm_run(tmp_path, "m2"), mcpu_run(tmp_path, "m2")]
    table = report.build_table(runs)
    assert [r["model"] for r in table["rows"]] == ["m1", "m2"]
    m1 = table["rows"][0]["benchmarks"]
    assert set(m1) == {"awm", "bfcl", "tau2", "mcp-universe"}
    assert m1["awm"]["Completion"]["value"] == 0.75 and m1["awm"]["Completion"]["n"] == 4
    lo, hi = m1["awm"]["Completion"]["ci95"]
    assert lo < 0.75 < hi
    from awm_engine.bench.bfcl.run import current_metadata

    bfcl_meta = current_metadata(runs[1])
    # only `simple` ran: Non-Live and Overall are over it and marked partial, Live and Multi-Turn are – (issue 24;
    # a complete run keeps BFCL's values: test_bench_partial)
    assert bfcl_meta["categories"]["simple"]["accuracy"] == 0.8
    assert m1["bfcl"]["Overall"] | {"partial": None} == {"value": 0.8, "n": 10, "ci95": None, "partial": None}
    assert m1["bfcl"]["Overall"]["partial"]["covered"] == 1 and m1["bfcl"]["Overall"]["partial"]["of"] == 17
    assert m1["bfcl"]["Non-Live"]["value"] == 0.8 and m1["bfcl"]["Live"]["value"] is None
    assert m1["tau2"]["Retail"]["n"] == 10 and m1["tau2"]["Retail"]["value"] == 0.6
    assert abs(m1["tau2"]["Avg"]["value"] - 13 / 30) < 1e-9
    browser = m1["mcp-universe"]["Browser"]
    assert browser["value"] == 0.4 and browser["n"] == 5 and browser["ci95"]
    # the official rate divides by every task: the Multi task (needs Notion, not decided here) is not passed
    assert m1["mcp-universe"]["Overall"]["n"] == 6 and m1["mcp-universe"]["Overall"]["value"] == 2 / 6
    notes = " ".join(table["rows"][0]["notes"])
    assert "offline simulation" in notes and "notion 1" in notes

    assert main(["bench", "report", *map(str, runs), "--markdown"]) == 0
    text = capsys.readouterr().out
    assert "| Model | AWM environments |" in text and "BFCLv3" in text and "τ²-bench" in text
    assert "MCP-Universe" in text and "40.0 [" in text and "(n=5)" in text
    m2 = next(line for line in text.splitlines() if line.startswith("| m2 |"))
    assert m2.count("–") >= 8  # no BFCL or τ²-bench runs for m2: those groups stay empty

    assert main(["bench", "report", *map(str, runs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["present"] == ["awm", "bfcl", "mcp-universe", "tau2"]


def test_missing_benchmarks_and_unreadable_runs(tmp_path):
    table = report.build_table([mcpu_run(tmp_path, "m"), tmp_path / "nothing"])
    assert table["skipped"][0]["reason"].startswith("no config.json")
    text = report.markdown(table)
    assert "No runs given for: AWM environments, BFCLv3, τ²-bench." in text
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / CONFIG.file).write_text(json.dumps({"benchmark": "someday"}))
    assert "without report columns" in report.build_table([odd])["skipped"][0]["reason"]


def test_cli_exits_1_when_no_run_can_be_read(tmp_path, capsys):
    assert main(["bench", "report", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert "skipped" in err and "no run could be read" in err


def test_eval_list_shows_benchmark_runs_among_evaluations(tmp_path, capsys):
    mcpu_run(tmp_path, "m1")
    awm_run(tmp_path, "m2")
    assert main(["eval", "list", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "mcpu-m1" in out and "awm-m2" in out
