"""Success rates of an MCP-Universe run (spec §1.2, §1.3).

A task passes only if every evaluator passes. SR is a micro-average: passed tasks / scored tasks, per column
and Overall (never the mean of the columns). Each task id is counted once, in one column: the paper's grouping
puts a multi-server task in the domain whose suite lists it; the AWM paper's columns (Location, Financial,
Browser, Web, Multi) use folder grouping, multi-server files only under Multi, Repository and 3D left out.

Tasks whose evaluators need a live service (status ``needs``) and rollouts that could not run (``error``) are
not scored: they are counted separately, never as failures and never in the denominators.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

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


def _cell(records: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in records if r.get("status") in ("pass", "fail")]
    passed = sum(r["status"] == "pass" for r in scored)
    scores = [r["evaluator_score"] for r in scored if isinstance(r.get("evaluator_score"), (int, float))]
    steps = [r["steps"] for r in scored if isinstance(r.get("steps"), int)]
    ci = wilson(passed, len(scored))
    return {"tasks": len(records), "scored": len(scored), "passed": passed,
            "sr": passed / len(scored) if scored else None, "ci95": list(ci) if ci else None,
            "needs": sum(r.get("status") == "needs" for r in records),
            "errored": sum(r.get("status") == "error" for r in records),
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
    table = {c: _cell(rs) for c, rs in groups.items() if rs}
    table["Overall"] = _cell([r for rs in groups.values() for r in rs])
    needs: dict[str, int] = {}
    for r in by_id.values():
        for service in r.get("needs") or []:
            needs[service] = needs.get(service, 0) + 1
    return {"grouping": grouping, "columns": list(columns) + ["Overall"], "table": table, "needs_by_service": needs,
            "paper_counts": PAPER_COUNTS if grouping == "paper" else None}


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def markdown(summary: dict[str, Any], title: str = "MCP-Universe", offline: bool = False) -> str:
    lines = [f"## {title} ({summary['grouping']} columns)", ""]
    if offline:
        lines += ["**Offline simulation** against stand-in MCP servers with fixed data: not comparable with the "
                  "paper, the leaderboard or AWM.", ""]
    cols = [c for c in summary["columns"] if c in summary["table"]]
    lines.append("| | " + " | ".join(cols) + " |")
    lines.append("|---|" + "---|" * len(cols))
    t = summary["table"]
    lines.append("| SR % | " + " | ".join(pct(t[c]["sr"]) for c in cols) + " |")
    lines.append("| passed / scored | " + " | ".join(f"{t[c]['passed']}/{t[c]['scored']}" for c in cols) + " |")
    lines.append("| 95% CI | " + " | ".join("–" if not t[c]["ci95"] else
                                            f"{pct(t[c]['ci95'][0])}–{pct(t[c]['ci95'][1])}" for c in cols) + " |")
    lines.append("| needs a service | " + " | ".join(str(t[c]["needs"]) for c in cols) + " |")
    lines.append("| errored | " + " | ".join(str(t[c]["errored"]) for c in cols) + " |")
    lines.append("| avg evaluator score | " + " | ".join(pct(t[c]["avg_evaluator_score"]) for c in cols) + " |")
    lines.append("| avg steps | " + " | ".join("–" if t[c]["avg_steps"] is None else f"{t[c]['avg_steps']:.1f}"
                                              for c in cols) + " |")
    if summary["needs_by_service"]:
        lines += ["", "Not scored here (their evaluators need a live service or external software): " +
                  ", ".join(f"{s} {n}" for s, n in sorted(summary["needs_by_service"].items()))]
    return "\n".join(lines) + "\n"
