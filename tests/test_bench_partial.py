"""Partial runs say so (issue 24): in ``awm bench report`` (text and Markdown) and the TUI's table across benchmarks,
a BFCL category or a τ²/MCP-Universe domain that was not run is ``–``, never 0.0, and an aggregate over partial
coverage (BFCL's groups and Overall, τ²'s Avg, MCP-Universe's Overall) is computed over what was run and marked
``(partial: k/N …)`` with a footnote naming what was not run. A complete run keeps the official formulas and shows
no partial marker."""
from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Static

from awm_engine.bench import report
from awm_engine.bench.bfcl.categories import CATEGORIES
from awm_engine.bench.mcp_universe import run as mcpu
from awm_engine.cli import main
from awm_engine.data.run_formats import CONFIG
from awm_tui.app import AwmApp
from awm_tui.screens.report import BenchReportScreen
from tests.test_bench_report import _results
from tests.test_bench_report import tau2_run as recorded_tau2_run
from tests.test_tui_mcp_universe import text_of
from tests.test_tui_snapshots import wait_until


def bfcl_run(root: Path, model: str, categories: list[str], per: int = 4) -> Path:
    """A BFCL run over ``categories``, ``per`` entries each, a different number correct in each category."""
    from awm_engine.bench.bfcl.run import BfclConfig, write_metadata

    out = root / f"bfcl-{model}"
    config = BfclConfig(categories=categories, endpoint={"model": model}, limit=per)
    records = []
    for k, name in enumerate(categories):
        wheel = CATEGORIES[name].wheel
        records += [{"id": f"{wheel}_{i}/0", "scenario": name, "task_id": f"{wheel}_{i}", "sample": 0,
                     "status": "ok", "label": "correct" if i < (k % per) + 1 else "incorrect"} for i in range(per)]
    _results(out, records)
    (out / CONFIG.file).write_text(json.dumps(config.to_dict()))
    write_metadata(out, config)
    return out


def tau2_run(root: Path, model: str, passes: dict[str, int]) -> Path:
    """A τ²-bench run (k = 1) of the domains in ``passes``, 10 tasks each, no metadata.json: read back by the τ²
    package from its results."""
    return recorded_tau2_run(root, model, passes, recorded=False)


def mcpu_run(root: Path, model: str, columns: tuple[str, ...] = ("Location", "Financial", "Browser", "Web",
                                                                     "Multi")) -> Path:
    """An MCP-Universe run with 5 tasks decided (pass or fail) in each of ``columns`` (the AWM paper's columns;
    all five by default): column k has k + 1 passes."""
    out = root / f"mcpu-{model}"
    config = mcpu.McpuConfig(mcp_universe="/nowhere", domains=["browser_automation"], endpoint={"model": model},
                             simulation=True)
    records = []
    for k, column in enumerate(columns):
        records += [{"id": f"{column.lower()}/t{i}", "scenario": column.lower(), "task_id": f"t{i}", "sample": 0,
                     "domain": column, "awm_column": column, "status": "ok", "label": "pass" if i <= k else "fail",
                     "steps": 3, "verdict": {"evaluator_score": 1.0 if i <= k else 0.0, "needs": []}}
                    for i in range(5)]
    _results(out, records)
    (out / CONFIG.file).write_text(json.dumps(config.to_dict()))
    mcpu.write_metadata(out, config)
    return out


def partial_runs(root: Path) -> list[Path]:
    """Model p: BFCL simple + live_simple only, τ² airline + retail only, MCP-Universe Financial + Browser only."""
    return [bfcl_run(root, "p", ["simple", "live_simple"]), tau2_run(root, "p", {"airline": 5, "retail": 6}),
            mcpu_run(root, "p", ("Financial", "Browser"))]


def complete_runs(root: Path) -> list[Path]:
    return [bfcl_run(root, "c", list(CATEGORIES)), tau2_run(root, "c", {"airline": 5, "retail": 6, "telecom": 2}),
            mcpu_run(root, "c")]


