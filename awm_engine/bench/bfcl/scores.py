"""Scores: per-category accuracy, the v3 aggregation, the wheel's v4 formula, the AWM paper's columns.

**v3** (the leaderboard's ``generate_leaderboard_csv`` before V4): Simple = mean(simple, java, javascript);
Non-Live = mean(Simple, multiple, parallel, parallel_multiple, irrelevance); Live = the count-weighted mean of
all six live categories; Multi-Turn = mean of the four; **Overall = mean(Non-Live, Live, Multi-Turn)**.
Irrelevance = mean(irrelevance, live_irrelevance); Relevance = live_relevance. Non-Live AST and Live AST
(without irrelevance/relevance) are shown too. **v4** (what the wheel itself computes): Non-Live and Live
are the AST-only variants, and Overall = 0.1·Non-Live + 0.1·Live + 0.1·Irrelevance + 0.3·Multi-Turn +
0.4·Agentic, where Agentic (web search, memory) is not part of v3 and counts 0, as the wheel counts a
category it did not evaluate. **AWM paper**: Overall = mean(Non-Live, Live, Multi-Turn) — the v3 Overall.
A category that was not run counts 0 in a group (as BFCL counts it) and the group is marked partial.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from awm_engine.bench.bfcl.categories import (
    CATEGORIES,
    GROUPS,
    category_of,
    unsatisfiable,
)

V4_WEIGHTS = {"non_live": 0.1, "live": 0.1, "irrelevance": 0.1, "multi_turn": 0.3, "agentic": 0.4}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def expected_answers(categories: list[str], limit: int | None = None, k: int = 1,
                     entries: list[str] | None = None) -> dict[str, int]:
    """How many answers a selection expects per category (in the leaderboard's order)."""
    if entries:
        counts = Counter(category_of(e).name for e in entries)
        return {c: counts[c] * k for c in CATEGORIES if c in counts}
    return {c: min(CATEGORIES[c].size, limit if limit is not None else CATEGORIES[c].size) * k
            for c in CATEGORIES if c in categories}


def category_table(summaries: list[dict[str, Any]], expected: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per selected category: correct, scored, errored and expected answers (``scenario`` holds the category,
    ``label`` correct/incorrect), and the accuracy."""
    table: dict[str, dict[str, Any]] = {}
    for name, count in expected.items():
        table[name] = {"group": CATEGORIES[name].group, "correct": 0, "scored": 0, "errors": 0,
                       "expected": count, "size": CATEGORIES[name].size, "accuracy": None}
    for s in summaries:
        row = table.get(s.get("scenario"))
        if row is None:
            continue
        if s.get("status") == "ok":
            row["scored"] += 1
            row["correct"] += s.get("label") == "correct"
        else:
            row["errors"] += 1
    for row in table.values():
        row["accuracy"] = row["correct"] / row["scored"] if row["scored"] else None
    return table


def aggregate(table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """v3 groups and Overall, the v4 formula and the AWM paper's columns from the per-category table."""
    def acc(name: str) -> float:
        row = table.get(name)
        return row["accuracy"] if row and row["accuracy"] is not None else 0.0

    def ran(names: list[str]) -> tuple[bool, bool]:  # (any ran, all ran)
        flags = [bool(table.get(n) and table[n]["scored"]) for n in names]
        return any(flags), all(flags)

    def weighted(names: list[str]) -> float:
        counts = [table[n]["scored"] if n in table and table[n]["scored"] else CATEGORIES[n].size for n in names]
        return sum(acc(n) * c for n, c in zip(names, counts)) / sum(counts)

    simple = _mean([acc("simple"), acc("java"), acc("javascript")])
    live_ast = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
    v3 = {
        "simple": simple,
        "non_live_ast": _mean([simple, acc("multiple"), acc("parallel"), acc("parallel_multiple")]),
        "non_live": _mean([simple, acc("multiple"), acc("parallel"), acc("parallel_multiple"), acc("irrelevance")]),
        "live_ast": weighted(live_ast),
        "live": weighted(GROUPS["live"]),
        "multi_turn": _mean([acc(n) for n in GROUPS["multi_turn"]]),
        "irrelevance": _mean([acc("irrelevance"), acc("live_irrelevance")]),
        "relevance": acc("live_relevance"),
    }
    v3["overall"] = _mean([v3["non_live"], v3["live"], v3["multi_turn"]])
    coverage = {g: dict(zip(("any", "all"), ran(GROUPS[g]))) for g in ("non_live", "live", "multi_turn", "all")}
    v4 = {"non_live": v3["non_live_ast"], "live": v3["live_ast"], "irrelevance": v3["irrelevance"],
          "multi_turn": v3["multi_turn"], "agentic": 0.0}
    v4["overall"] = sum(V4_WEIGHTS[k] * v4[k] for k in V4_WEIGHTS)
    awm = {"overall": v3["overall"], "non_live": v3["non_live"], "live": v3["live"], "multi_turn": v3["multi_turn"],
           "non_live_ast": v3["non_live_ast"], "live_ast": v3["live_ast"], "irrelevance": v3["irrelevance"],
           "relevance": v3["relevance"], "hallucination": _mean([v3["irrelevance"], v3["relevance"]])}
    return {"v3": v3, "v4": v4, "awm": awm, "coverage": coverage}


def summarize(summaries: list[dict[str, Any]], expected: dict[str, int], mode: str) -> dict[str, Any]:
    """What ``metadata.json`` holds: the table, the aggregates and the entries no answer can pass."""
    table = category_table(summaries, expected)
    verdicts = {}
    for s in summaries:
        if s.get("status") == "ok" and s.get("task_id") in unsatisfiable(mode):
            verdicts.setdefault(s["task_id"], []).append(s.get("label"))
    known = [{"id": eid, "reason": why, "category": category_of(eid).name,
              "verdict": ("correct" if all(v == "correct" for v in verdicts[eid]) else "incorrect")
              if eid in verdicts else None}
             for eid, why in unsatisfiable(mode).items() if category_of(eid).name in table]
    scored = sum(r["scored"] for r in table.values())
    return {"categories": table, **aggregate(table), "unsatisfiable": known,
            "totals": {"expected": sum(r["expected"] for r in table.values()),
                       "scored": scored, "correct": sum(r["correct"] for r in table.values()),
                       "errors": sum(r["errors"] for r in table.values())}}


# -- rendering -------------------------------------------------------------------------------------------

def pct(value: float | None) -> str:
    return "N/A" if value is None else f"{100 * value:.2f}"


def report_rows(meta: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """The report's sections as (label, value) rows: what the CLI, the markdown and the TUI print."""
    v3, v4, awm, cov = meta["v3"], meta["v4"], meta["awm"], meta["coverage"]

    def mark(group: str) -> str:
        return "" if cov[group]["all"] else (" (partial: categories not run count 0)" if cov[group]["any"]
                                             else " (not run)")

    scored = sum(min(r["scored"], r["size"]) for r in meta["categories"].values())
    full = sum(c.size for c in CATEGORIES.values())
    coverage_row = ("Entries scored", f"{scored} of {full}" + ("" if scored >= full else
                                                             " (a subset: not comparable with full-data numbers)"))
    return {
        "v3 (BFCLv3 leaderboard formula)": [
            coverage_row,
            ("Overall = mean(Non-Live, Live, Multi-Turn)", pct(v3["overall"]) + mark("all")),
            ("Non-Live (with irrelevance)", pct(v3["non_live"]) + mark("non_live")),
            ("Live (with irrelevance and relevance, count-weighted)", pct(v3["live"]) + mark("live")),
            ("Multi-Turn", pct(v3["multi_turn"]) + mark("multi_turn")),
            ("Non-Live AST", pct(v3["non_live_ast"])), ("Live AST", pct(v3["live_ast"])),
            ("Irrelevance = mean(irrelevance, live_irrelevance)", pct(v3["irrelevance"])),
            ("Relevance = live_relevance", pct(v3["relevance"]))],
        "v4 (the bfcl-eval wheel's formula)": [
            ("Overall = .1 Non-Live AST + .1 Live AST + .1 Irrelevance + .3 Multi-Turn + .4 Agentic",
             pct(v4["overall"]) + mark("all")),
            ("Agentic (web search, memory: not in v3, counts 0)", pct(v4["agentic"]))],
        "AWM paper columns": [
            ("Overall = mean(Non-Live, Live, Multi-Turn)", pct(awm["overall"]) + mark("all")),
            ("Non-Live", pct(awm["non_live"]) + mark("non_live")), ("Live", pct(awm["live"]) + mark("live")),
            ("Multi-Turn", pct(awm["multi_turn"]) + mark("multi_turn")),
            ("Hallucination = mean(Irrelevance, Relevance) (assumed; not part of Overall)", pct(awm["hallucination"]))],
    }


def markdown(meta: dict[str, Any]) -> str:
    lines = [f"# BFCLv3 · {meta.get('model')} · {meta.get('mode')} mode · {meta.get('policy')}", "",
             f"bfcl-eval {meta.get('bfcl_eval')} (official checkers). {meta.get('data', '')}", "",
             "| category | group | correct | scored | accuracy | errors |", "|---|---|---:|---:|---:|---:|"]
    for name, row in meta["categories"].items():
        partial = "" if row["scored"] >= row["size"] else f" of {row['size']}"
        lines.append(f"| {name} | {row['group']} | {row['correct']} | {row['scored']}{partial} | "
                     f"{pct(row['accuracy'])} | {row['errors']} |")
    for section, rows in report_rows(meta).items():
        lines += ["", f"## {section}", "", "| | % |", "|---|---:|"] + [f"| {a} | {b} |" for a, b in rows]
    lines += ["", "## Entries no answer can pass", ""]
    if meta["unsatisfiable"]:
        lines += [f"- `{u['id']}` ({u['verdict'] or 'not run'}): {u['reason']}" for u in meta["unsatisfiable"]]
    else:
        lines.append("none in the selected categories")
    return "\n".join(lines) + "\n"
