"""The catalog on real AWM pipeline output (../shared/data/awm-real)."""
import json
import subprocess
import sys

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog

ROUTES_SCRIPT = """
import json, os, sys, types
os.environ['DATABASE_PATH'] = 'sqlite:///' + sys.argv[2]
code = json.loads(open(sys.argv[1]).read())
from fastapi.routing import APIRoute
module = types.ModuleType('generated_env')
exec(compile(code, 'generated_env', 'exec'), module.__dict__)
print(json.dumps(sorted(r.operation_id or r.unique_id for r in module.app.routes if isinstance(r, APIRoute))))
"""


def test_three_real_scenarios_with_ten_tasks(awm_real):
    catalog = Catalog.load([awm_real])
    assert sorted(s.key for s in catalog) == ["gofundme", "rover", "surveymonkey_apply"]
    assert catalog.issues == []
    for s in catalog:
        assert len(s.tasks) == 10
        assert s.verifier_coverage("code") == 10 and s.verifier_coverage("sql") == 0  # code mode, in gen_verifier.jsonl
        assert s.table_count == len(s.tables())
    assert catalog.get("SurveyMonkey Apply").name == "SurveyMonkey Apply"


def test_tool_counts_equal_routes_of_the_code(awm_real, tmp_path):
    catalog = Catalog.load([awm_real])
    for s in catalog:
        src = tmp_path / f"{s.key}.json"
        src.write_text(json.dumps(s.code))
        out = subprocess.run([sys.executable, "-c", ROUTES_SCRIPT, str(src), str(tmp_path / f"{s.key}.db")],
                             capture_output=True, text=True, check=True).stdout
        routes = json.loads(out)
        assert s.tool_count == len(routes), s.key
        assert sorted(t.name for t in s.tools()) == routes


def test_cli_catalog_list_json(awm_real, capsys):
    assert awm(["catalog", "list", "--data", str(awm_real), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["scenario"]: r for r in data["scenarios"]}
    assert set(rows) == {"gofundme", "rover", "surveymonkey_apply"}
    assert {k: r["tasks"] for k, r in rows.items()} == {"gofundme": 10, "rover": 10, "surveymonkey_apply": 10}
    assert {k: r["tools"] for k, r in rows.items()} == {"gofundme": 11, "rover": 17, "surveymonkey_apply": 26}
    assert all(r["verifiers"] == {"sql": 0, "code": 10} for r in rows.values())


def test_cli_catalog_show(awm_real, capsys):
    assert awm(["catalog", "show", "gofundme", "--data", str(awm_real), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "GoFundMe" and len(data["tasks"]) == 10 and len(data["tools"]) == 11
    campaigns = next(t for t in data["tables"] if t["name"] == "campaigns")
    assert campaigns["primary_key"] == ["id"]
    assert {"column": "owner_user_id", "other_table": "users", "other_column": "id"} in campaigns["foreign_keys"]
    tool = next(t for t in data["tools"] if t["name"] == "create_campaign")
    assert tool["method"] == "POST" and any(p["name"] == "title" and p["required"] for p in tool["params"])
    assert awm(["catalog", "show", "GoFundMe", "--data", str(awm_real)]) == 0
    assert "create_campaign" in capsys.readouterr().out


def test_unknown_scenario_is_a_usage_error(awm_real, capsys):
    assert awm(["catalog", "show", "nope", "--data", str(awm_real)]) == 2
    assert "no scenario 'nope'" in capsys.readouterr().err


def test_verifier_records(awm_real):
    s = Catalog.load([awm_real]).get("rover")
    v = s.verifier(3, "code")  # real pipeline output: code-mode verifiers under the sql-mode file name
    assert v.task_idx == 3 and v.has_code and v.mode == "code"
    assert v.function_name == "verify_task_completion" and v.source.path.endswith("/gen_verifier.jsonl")
    assert "reasoning" in v.meta
    assert s.verifier(3, "sql") is None
