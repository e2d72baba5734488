"""One table across benchmarks, shaped like the AWM paper's results table: one row per model, one column group per
benchmark (AWM environments, BFCLv3, τ²-bench, MCP-Universe), with n and 95 % confidence intervals where a column
is a proportion over n items.

The interface between a benchmark and this table is ``report_columns(run_dir) -> dict``::

    {"benchmark": "bfcl" | "tau2" | "mcp-universe" | "awm", "model": str,
     "columns": {"<column>": {"value": float | None, "n": int | None, "ci95": [lo, hi] | None}},
     "notes": [str, ...]}

A run directory's ``config.json`` says its benchmark (``"benchmark": …``; an ``awm eval run`` directory has none).
The readers below exist for awm evaluations, BFCL and MCP-Universe; any other benchmark is read through its
package's own ``run.report_columns`` when it has one, else through a ``report_columns`` entry of its
``metadata.json`` (the same dict), else the run is skipped with the reason. A benchmark without runs leaves its
group empty.

Partial runs say so: a column whose category (BFCL) or domain (τ², MCP-Universe) was not run is ``–`` (value
None), never 0; an aggregate over partial coverage (BFCL's groups and Overall, τ²'s Avg, MCP-Universe's Overall)
is computed over what was run and its cell carries ``"partial": {"covered", "of", "unit", "not_run"}``, shown as
``41.2 (partial: 2/3 domains)`` with a footnote naming what was not run. With complete coverage the official
formulas stand unchanged and no cell is partial.
"""
from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any, Callable

from awm_engine.data.run_formats import CONFIG, METADATA, RunFormatError

# benchmark -> (group title, its columns in the table's order)
GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "awm": ("AWM environments", ("Completion", "Mean reward")),
    "bfcl": ("BFCLv3", ("Non-Live", "Live", "Multi-Turn", "Overall")),
    "tau2": ("τ²-bench", ("Airline", "Retail", "Telecom", "Avg")),
    "mcp-universe": ("MCP-Universe", ("Location", "Financial", "Browser", "Web", "Multi", "Overall")),
}
ALIASES = {"tau2-bench": "tau2", "tau2_bench": "tau2", "mcp_universe": "mcp-universe", "mcpuniverse": "mcp-universe"}


def wilson(passed: float, n: int, z: float = 1.96) -> list[float] | None:
    if not n:
        return None
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom
    return [max(0.0, centre - half), min(1.0, centre + half)]


def cell(value: float | None, n: int | None = None, proportion: bool = False) -> dict[str, Any]:
    ci = wilson(value * n, n) if proportion and value is not None and n else None
    return {"value": value, "n": n, "ci95": ci}


def _benchmark_of(run_dir: Path) -> str:
    if not run_dir.is_dir():
        raise ValueError("no config.json: " + ("no such directory" if not run_dir.exists() else "not a directory"))
    path = run_dir / CONFIG.file
    if not path.is_file():
        raise ValueError("no config.json: not a run directory")
    try:
        data = CONFIG.read(path)
    except RunFormatError:
        raise
    except ValueError as exc:  # half-written or not JSON (a newer format says so itself)
        raise ValueError(f"config.json cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config.json is a {type(data).__name__}, not an object")
    name = str(data.get("benchmark") or "awm").lower()
    return ALIASES.get(name, name)