def _row(text: str, model: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {model} |"))


def _cells(table: dict, line: str) -> dict[str, str]:
    """A Markdown row's cells by "group/column"."""
    names = ["Model", *[f"{g}/{c}" for g, cols in report.layout(table)["groups"] for c in cols]]
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    assert len(cells) == len(names)
    return dict(zip(names, cells))


def test_partial_runs_show_dashes_and_partial_aggregates(tmp_path, capsys):
    table = report.build_table(partial_runs(tmp_path))
    (row,) = table["rows"]
    bfcl, tau2, mcp = (row["benchmarks"][b] for b in ("bfcl", "tau2", "mcp-universe"))
    # not run: no value at all (shown –), never 0
    assert bfcl["Multi-Turn"]["value"] is None and "Telecom" not in tau2
    assert all(c not in mcp for c in ("Location", "Web", "Multi"))
    # partial aggregates: over what was run, and marked
    simple, live_simple = 1 / 4, 2 / 4  # the first category has 1 of 4 correct, the second 2 of 4
    assert bfcl["Non-Live"]["value"] == simple and bfcl["Live"]["value"] == live_simple
    assert abs(bfcl["Overall"]["value"] - (simple + live_simple) / 2) < 1e-12
    assert bfcl["Non-Live"]["partial"]["covered"] == 1 and bfcl["Non-Live"]["partial"]["of"] == 7
    assert bfcl["Overall"]["partial"] | {"not_run": None} == {"covered": 2, "of": 17, "unit": "categories",
                                                              "not_run": None}
    assert "Multi-Turn (all its categories)" in bfcl["Overall"]["partial"]["not_run"]
    assert "partial" not in bfcl["Multi-Turn"]  # nothing ran: –, not a partial value
    assert abs(tau2["Avg"]["value"] - 0.55) < 1e-12
    assert tau2["Avg"]["partial"] == {"covered": 2, "of": 3, "unit": "domains", "not_run": ["Telecom"]}
    assert mcp["Overall"]["value"] == 3 / 10  # Financial 1/5, Browser 2/5: the micro-average over what ran
    assert mcp["Overall"]["partial"] == {"covered": 2, "of": 5, "unit": "domains",
                                         "not_run": ["Location", "Web", "Multi"]}

    text = report.markdown(table)
    line = _row(text, "p")
    assert "55.0 (partial: 2/3 domains)" in line and "(partial: 2/17 categories)" in line
    assert "(partial: 2/5 domains)" in line
    shown = _cells(table, line)
    assert not any(c.startswith("0.0") for c in shown.values())  # nothing not run shows as 0.0
    assert shown["BFCLv3/Multi-Turn"] == "–" and shown["τ²-bench/Telecom"] == "–"
    assert shown["MCP-Universe/Location"] == "–" and shown["MCP-Universe/Multi"] == "–"
    assert "– = not run or nothing scored (never counted as 0)" in text
    assert "τ²-bench Avg is partial (2/3 domains); not run or not scored: Telecom" in text

    for args in (["--markdown"], []):  # awm bench report's Markdown and its terminal table say the same
        assert main(["bench", "report", *map(str, partial_runs(tmp_path / "cli")), *args]) == 0
        out = capsys.readouterr().out
        assert "55.0 (partial: 2/3 domains)" in out and "BFCLv3 Overall is partial (2/17 categories)" in out
        assert _row(out, "p").count("–") >= 6


def test_complete_runs_keep_the_official_formulas_and_no_marker(tmp_path):
    from awm_engine.bench.bfcl.run import current_metadata

    runs = complete_runs(tmp_path)
    table = report.build_table(runs)
    (row,) = table["rows"]
    bfcl, tau2, mcp = (row["benchmarks"][b] for b in ("bfcl", "tau2", "mcp-universe"))
    official = current_metadata(runs[0])
    assert official["coverage"]["all"]["all"]
    assert bfcl["Overall"] == {"value": official["awm"]["overall"], "n": 4 * len(CATEGORIES), "ci95": None}
    for column, key in (("Non-Live", "non_live"), ("Live", "live"), ("Multi-Turn", "multi_turn")):
        assert bfcl[column]["value"] == official["awm"][key]
    assert abs(tau2["Avg"]["value"] - 13 / 30) < 1e-12
    assert mcp["Overall"]["value"] == 15 / 25 and mcp["Overall"]["n"] == 25
    assert not any("partial" in c for cols in row["benchmarks"].values() for c in cols.values())
    text = report.markdown(table)
    shown = _cells(table, _row(text, "c"))
    assert "partial" not in text
    assert [k for k, v in shown.items() if v == "–"] == ["AWM environments/Completion",
                                                         "AWM environments/Mean reward"]  # no awm eval run given


async def test_tui_table_shows_dashes_and_partial(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = partial_runs(Path("runs")) + complete_runs(Path("runs"))
    app = AwmApp(None, cursor_blink=False, runs_root=Path("runs"), report=runs)
    async with app.run_test(size=(300, 50)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, BenchReportScreen) and app.screen.table is not None,
                         what="the report's table")
        screen = app.screen
        assert screen.table == report.build_table(runs)  # the engine's table
        await wait_until(pilot, lambda: "(partial: 2/3 domains)" in text_of(screen.query_one("#report-table", Static)),
                         what="the partial marker in the table")
        table = text_of(screen.query_one("#report-table", Static))
        lines = table.splitlines()
        p_line = next(line for line in lines if line.strip().startswith("p "))
        c_line = next(line for line in lines if line.strip().startswith("c "))
        assert p_line.count("–") == 2 + 5 and "0.0" not in p_line.split()  # not run: –, never 0.0
        assert c_line.count("–") == 2  # only the AWM environments group (no awm eval run given)
        assert table.count("(partial:") == 5  # BFCL Non-Live, Live, Overall; τ² Avg; MCP-Universe Overall — all p's
        notes = text_of(screen.query_one("#report-notes", Static))
        assert "– = not run" in notes
        assert "p: τ²-bench Avg is partial (2/3 domains); not run or not scored: Telecom" in notes
        assert not [line for line in notes.splitlines() if line.startswith("- c:") and "partial" in line]
