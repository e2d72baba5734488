"""``awm db build`` and ``awm db diff``."""
from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table as RichTable
from rich.text import Text

from awm_engine.cli import verb_help
from awm_engine.cli.common import (
    CliError,
    add_data_arg,
    get_scenario,
    load_catalog,
    out_dir,
    print_json,
    stderr,
    stdout,
)
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.terminal import visible
from awm_engine.db.build import build_database_sandboxed
from awm_engine.db.diff import diff_databases
from awm_engine.db.templates import TemplateCache


def register(verbs) -> None:
    parser = verbs.add_parser("db", help=verb_help("db"))
    sub = parser.add_subparsers(dest="db_verb", metavar="ACTION")
    sub.required = True
    build = sub.add_parser("build", help="build <out>/<scenario>.db for each scenario, statement by statement")
    add_data_arg(build)
    build.add_argument("--scenario", action="append", metavar="S", help="only these scenarios (repeatable)")
    where = build.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="DIR", help="output directory")
    where.add_argument("--refresh", action="store_true",
                       help="rebuild the scenarios' template databases in the cache (what episodes copy) now")
    build.add_argument("--json", action="store_true", help="print the build reports as JSON")
    build.set_defaults(func=cmd_build)
    diff = sub.add_parser("diff", help="row-level diff of two SQLite databases")
    diff.add_argument("before")
    diff.add_argument("after")
    diff.add_argument("--json", action="store_true", help="print JSON")
    diff.set_defaults(func=cmd_diff)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 table``, ``2 tables``: a count with its noun agreeing."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def cmd_build(args: argparse.Namespace) -> int:
    """Exit 0 when at least one usable database (one with a table) was built, 1 when none was; the summary names
    every scenario whose build failed (no schema: no file is written)."""
    catalog = load_catalog(args, quiet=args.json, only=args.scenario)
    scenarios = [get_scenario(catalog, s) for s in args.scenario] if args.scenario else list(catalog)
    templates = TemplateCache() if args.refresh else None
    out = out_dir(args.out) if args.out else templates.root
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=stderr, transient=True) as progress:
        job = progress.add_task("building", total=len(scenarios))
        for s in scenarios:
            progress.update(job, description=f"building {s.key}")
            reports.append(templates.get(s, rebuild=True)[1] if templates else
                           build_database_sandboxed(s.key, s.db_schema, s.sample_data, out / f"{s.key}.db",
                                                    placeholder=False))
            progress.advance(job)
    payload = [r.to_dict() for r in reports]
    usable = [r for r in reports if r.usable]
    failed = [r for r in reports if not r.usable]
    code = 0 if usable else 1
    if not args.refresh:
        (out / "build_report.json").write_text(dumps_text(payload, indent=2), encoding="utf-8")
    if args.json:
        print_json(payload)
        return code
    verb = "rebuilt the templates of" if args.refresh else "built"
    title = f"{verb} {plural(len(usable), 'database')} in {out}"
    if failed:
        title += f"; {len(failed)} failed"
    table = RichTable(title=Text(title))
    for col in ("scenario", "tables ok", "tables failed", "inserts ok", "inserts failed", "rows", "seconds",
                "time-dependent"):
        table.add_column(col, justify="left" if col == "scenario" else "right", no_wrap=col == "scenario")
    for r in reports:
        table.add_row(Text(visible(r.scenario)), str(r.tables_ok), str(r.tables_failed), str(r.inserts_ok), str(r.inserts_failed),
                      str(sum(r.row_counts.values())), f"{r.seconds:.2f}", "yes" if r.time_dependent else "",
                      style="red" if r.fatal or not r.usable else ("yellow" if r.failures else None))
    stdout.print(table)
    for r in reports:
        if r.fatal:
            stdout.print(f"[red]{escape(r.scenario)}: {escape(r.fatal)}[/red]")
        for f in r.failures:
            stdout.print(f"[yellow]{escape(r.scenario)}[/yellow] {f.phase} {escape(f.table)}: {escape(f.error)}\n"
                         f"    [dim]{escape(f.statement[:300])}[/dim]")
    if failed:
        stdout.print(f"[red]failed (no usable database): {escape(', '.join(r.scenario for r in failed))}[/red]")
    if not args.refresh:
        stdout.print(f"report: {out / 'build_report.json'}", markup=False)
    return code


def cmd_diff(args: argparse.Namespace) -> int:
    for p in (args.before, args.after):
        if not Path(p).is_file():
            raise CliError(f"no such database: {p}")
    try:
        diff = diff_databases(args.before, args.after)
    except sqlite3.DatabaseError as exc:  # not a database (or a damaged one): the file said so, not awm
        raise CliError(f"cannot read {args.before} and {args.after} as SQLite databases: {exc}") from None
    if args.json:
        print_json(diff.to_dict())
        return 0
    counts = diff.counts()
    stdout.print(f"{plural(counts['tables'], 'table')} changed: +{counts['inserted']} -{counts['deleted']} "
                 f"~{counts['updated']}", markup=False)
    for t in diff.tables:
        stdout.rule(escape(f"{t.table} ({t.status}; key {', '.join(t.key_columns)})"))
        for row in t.inserted:
            stdout.print(f"[green]+ {escape(json.dumps(row, default=str, ensure_ascii=False))}[/green]")
        for row in t.deleted:
            stdout.print(f"[red]- {escape(json.dumps(row, default=str, ensure_ascii=False))}[/red]")
        for u in t.updated:
            changes = ", ".join(f"{c}: {u.before[c]!r} -> {u.after[c]!r}" for c in u.changed)
            stdout.print(f"[yellow]~ {escape(json.dumps(u.key, default=str))}[/yellow] {escape(changes)}")
    if diff.skipped:
        stdout.print(f"[yellow]tables not read (virtual tables, or names that are not UTF-8): {escape(', '.join(diff.skipped))}[/yellow]")
    if diff.incomplete:
        stdout.print(f"[yellow]incomplete: {escape(diff.incomplete)}[/yellow]")
    return 0
