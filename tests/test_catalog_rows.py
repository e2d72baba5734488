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
                                         "reference_solutions", "data_dir", "issues"}] * len(catalog)
    records = [CatalogRow.from_scenario(s) for s in catalog]
    assert listed == [r.to_dict() for r in records]
    maple = next(r for r in records if r.scenario == "maple_library_lending")
    assert maple.tasks == 10 and maple.coverage("sql") == "10/10" and maple.coverage("code") == "10/10"
    assert maple.tables >= 8 and maple.tools >= 15 and maple.reference_solutions == 10 and not maple.issues
    tui = {row.key: row for row in catalog_rows(catalog)}
    assert tui["maple_library_lending"].data == maple
    assert tui["maple_library_lending"].cells()[:8] == ("maple_library_lending", maple.name, maple.tables,
                                                        maple.tools, 10, "10/10", "10/10", "—")  # never tested
    assert str(tui["maple_library_lending"].cells()[8]) == "—"  # never diagnosed: no problem count yet
