"""``awm catalog list`` and ``awm catalog show``."""
from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from rich.markup import escape
from rich.table import Table as RichTable

from awm_engine.cli import verb_help
from awm_engine.cli.common import (
    add_data_arg,
    get_scenario,
    load_catalog,
    print_fitted,
    print_json,
    shown,
    stdout,
)
from awm_engine.data.catalog import Scenario
from awm_engine.data.catalog_rows import CatalogRow
from awm_engine.data.records import VERIFIER_MODES
from awm_engine.db.templates import TemplateCache
from awm_engine.runtime.health import invalid_schemas
from awm_engine.runtime.openapi_tools import schema_problem_note


def register(verbs) -> None:
    parser = verbs.add_parser("catalog", help=verb_help("catalog"))
    sub = parser.add_subparsers(dest="catalog_verb", metavar="ACTION")
    sub.required = True
    ls = sub.add_parser("list", help="one line per scenario: tables, tools, tasks, verifier coverage")
    add_data_arg(ls)
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_list)
    show = sub.add_parser("show", help="description, tables, tools with parameters, tasks")
    show.add_argument("scenario")
    add_data_arg(show)
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=cmd_show)


def cmd_list(args: argparse.Namespace) -> int:
    catalog = load_catalog(args, quiet=args.json)
    cache = TemplateCache()
    rows = [CatalogRow.from_scenario(s, cache.built_rows(s)) for s in catalog]
    if args.json:
        print_json({"scenarios": [r.to_dict() for r in rows], "issues": [str(i) for i in catalog.issues]})
        return 0
    cells = {
        "tables": lambda r: str(r.tables if r.tables is not None else "-"), "tools": lambda r: r.tools_cell(),
        "tasks": lambda r: str(r.tasks), "rows": lambda r: r.rows_cell(),
        "sql verifiers": lambda r: r.coverage("sql"), "code verifiers": lambda r: r.coverage("code"),
        "solutions": lambda r: str(r.reference_solutions or "-"),
    }

    def build(columns: list[str]) -> RichTable:
        table = RichTable(title=f"{len(rows)} environments")
        # the scenario key is what --scenario takes: never cut (other columns wrap or are left out first)
        table.add_column("scenario", no_wrap=True, overflow="fold")
        for col in columns[1:]:
            table.add_column(col, justify="right")
        for r in rows:
            table.add_row(escape(r.scenario), *(cells[c](r) for c in columns[1:]), style="red" if r.issues else None)
        return table

    print_fitted(build, ["scenario", *cells], LIST_DROP_ORDER)
    return 0


# the columns ``catalog list`` leaves out first when the terminal is narrow (scenario, tasks, verifiers stay)
LIST_DROP_ORDER = ("rows", "solutions", "tables", "tools", "sql verifiers")


def details(s: Scenario) -> dict:
    tools = s.tools()
    schema_errors = invalid_schemas(s)
    return {
        **CatalogRow.from_scenario(s).to_dict(), "description": s.description,
        "tables": [{"name": t.name, "columns": [asdict(c) for c in t.columns],
                    "primary_key": t.primary_key, "foreign_keys": [asdict(f) for f in t.foreign_keys],
                    "indexes": t.indexes, "error": t.error} for t in s.tables()],
        "tools": [{**asdict(t), "schema_error": schema_errors.get(t.name)} for t in tools],
        "tasks": [{"index": i, "text": text,
                   "verifiers": {m: bool(s.verifier_has_code[m].get(i)) for m in VERIFIER_MODES},
                   # where each mode's verifier row is: its mode comes from its code, not from the file's name
                   "verifier_rows": {m: f"{Path(ref.path).name}:{ref.line}" for m in VERIFIER_MODES
                                     if (ref := s.verifier_refs[m].get(i)) is not None}}
                  for i, text in enumerate(s.tasks)],
    }


def cmd_show(args: argparse.Namespace) -> int:
    catalog = load_catalog(args, quiet=args.json, only=[args.scenario])
    s = get_scenario(catalog, args.scenario)
    data = details(s)
    if args.json:
        print_json(data)
        return 0
    stdout.rule(f"[bold]{escape(s.name)}[/bold]  ({escape(s.key)})")
    stdout.print(escape(s.description or "(no description)"))
    stdout.print(f"\n[bold]Tables ({len(data['tables'])})[/bold]")
    for t in data["tables"]:
        fks = {f["column"]: f"{f['other_table']}.{f['other_column']}" for f in t["foreign_keys"]}
        cols = ", ".join(
            f"{c['name']} {c['type']}" + (" PK" if c["primary_key"] else "") + (" NOT NULL" if c["notnull"] else "")
            + (f" -> {fks[c['name']]}" if c["name"] in fks else "") for c in t["columns"])
        stdout.print(f"  [cyan]{escape(t['name'])}[/cyan]: {escape(cols)}" + (f" [red]{escape(str(t['error']))}[/red]" if t["error"] else ""))
    stdout.print(f"\n[bold]Tools ({len(data['tools'])})[/bold]")
    for t in data["tools"]:
        stdout.print(f"  [green]{escape(t['name'])}[/green]  {escape(str(t['method']))} {escape(t['path'])}  {escape(t['summary'])}")
        if t.get("shadowed_by"):
            stdout.print(f"      [yellow]same method and path as '{escape(t['shadowed_by'])}': over MCP only that name "
                         f"is listed, and its calls reach this handler (fastapi-mcp behaviour)[/yellow]")
        if t.get("schema_error"):
            stdout.print(f"      [yellow]{escape(schema_problem_note(t['schema_error']))}[/yellow]")
        for p in t["params"]:
            req = "required" if p["required"] else "optional"
            stdout.print(f"      - {escape(p['name'])}: {escape(p['type'])} ({shown(p['location'])}, {req})"
                         + (f"  {escape(p['description'])}" if p["description"] else ""))
    stdout.print(f"\n[bold]Tasks ({len(data['tasks'])})[/bold]")
    for t in data["tasks"]:
        marks = " ".join(m for m, ok in t["verifiers"].items() if ok) or "no verifier"
        stdout.print(f"  {t['index']}. {escape(t['text'])}  [dim]({marks})[/dim]")
    return 0
