"""A data directory holding every kind of bad scenario seen in real or attacker-written data, next to good
ones: every verb (and the TUI) reports each bad one and finishes the good ones."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from tinyenv import FOOTER, HEADER, SAMPLE, SCHEMA

from awm_engine.cli import main as awm

DICT_EXAMPLES = '''
class CountOut(BaseModel):
    n: int

@app.get("/api/count_since/{days}", summary="Count since", description="Notes of the last days.", tags=["x"], operation_id="count_since", response_model=CountOut)
async def count_since(days: int = Path(..., examples={"example": {"value": 15}}), limit: int = Query(10, examples={"example": {"value": 5}})):
    return CountOut(n=0)
'''

STATEFUL = '''
SEEN = []

class SeenOut(BaseModel):
    seen: list[str]

@app.post("/api/seen", summary="Remember", description="Remember.", tags=["x"], operation_id="remember", response_model=SeenOut)
async def remember(req: NoteIn):
    SEEN.append(req.text)
    return SeenOut(seen=SEEN)
'''

WEIRD_SCHEMA = {"tables": [{"name": 'we"ird', "ddl": 'CREATE TABLE "we""ird" (id INTEGER PRIMARY KEY, v TEXT)',
                            "indexes": []}, *SCHEMA["tables"]]}
WEIRD_SAMPLE = {"tables": [{"table_name": 'we"ird', "insert_statements": ['INSERT INTO "we""ird" (v) VALUES (\'x\')']},
                           *SAMPLE["tables"]]}

SCENARIOS = {
    # name: (code, db_schema, sample_data)
    "Good Notes": (HEADER + FOOTER, SCHEMA, SAMPLE),
    "Dict Examples": (HEADER.replace("from fastapi import FastAPI, Query", "from fastapi import FastAPI, Path, Query")
                      + DICT_EXAMPLES + FOOTER, SCHEMA, SAMPLE),
    'We"ird Table': (HEADER + FOOTER, WEIRD_SCHEMA, WEIRD_SAMPLE),
    "Shop [/] [bold": (HEADER + FOOTER, SCHEMA, SAMPLE),
    "Loops At Import": (HEADER + "\nwhile True:\n    pass\n" + FOOTER, SCHEMA, SAMPLE),
    "Sleeps At Import": (HEADER + "\nimport time as _t\n_t.sleep(1000)\n" + FOOTER, SCHEMA, SAMPLE),
    "Bad Indexes": (HEADER + FOOTER, {"tables": [{**SCHEMA["tables"][0], "indexes": 5}]}, SAMPLE),
    "Syntax Broken": ("def broken(:\n", SCHEMA, SAMPLE),
    "Stateful": (HEADER + STATEFUL + FOOTER, SCHEMA, SAMPLE),
}
KEYS = {"Good Notes": "good_notes", "Dict Examples": "dict_examples", 'We"ird Table': "we_ird_table",
        "Shop [/] [bold": "shop_bold", "Loops At Import": "loops_at_import", "Sleeps At Import": "sleeps_at_import",
        "Bad Indexes": "bad_indexes", "Syntax Broken": "syntax_broken", "Stateful": "stateful"}
BROKEN = {"loops_at_import", "sleeps_at_import", "syntax_broken"}


@pytest.fixture
def bad_data(tmp_path, monkeypatch):
    monkeypatch.setenv("AWM_LOAD_TIMEOUT", "15")  # generous: a good scenario must load even on a busy machine
    root = tmp_path / "data"
    root.mkdir()
    files: dict[str, list] = {k: [] for k in ("gen_scenario", "gen_tasks", "gen_db", "gen_sample", "gen_envs",
                                               "gen_verifier.pure_code")}
    for name, (code, schema, sample) in SCENARIOS.items():
        files["gen_scenario"].append({"name": name, "description": f"{name} [red]test"})
        files["gen_tasks"].append({"scenario": name, "tasks": ["Add a note saying 'hi'.", "List notes."]})
        files["gen_db"].append({"scenario": name, "db_schema": schema})
        files["gen_sample"].append({"scenario": name, "sample_data": sample})
        files["gen_envs"].append({"scenario": name, "full_code": code})
        for task in (0, 1):
            files["gen_verifier.pure_code"].append({"scenario": KEYS[name], "task_idx": task, "verification": {
                "code": "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
                        "    return {'result': 'others'}\n"}})
    for file, rows in files.items():
        (root / f"{file}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_catalog_and_db_build_report_each_bad_one(bad_data, tmp_path, capsys):
    assert awm(["catalog", "list", "--data", str(bad_data), "--json"]) == 0
    listed = {r["scenario"] for r in json.loads(capsys.readouterr().out)["scenarios"]}
    assert listed == set(KEYS.values())
    for key in KEYS.values():
        assert awm(["catalog", "show", key, "--data", str(bad_data)]) == 0, key
    capsys.readouterr()
    assert awm(["db", "build", "--data", str(bad_data), "--out", str(tmp_path / "dbs"), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    built = {r["scenario"]: r for r in (payload if isinstance(payload, list) else payload["reports"])}
    assert built["we_ird_table"]["row_counts"] == {"notes": 2, 'we"ird': 1}
    assert built["bad_indexes"]["tables_failed"] == 1 and built["good_notes"]["tables_failed"] == 0


def test_env_test_all_reports_each_bad_one_and_finishes_the_good_ones(bad_data, capsys):
    awm(["env", "test", "--all", "--data", str(bad_data), "--json", "--workers", "2"])
    payload = json.loads(capsys.readouterr().out)
    reports = {r["scenario"]: r for r in (payload if isinstance(payload, list) else payload["reports"])}
    assert set(reports) == set(KEYS.values())
    for key in BROKEN:
        assert reports[key]["status"] == "broken" and reports[key]["error"], key
    assert "did not finish loading" in reports["loops_at_import"]["error"]
    for key in set(KEYS.values()) - BROKEN:
        assert reports[key]["loads"], (key, reports[key].get("error"))
    assert reports["good_notes"]["status"] == "ok"
    assert reports["dict_examples"]["invalid_schemas"]  # flagged, not a crash


def test_eval_run_gives_each_bad_one_an_error_and_the_good_ones_verdicts(bad_data, tmp_path, capsys):
    out = tmp_path / "run"
    assert awm(["eval", "run", "--data", str(bad_data), "--policy", "immediate", "--out", str(out), "--quiet",
                "--workers", "2"]) == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_scenario: dict[str, list] = {}
    for r in records:
        by_scenario.setdefault(r["scenario"], []).append(r)
    assert set(by_scenario) == set(KEYS.values()) and len(records) == 2 * len(KEYS)
    for key in BROKEN:
        assert all(r["status"] == "error" and r["error_kind"] == "environment_error" for r in by_scenario[key]), key
    for key in set(KEYS.values()) - BROKEN:
        assert all(r["status"] == "ok" and r["has_verdict"] for r in by_scenario[key]), key


async def test_tui_reports_bad_scenarios_and_keeps_running(bad_data):
    from textual.widgets import Static

    from awm_tui.app import AwmApp
    from awm_tui.screens.environment import EnvironmentScreen
    from awm_tui.screens.play import PlayScreen

    app = AwmApp([str(bad_data)], cursor_blink=False)
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        for key in ("bad_indexes", "shop_bold", "syntax_broken", "we_ird_table"):
            app.open_environment(key)
            await pilot.pause()
            await app.workers.wait_for_complete()
            assert isinstance(app.screen, EnvironmentScreen)
            for tab in "12345":
                await pilot.press(tab)
                await pilot.pause()
            await app.workers.wait_for_complete()
            app.pop_screen()
            await pilot.pause()
        app.push_screen(PlayScreen(app.catalog.get("syntax_broken"), 0))
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, PlayScreen)
        assert app.screen.sub_title == "could not open the episode"
        texts = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "syntax" in texts.lower()
