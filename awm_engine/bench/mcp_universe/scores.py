"""Success rates of an MCP-Universe run (spec §1.2, §1.3).

A task passes only if every evaluator passes. SR is a micro-average per column and Overall (never the mean of
the columns), by the official formula: passed tasks / all tasks — a task whose evaluators reached a live service
that is not available here (status ``needs``) or whose rollout could not run (``error``) stays in the
denominator, as it does in MCP-Universe's own numbers. Next to it, labelled, the rate over the tasks decided
here only (``sr_decidable``: passed / (passed + failed)). Each task id is counted once, in one column: the
paper's grouping puts a multi-server task in the domain whose suite lists it; the AWM paper's columns (Location,
Financial, Browser, Web, Multi) use folder grouping, multi-server files only under Multi, Repository and 3D left
out. A column with no task in the run is missing ("–", never 0); with the paper grouping, a column holding fewer
tasks than the paper's count, and an Overall over such columns, is marked ``partial``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from awm_engine.bench.mcp_universe.tasks import AWM_COLUMNS, PAPER_COLUMNS, PAPER_COUNTS

GROUPINGS = ("paper", "awm")


def wilson(passed: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The 95 % Wilson score interval of passed/n."""
    if n == 0:
        return None
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _cell(records: list[dict[str, Any]], expected: int | None = None) -> dict[str, Any]:
    scored = [r for r in records if r.get("status") in ("pass", "fail")]
    passed = sum(r["status"] == "pass" for r in scored)
    scores = [r["evaluator_score"] for r in scored if isinstance(r.get("evaluator_score"), (int, float))]
    steps = [r["steps"] for r in scored if isinstance(r.get("steps"), int)]
    ci = wilson(passed, len(records))
    return {"tasks": len(records), "scored": len(scored), "passed": passed,
            "sr": passed / len(records) if records else None,
            "sr_decidable": passed / len(scored) if scored else None, "ci95": list(ci) if ci else None,
            "needs": sum(r.get("status") == "needs" for r in records),
            "errored": sum(r.get("status") == "error" for r in records),
            "expected": expected, "partial": expected is not None and len(records) < expected,
            "avg_evaluator_score": sum(scores) / len(scores) if scores else None,
            "avg_steps": sum(steps) / len(steps) if steps else None}


def column_of(record: dict[str, Any], grouping: str) -> str | None:
    if grouping == "paper":
        return record.get("domain") if record.get("domain") in PAPER_COLUMNS else None
    return record.get("awm_column") if record.get("awm_column") in AWM_COLUMNS else None


def success_rates(records: Iterable[dict[str, Any]], grouping: str = "paper") -> dict[str, Any]:
    """Per column and Overall; ``records`` are task results (one per task id: the last one wins)."""
    if grouping not in GROUPINGS:
        raise ValueError(f"unknown grouping {grouping!r} (choose from {', '.join(GROUPINGS)})")
    by_id: dict[str, dict[str, Any]] = {}
    for r in records:
        by_id[r["id"]] = r  # never count a task twice
    columns = PAPER_COLUMNS if grouping == "paper" else AWM_COLUMNS
    groups: dict[str, list[dict[str, Any]]] = {c: [] for c in columns}
    for r in by_id.values():
        c = column_of(r, grouping)
        if c is not None:
            groups[c].append(r)
    expected = PAPER_COUNTS if grouping == "paper" else {}
    table = {c: _cell(rs, expected.get(c)) for c, rs in groups.items() if rs}
    overall = _cell([r for rs in groups.values() for r in rs], sum(expected.values()) if expected else None)
    overall["partial"] = overall["partial"] or any(t["partial"] for t in table.values()) or \
        (bool(expected) and len(table) < len(columns))
    table["Overall"] = overall
    needs: dict[str, int] = {}
    for r in by_id.values():
        for service in r.get("needs") or []:
            needs[service] = needs.get(service, 0) + 1
    return {"grouping": grouping, "columns": list(columns) + ["Overall"], "table": table, "needs_by_service": needs,
            "paper_counts": PAPER_COUNTS if grouping == "paper" else None}


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def _shown(cell: dict[str, Any] | None, text: Callable[[dict[str, Any]], str]) -> str:
    return "–" if cell is None else text(cell)


def markdown(summary: dict[str, Any], title: str = "MCP-Universe", offline: bool = False) -> str:
    lines = [f"## {title} ({summary['grouping']} columns)", ""]
    if offline:
        lines += ["**Offline simulation** against stand-in MCP servers with fixed data: not comparable with the "
                  "paper, the leaderboard or AWM.", ""]
    cols = summary["columns"]
    t = summary["table"]

    def row(label: str, text: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(_shown(t.get(c), text) for c in cols) + " |"

    lines.append("| | " + " | ".join(cols) + " |")
    lines.append("|---|" + "---|" * len(cols))
    lines.append(row("SR % (all tasks, official)", lambda c: pct(c["sr"]) + (" (partial)" if c["partial"] else "")))
    lines.append(row("passed / tasks", lambda c: f"{c['passed']}/{c['tasks']}"))
    lines.append(row("95% CI", lambda c: "–" if not c["ci95"] else f"{pct(c['ci95'][0])}–{pct(c['ci95'][1])}"))
    lines.append(row("SR % (decided here only)", lambda c: pct(c["sr_decidable"])))
    lines.append(row("passed / decided", lambda c: f"{c['passed']}/{c['scored']}"))
    lines.append(row("needs a service", lambda c: str(c["needs"])))
    lines.append(row("errored", lambda c: str(c["errored"])))
    lines.append(row("avg evaluator score", lambda c: pct(c["avg_evaluator_score"])))
    lines.append(row("avg steps", lambda c: "–" if c["avg_steps"] is None else f"{c['avg_steps']:.1f}"))
    notes = []
    if any(c not in t for c in cols):
        notes.append("– : not in this run.")
    if any(c.get("partial") for c in t.values()):
        notes.append("partial: fewer tasks than the paper's count for that column (the Overall covers only the "
                     "tasks run).")
    if summary["needs_by_service"]:
        notes.append("Not decided here (their evaluators reached a live service or external software, so they "
                     "count as not passed in the official rate): " +
                     ", ".join(f"{s} {n}" for s, n in sorted(summary["needs_by_service"].items())))
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"