def _awm_eval(run_dir: Path) -> dict[str, Any]:
    from awm_engine.eval.runs import load_eval_config, read_metadata

    config = load_eval_config(run_dir)
    meta = read_metadata(run_dir) or {}
    overall = meta.get("overall") or {}
    n = overall.get("scored")
    notes = ["still running"] if meta.get("running") else []
    return {"benchmark": "awm", "model": config.model,
            "columns": {"Completion": cell(overall.get("completion_rate"), n, proportion=True),
                        "Mean reward": cell(overall.get("mean_reward"), n)}, "notes": notes}


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _bfcl_over_run(categories: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """BFCLv3's groups (``bfcl.scores.aggregate``'s formulas) over the categories that were run: a
    category not run is left out of its mean (BFCL itself counts it 0), a group none of whose categories ran is
    None."""
    from awm_engine.bench.bfcl.categories import GROUPS as BFCL_GROUPS

    acc = {n: r["accuracy"] for n, r in categories.items()
           if isinstance(r, dict) and r.get("scored") and isinstance(r.get("accuracy"), (int, float))}
    simple = _mean([acc.get(n) for n in ("simple", "java", "javascript")])
    non_live = _mean([simple, *(acc.get(n) for n in ("multiple", "parallel", "parallel_multiple", "irrelevance"))])
    live_run = [n for n in BFCL_GROUPS["live"] if n in acc]  # count-weighted over the scored entries
    weight = sum(categories[n]["scored"] for n in live_run)
    live = sum(acc[n] * categories[n]["scored"] for n in live_run) / weight if live_run else None
    multi_turn = _mean([acc.get(n) for n in BFCL_GROUPS["multi_turn"]])
    return {"non_live": non_live, "live": live, "multi_turn": multi_turn}


def _bfcl_not_run(categories: dict[str, dict[str, Any]], groups: list[str]) -> tuple[int, int, list[str]]:
    """(categories run, categories in ``groups``, what was not run: a group's title when none of its categories
    ran, else its missing categories)."""
    from awm_engine.bench.bfcl.categories import GROUP_NAMES
    from awm_engine.bench.bfcl.categories import GROUPS as BFCL_GROUPS

    ran, total, missing = 0, 0, []
    for g in groups:
        names = BFCL_GROUPS[g]
        done = [n for n in names if isinstance(categories.get(n), dict) and categories[n].get("scored")]
        ran, total = ran + len(done), total + len(names)
        if not done:
            missing.append(f"{GROUP_NAMES[g]} (all its categories)")
        else:
            missing += [n for n in names if n not in done]
    return ran, total, missing


def _bfcl(run_dir: Path) -> dict[str, Any]:
    try:
        from awm_engine.bench.bfcl.run import current_metadata

        meta = current_metadata(run_dir)
    except Exception:  # noqa: BLE001 - fall back to the recorded metadata (e.g. the wheel is not installed)
        meta = METADATA.read(run_dir / METADATA.file)
    awm = meta.get("awm") or {}
    n = (meta.get("totals") or {}).get("scored")
    notes = [f"BFCL {meta.get('mode')} mode"] if meta.get("mode") else []
    columns = {"Non-Live": cell(awm.get("non_live")), "Live": cell(awm.get("live")),
               "Multi-Turn": cell(awm.get("multi_turn")), "Overall": cell(awm.get("overall"), n)}
    categories = meta.get("categories")
    coverage = meta.get("coverage") or {}
    if isinstance(categories, dict) and not (coverage.get("all") or {}).get("all", True):
        over_run = _bfcl_over_run(categories)  # a group run in full keeps BFCL's own value
        for column, key in (("Non-Live", "non_live"), ("Live", "live"), ("Multi-Turn", "multi_turn")):
            ran, total, missing = _bfcl_not_run(categories, [key])
            if ran < total:
                columns[column]["value"] = over_run[key]
                if ran:
                    columns[column]["partial"] = {"covered": ran, "of": total, "unit": "categories",
                                                  "not_run": missing}
        columns["Overall"]["value"] = _mean([columns[c]["value"] for c in ("Non-Live", "Live", "Multi-Turn")])
        ran, total, missing = _bfcl_not_run(categories, ["non_live", "live", "multi_turn"])
        if columns["Overall"]["value"] is not None:
            columns["Overall"]["partial"] = {"covered": ran, "of": total, "unit": "categories", "not_run": missing}
    return {"benchmark": "bfcl", "model": meta.get("model") or "unknown", "columns": columns, "notes": notes}


def _mcp_universe(run_dir: Path) -> dict[str, Any]:
    from awm_engine.bench.mcp_universe.run import current_metadata

    meta = current_metadata(run_dir)
    table = meta["awm"]["table"]
    # the official rate: passed / all tasks of the column (a task not decided here counts as not passed)
    columns = {c: {"value": table[c]["sr"], "n": table[c]["tasks"], "ci95": table[c]["ci95"]}
               for c in GROUPS["mcp-universe"][1] if c in table}
    notes = []
    if meta.get("simulation"):
        notes.append("MCP-Universe: offline simulation (stand-in servers), not comparable with published numbers")
    needs = meta["awm"].get("needs_by_service") or {}
    if needs:
        notes.append("MCP-Universe: not decided here (reached a live service; not passed in the official rate): " +
                     ", ".join(f"{s} {n}" for s, n in sorted(needs.items())))
    return {"benchmark": "mcp-universe", "model": meta.get("model") or "unknown", "columns": columns, "notes": notes}


def _generic(run_dir: Path, benchmark: str) -> dict[str, Any]:
    module = f"awm_engine.bench.{benchmark.replace('-', '_')}.run"
    try:
        reader = getattr(importlib.import_module(module), "report_columns", None)
    except ImportError:
        reader = None
    failure = None
    if reader is not None:
        try:
            return reader(run_dir)
        except Exception as exc:  # noqa: BLE001 - another package's reader: fall back to what the run recorded
            failure = f"{type(exc).__name__}: {exc}"
    path = run_dir / METADATA.file
    meta = METADATA.read(path) if path.is_file() else {}
    if isinstance(meta.get("report_columns"), dict):
        recorded = dict(meta["report_columns"])
        if failure:
            recorded["notes"] = [*(recorded.get("notes") or []), f"{benchmark}: columns as recorded in "
                                 f"metadata.json ({module}.report_columns failed: {failure})"]
        return recorded
    raise ValueError(f"a {benchmark} run without report columns ({failure or f'no {module}.report_columns'}; no "
                     "report_columns in metadata.json)")


READERS: dict[str, Callable[[Path], dict[str, Any]]] = {"awm": _awm_eval, "bfcl": _bfcl,
                                                        "mcp-universe": _mcp_universe}

# benchmark -> (its aggregate column, what its other columns are): the aggregate over the columns with a value
AGGREGATES = {"tau2": ("Avg", "domains"), "mcp-universe": ("Overall", "domains")}


def mark_partial(benchmark: str, columns: dict[str, Any]) -> None:
    """Mark ``benchmark``'s aggregate partial when some of its domain columns were not run (no value)."""
    if benchmark not in AGGREGATES or not isinstance(columns, dict):
        return
    aggregate, unit = AGGREGATES[benchmark]
    parts = [c for c in GROUPS[benchmark][1] if c != aggregate]
    agg = columns.get(aggregate)
    if not isinstance(agg, dict) or not isinstance(agg.get("value"), (int, float)) or "partial" in agg:
        return
    run = [c for c in parts if isinstance(columns.get(c), dict) and isinstance(columns[c].get("value"), (int, float))]
    if len(run) < len(parts):
        columns[aggregate] = {**agg, "partial": {"covered": len(run), "of": len(parts), "unit": unit,
                                                 "not_run": [c for c in parts if c not in run]}}


def report_columns(run_dir: Path | str) -> dict[str, Any]:
    run_dir = Path(run_dir)
    benchmark = _benchmark_of(run_dir)
    reader = READERS.get(benchmark)
    result = reader(run_dir) if reader else _generic(run_dir, benchmark)
    result.setdefault("benchmark", benchmark)
    result.setdefault("notes", [])
    mark_partial(result["benchmark"], result.get("columns"))
    return result


def build_table(run_dirs: list[Path | str]) -> dict[str, Any]:
    """Rows by model: each benchmark group filled from that model's run (a later run of the same benchmark and model
    replaces an earlier one, with a note)."""
    rows: dict[str, dict[str, Any]] = {}
    skipped = []
    for run_dir in run_dirs:
        try:
            result = report_columns(run_dir)
        except (OSError, ValueError, KeyError) as exc:
            skipped.append({"run_dir": str(run_dir), "reason": str(exc)})
            continue
        except Exception as exc:  # noqa: BLE001 - one unreadable run must not hide the others
            skipped.append({"run_dir": str(run_dir), "reason": f"{type(exc).__name__}: {exc}"})
            continue
        model, bench = str(result.get("model") or "unknown"), result["benchmark"]
        row = rows.setdefault(model, {"model": model, "benchmarks": {}, "runs": {}, "notes": []})
        if bench in row["benchmarks"]:
            row["notes"].append(f"{bench}: {row['runs'][bench]} replaced by {run_dir}")
        row["benchmarks"][bench] = result["columns"]
        row["runs"][bench] = str(run_dir)
        row["notes"] += result.get("notes") or []
    groups = {b: {"title": t, "columns": list(c)} for b, (t, c) in GROUPS.items()}
    for row in rows.values():  # a benchmark this table does not know gets its own group
        for b, cols in row["benchmarks"].items():
            if b not in groups:
                groups[b] = {"title": b, "columns": list(cols)}
    present = {b for row in rows.values() for b in row["benchmarks"]}
    return {"groups": groups, "present": sorted(present), "rows": list(rows.values()), "skipped": skipped}


def cell_text(c: dict[str, Any] | None, sep: str = " ") -> str:
    """A cell as the table prints it: the value in %, its [95 % CI], n and ``(partial: k/N unit)`` where they apply
    (joined by ``sep``), else ``–`` (not run)."""
    if not isinstance(c, dict) or not isinstance(c.get("value"), (int, float)):
        return "–"
    text = f"{100 * c['value']:.1f}"
    ci = c.get("ci95")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci):
        text += f"{sep}[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
    if c.get("n"):
        text += f"{sep}(n={c['n']})"
    partial = c.get("partial")
    if isinstance(partial, dict):
        text += f"{sep}(partial: {partial.get('covered')}/{partial.get('of')} {partial.get('unit') or 'parts'})"
    return text


