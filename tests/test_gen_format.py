"""``awm gen`` writes its files in the released format (issue 28, item 7): every row has the keys and types of
AgentWorldModel-1K's rows (``../shared/data/awm-real``), ``db_path`` is relative as AWM-1K writes it
(``./outputs/databases/<norm>.db`` for a folder named ``outputs``), and the folder still works after being moved."""
from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

from awm_engine.agent.scripted_llm import FakeLLMServer
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.data.names import normalize_scenario_name

sys.path.insert(0, str(Path(__file__).parent))
from gen_script import SEEDS, script  # noqa: E402

NESTED = {"gen_db.jsonl": ("db_schema", "tables"), "gen_sample.jsonl": ("sample_data", "tables"),
          "gen_spec.jsonl": ("api_spec", "api_groups")}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def shape(row: dict) -> dict[str, str]:
    return {k: type(v).__name__ for k, v in row.items()}


def released_db_path(scenario: str) -> str:
    return f"./outputs/databases/{normalize_scenario_name(scenario)}.db"


def test_generated_files_have_the_released_shape_and_survive_a_move(awm_real, tmp_path, capsys, monkeypatch):
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("".join(json.dumps(s) + "\n" for s in SEEDS))
    out = tmp_path / "first" / "outputs"  # the reference's layout: the data in ./outputs/ of the working directory
    with FakeLLMServer(script()) as llm:
        assert awm(["gen", "all", "--seeds", str(seeds), "--out", str(out), "--model", "gen", "--base-url", llm.url,
                    "-n", "1", "--tasks", "3", "--verifier-mode", "code"]) == 0
    capsys.readouterr()

    # every released file's rows against ours: the same keys with the same types, the same nested keys
    compared = 0
    for released in sorted(awm_real.glob("gen_*.jsonl")):
        ours_path = out / released.name
        if released.name == "gen_verifier.jsonl":  # awm-real's verifiers are code-mode rows in the sql file
            ours_path = out / "gen_verifier.pure_code.jsonl"
        theirs, ours = rows(released), rows(ours_path)
        assert ours, ours_path
        assert {json.dumps(shape(r)) for r in ours} == {json.dumps(shape(r)) for r in theirs}, released.name
        if released.name in NESTED:
            key, inner = NESTED[released.name]
            assert {tuple(sorted(r[key])) for r in ours} == {tuple(sorted(r[key])) for r in theirs}
            assert ({tuple(sorted(x)) for r in ours for x in r[key][inner]}
                    <= {tuple(sorted(x)) for r in theirs for x in r[key][inner]}), released.name
        if "verifier" in released.name:
            assert {tuple(sorted(r["verification"])) for r in ours} == {tuple(sorted(r["verification"]))
                                                                        for r in theirs}
        compared += 1
    assert compared == 7

    # db_path: relative, exactly the released form (which every released row follows)
    for name in ("gen_db.jsonl", "gen_envs.jsonl"):
        assert all(r["db_path"] == released_db_path(r["scenario"]) for r in rows(awm_real / name))
        assert [r["db_path"] for r in rows(out / name)] == ["./outputs/databases/tiny_lending_library.db"]
    assert str(tmp_path) not in "".join((out / n).read_text() for n in ("gen_db.jsonl", "gen_envs.jsonl"))

    # moved: the reference resolves db_path against its working directory (the folder's parent; spec §4.2)
    moved = tmp_path / "elsewhere" / "outputs"
    moved.parent.mkdir()
    shutil.move(str(out), str(moved))
    monkeypatch.chdir(moved.parent)
    for name in ("gen_db.jsonl", "gen_envs.jsonl"):
        for r in rows(moved / name):
            db = Path(r["db_path"])
            assert db.resolve() == (moved / "databases" / f"{normalize_scenario_name(r['scenario'])}.db").resolve()
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            assert {"users", "books", "loans"} <= tables
    assert not Catalog.load([moved]).errors
    assert awm(["db", "build", "--data", str(moved), "--out", str(moved / "databases")]) == 0  # reset_db's step
    capsys.readouterr()
    assert awm(["env", "test", "--data", str(moved), "--json"]) == 0
    health = json.loads(capsys.readouterr().out)
    assert health[0]["status"] == "ok" and health[0]["tools"] == 2
