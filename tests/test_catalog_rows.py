"""One catalog row model: ``awm catalog list --json`` and the TUI's catalog are computed from ``CatalogRow``."""
import json

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.data.catalog_rows import CatalogRow
from awm_tui.screens.catalog import catalog_rows


def test_cli_json_and_tui_rows_come_from_one_record(capsys):
    catalog = Catalog.load()
    assert awm(["catalog", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["scenarios"]
    assert [set(r) for r in listed] == [{"scenario", "name", "tables", "tools", "tasks", "sample_rows", "verifiers",
                                         "reference_solutions", "data_dir", "issues", "mcp_tools",
                                         "built_rows"}] * len(catalog)
    from awm_engine.db.templates import TemplateCache

    records = [CatalogRow.from_scenario(s, TemplateCache().built_rows(s)) for s in catalog]
    assert listed == [r.to_dict() for r in records]
    maple = next(r for r in records if r.scenario == "maple_library_lending")
    assert maple.tasks == 10 and maple.coverage("sql") == "10/10" and maple.coverage("code") == "10/10"
    assert maple.tables >= 8 and maple.tools >= 15 and maple.reference_solutions == 10 and not maple.issues
    tui = {row.key: row for row in catalog_rows(catalog)}
    assert tui["maple_library_lending"].data.scenario == maple.scenario
    assert tui["maple_library_lending"].cells()[:8] == ("maple_library_lending", maple.name, maple.tables,
                                                        maple.tools, 10, "10/10", "10/10", "—")  # never tested
    assert str(tui["maple_library_lending"].cells()[8]) == "—"  # never diagnosed: no problem count yet


def test_counts_a_user_expects_mcp_tools_and_built_rows(awm_real, tmp_path, capsys):
    """The catalog shows the tools an MCP client lists and the rows actually built, with the routes and
    statements beside them where they differ (GoFundMe: two routes share one tool; SurveyMonkey Apply: 22 of
    its INSERTs fail)."""
    assert awm(["db", "build", "--data", str(awm_real), "--refresh"]) == 0
    capsys.readouterr()
    assert awm(["catalog", "list", "--data", str(awm_real), "--json"]) == 0
    rows = {r["scenario"]: r for r in json.loads(capsys.readouterr().out)["scenarios"]}
    assert (rows["gofundme"]["tools"], rows["gofundme"]["mcp_tools"]) == (11, 10)
    survey = rows["surveymonkey_apply"]
    assert survey["built_rows"] == survey["sample_rows"] - 22
    assert awm(["catalog", "list", "--data", str(awm_real)]) == 0
    out = capsys.readouterr().out
    assert "10 (11 routes)" in out and f"{survey['built_rows']} ({survey['sample_rows']} stmts)" in out
    tui = {r.key: r for r in catalog_rows(Catalog.load([awm_real]))}
    assert tui["gofundme"].cells()[3] == 10  # the TUI's tools column: what an MCP client lists