def _partial_notes(table: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """What a row's partial aggregates were computed over, one note each."""
    out = []
    for b, g in table["groups"].items():
        cols = row["benchmarks"].get(b)
        for c in g["columns"] if isinstance(cols, dict) else []:
            p = cols[c].get("partial") if isinstance(cols.get(c), dict) else None
            if isinstance(p, dict):
                missing = ", ".join(map(str, p.get("not_run") or [])) or "?"
                out.append(f"{g['title']} {c} is partial ({p.get('covered')}/{p.get('of')} "
                           f"{p.get('unit') or 'parts'}); not run or not scored: {missing}")
    return out


def layout(table: dict[str, Any], sep: str = " ") -> dict[str, Any]:
    """The table as text, shared by ``awm bench report`` and the TUI's report screen: the groups (title and
    columns), one row of cell texts per model (the model first; ``sep`` between a value, its CI and n), and the
    footer notes."""
    groups = [(g["title"], list(g["columns"])) for g in table["groups"].values()]
    rows = []
    for row in table["rows"]:
        cells = [row["model"]]
        for b, g in table["groups"].items():
            cols = row["benchmarks"].get(b)
            cells += [cell_text(cols.get(c), sep) if isinstance(cols, dict) else "–" for c in g["columns"]]
        rows.append(cells)
    absent = [g["title"] for b, g in table["groups"].items() if b not in table["present"]]
    notes = ["Values are percentages; [95 % CI] where a column is a proportion; n = items scored; – = not run "
             "or nothing scored (never counted as 0)."]
    partial = {row["model"]: _partial_notes(table, row) for row in table["rows"]}
    if any(partial.values()):
        notes.append("(partial: k/N …) = an aggregate over only the k of N categories or domains with a score.")
    if absent:
        notes.append("No runs given for: " + ", ".join(absent) + ".")
    for row in table["rows"]:
        notes += [f"- {row['model']}: {n}" for n in row["notes"] + partial[row["model"]]]
    return {"groups": groups, "rows": rows, "notes": notes}


def markdown(table: dict[str, Any]) -> str:
    shown = layout(table)
    header, under, sub = ["Model"], ["---"], [""]
    for title, columns in shown["groups"]:
        for i, col in enumerate(columns):
            header.append(title if i == 0 else "")
            sub.append(col)
            under.append("---:")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(under) + "|", "| " + " | ".join(sub) + " |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in shown["rows"]]
    return "\n".join(lines + [""] + shown["notes"]) + "\n"


def to_json(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=2, ensure_ascii=False)
