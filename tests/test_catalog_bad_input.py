"""Bad data: malformed lines, missing pieces and duplicate names are reported, never silently dropped."""
import json
from pathlib import Path

from awm_engine.data.catalog import Catalog


def write(path: Path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def make_dir(tmp_path: Path, names=("Alpha Shop", "Beta Bank")) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    write(d / "gen_scenario.jsonl", [{"name": n, "description": f"{n} desc"} for n in names])
    write(d / "gen_tasks.jsonl", [{"scenario": n, "tasks": [f"task {i}" for i in range(3)]} for n in names])
    write(d / "gen_db.jsonl", [{"scenario": n, "db_schema": {"tables": [
        {"name": "t", "ddl": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);", "indexes": []}]}} for n in names])
    write(d / "gen_sample.jsonl", [{"scenario": n, "sample_data": {"tables": [
        {"table_name": "t", "insert_statements": ["INSERT INTO t (id, v) VALUES (1, 'x');"]}]}} for n in names])
    write(d / "gen_envs.jsonl", [{"scenario": n, "full_code": "@app.get('/a')\nasync def a():\n    return 1\n"}
                                 for n in names])
    return d


def test_malformed_line_names_file_and_line_and_others_load(tmp_path):
    d = make_dir(tmp_path)
    lines = (d / "gen_tasks.jsonl").read_text().splitlines()
    (d / "gen_tasks.jsonl").write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    catalog = Catalog.load([d])
    assert {s.key for s in catalog} == {"alpha_shop", "beta_bank"}
    assert len(catalog.get("beta_bank").tasks) == 3
    bad = [i for i in catalog.issues if i.level == "error" and "invalid JSON" in i.message]
    assert len(bad) == 1 and bad[0].path.endswith("gen_tasks.jsonl") and bad[0].line == 2
    assert "gen_tasks.jsonl:2:" in str(bad[0])


def test_blank_line_and_non_object_are_reported(tmp_path):
    d = make_dir(tmp_path)
    with open(d / "gen_db.jsonl", "a") as fh:
        fh.write("\n[1, 2]\n")
    catalog = Catalog.load([d])
    msgs = [(i.line, i.message) for i in catalog.issues if i.path and i.path.endswith("gen_db.jsonl")]
    assert (3, "blank line (the AWM reference loader rejects these)") in msgs
    assert any(line == 4 and "expected a JSON object" in m for line, m in msgs)
    assert len(catalog) == 2


def test_missing_schema_and_sample_are_reported(tmp_path):
    d = make_dir(tmp_path)
    write(d / "gen_db.jsonl", [json.loads((d / "gen_db.jsonl").read_text().splitlines()[0])])
    write(d / "gen_sample.jsonl", [json.loads((d / "gen_sample.jsonl").read_text().splitlines()[1])])
    catalog = Catalog.load([d])
    alpha, beta = catalog.get("Alpha Shop"), catalog.get("Beta Bank")
    assert any("no sample data" in i.message for i in alpha.issues)
    assert any("no database schema" in i.message for i in beta.issues)
    assert alpha.sample_data is None and beta.db_schema is None


def test_duplicate_names_warn_and_follow_the_reference_winner(tmp_path):
    d = make_dir(tmp_path, names=("Alpha Shop",))
    with open(d / "gen_tasks.jsonl", "a") as fh:
        fh.write(json.dumps({"scenario": "alpha-shop", "tasks": ["second"]}) + "\n")
    with open(d / "gen_envs.jsonl", "a") as fh:
        fh.write(json.dumps({"scenario": "ALPHA SHOP!", "full_code": "@app.get('/a')\n@app.get('/b')\n"}) + "\n")
    write(d / "gen_verifier.jsonl", [
        {"scenario": "alpha_shop", "task_idx": 0, "verification": {"code": "def verify_task(a, b):\n  return {'n': 1}"}},
        {"scenario": "alpha_shop", "task_idx": 0, "verification": {"code": "def verify_task(a, b):\n  return {'n': 2}"}},
        {"scenario": "alpha_shop", "task_idx": "1", "verification": {"code": "def verify_task(a, b):\n  return {}"}},
    ])
    catalog = Catalog.load([d])
    s = catalog.get("alpha_shop")
    assert s.tasks == ["task 0", "task 1", "task 2"]  # tasks: first row wins
    assert s.tool_count == 2 and "/b" in s.code  # environment code: last row wins
    assert "'n': 1" in s.verifier(0, "sql").code  # verifiers: first row wins
    assert s.verifier(1, "sql") is None  # task_idx "1" is a string: never matches
    warnings = [i.message for i in catalog.issues if i.level == "warning"]
    assert any("duplicate normalized name 'alpha_shop' in gen_tasks.jsonl" in w and "first wins" in w for w in warnings)
    assert any("gen_envs.jsonl" in w and "last wins" in w for w in warnings)
    assert any("duplicate row for task 0" in w for w in warnings)
    assert any("task_idx '1' is not an integer" in w for w in warnings)


def test_index_cache_is_invalidated_when_the_file_changes(tmp_path):
    d = make_dir(tmp_path)
    assert len(Catalog.load([d]).get("alpha_shop").tasks) == 3
    rows = [json.loads(x) for x in (d / "gen_tasks.jsonl").read_text().splitlines()]
    rows[0]["tasks"].append("a longer fourth task")
    write(d / "gen_tasks.jsonl", rows)
    assert len(Catalog.load([d]).get("alpha_shop").tasks) == 4


def test_missing_directory_is_an_error(tmp_path):
    catalog = Catalog.load([tmp_path / "nowhere"])
    assert len(catalog) == 0 and catalog.errors[0].message == "no such directory"
    (tmp_path / "afile").write_text("x")
    catalog = Catalog.load([tmp_path / "afile"])
    assert len(catalog) == 0 and catalog.errors[0].message == "not a directory"


def test_markup_in_names_and_indexes_that_are_not_a_list(tmp_path, capsys):
    """A scenario named like rich markup and a table whose 'indexes' is a number: listed, shown and built,
    each problem reported, nothing raised."""
    import json as _json

    from awm_engine.cli import main as awm

    name = "Shop [/] [bold"
    rows = {"gen_scenario": {"name": name, "description": "[bold]x"},
            "gen_tasks": {"scenario": name, "tasks": ["[red]do it"]},
            "gen_db": {"scenario": name, "db_schema": {"tables": [
                {"name": "t[/]", "ddl": 'CREATE TABLE "t[/]" (id INTEGER PRIMARY KEY)', "indexes": 5}]}},
            "gen_sample": {"scenario": name, "sample_data": {"tables": []}}}
    for file, row in rows.items():
        (tmp_path / f"{file}.jsonl").write_text(_json.dumps(row) + "\n")
    assert awm(["catalog", "list", "--data", str(tmp_path)]) == 0
    assert "shop_bold" in capsys.readouterr().out
    assert awm(["catalog", "show", "shop_bold", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "'indexes' is a int, not a list" in out and "[red]do it" in out
    # its only table fails: no usable database was built (exit 1, docs/exit-codes.md)
    assert awm(["db", "build", "--data", str(tmp_path), "--out", str(tmp_path / "dbs")]) == 1
    assert "not iterable" in capsys.readouterr().out
