"""The Problems list of an environment (Overview tab): what ``awm env doctor`` found, worst first."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table as RichTable
from rich.text import Text

from awm_engine.verify.doctor import SEVERITY_STYLE, Diagnosis, grouped, shown_detail

from .safe import shown


def problems_view(diagnosis: Diagnosis | None, running: bool = False, command: str | None = None,
                  running_note: str = "building the database, the health check, every verifier on the initial "
                                      "database") -> Group:
    """A heading with the counts, then one row per problem (severity, kind, where, message) with its detail
    (statement, traceback) dim below it. ``command``: the CLI twin, said in the heading. ``diagnosis`` None: not
    diagnosed yet; not ``complete``: only the checks that need nothing run (``doctor.quick_diagnosis``)."""
    command = command or f"awm env doctor {diagnosis.scenario if diagnosis else 'SCENARIO'}"  # its CLI twin
    if running:
        note = f"diagnosing… ({running_note})"
    elif diagnosis is None or not diagnosis.complete:
        note = f"static checks only; ctrl+d runs every check (CLI: {command})"
    else:
        note = f"from {command}; ctrl+d runs it again"
    counts = diagnosis.counts() if diagnosis else {}
    worst = next((severity for severity in counts if counts[severity]), None)
    style = SEVERITY_STYLE[worst] if worst else ("green" if diagnosis and diagnosis.complete else "")
    summary = diagnosis.summary() if worst else "none found"
    heading = Text.assemble(("Problems", "bold"), "  ", (summary, f"bold {style}"), " · " + note)
    if not worst:
        return Group(heading)
    table = RichTable.grid(padding=(0, 1))
    for column in ("severity", "kind", "where", "message"):
        table.add_column(column, no_wrap=column != "message", overflow="fold" if column == "message" else "ellipsis")
    for where, problem in grouped(diagnosis.problems):
        style = SEVERITY_STYLE.get(problem.severity, "")
        table.add_row(shown(problem.severity, style=style), shown(problem.kind), shown(where, style="dim"),
                      shown(problem.message))
        if problem.detail:  # a statement, a traceback: the environment's text
            table.add_row("", "", "", shown("\n".join(shown_detail(problem.detail)), style="dim"))
    return Group(heading, table)
