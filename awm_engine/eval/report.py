"""Evaluation reports: a run's metrics (``metadata.json``, brought up to date), Markdown, and run comparisons.

Front ends only print what these return (``awm eval report | compare``).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from awm_engine.eval.batch import write_metadata
from awm_engine.eval.metrics import ERROR_CLASSES
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runs import load_eval_config, read_metadata

COMPARED = ("mean_reward", "completion_rate", "pass@1")  # the columns of a comparison, each as A, B, B − A


def run_metadata(run_dir: Path | str) -> dict[str, Any]:
    """The run's aggregates: its ``metadata.json`` when it covers every result line, else recomputed (and
    rewritten). ``NotAnEvalRun`` without a ``config.json``; ``NewerFormatError`` for a newer awm's files."""
    path = Path(run_dir)
    config = load_eval_config(path)
    meta = read_metadata(path)
    if meta is not None:
        index = ResultsIndex(path / "results.jsonl")
        index.refresh()
        if meta.get("rollouts") == len(index):
            return meta
    return write_metadata(path, config)


def fmt(value: Any, digits: int = 3) -> str:
    """A metric as a table cell: ``-`` for none, floats to ``digits`` places."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def aggregates(meta: dict[str, Any], overall: str = "overall") -> list[tuple[str, dict[str, Any]]]:
    """(name, aggregate) per scenario, then the whole run under the name ``overall``."""
    return [*meta["scenarios"].items(), (overall, meta["overall"])]


def pass_ks(meta: dict[str, Any]) -> list[str]:
    """Every k with a pass@k in the run (any scenario or overall), ascending."""
    return sorted({k for _, agg in aggregates(meta) for k in agg["pass_at_k"]}, key=int)


def markdown(meta: dict[str, Any]) -> str:
    ks = sorted(meta["overall"]["pass_at_k"], key=int)
    head = ["scenario", "rollouts", "mean reward", "completion"] + [f"pass@{k}" for k in ks] + \
        [f"pass^{k}" for k in ks] + list(ERROR_CLASSES)
    lines = [f"# {meta.get('model')} (k = {meta.get('k')})", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for name, agg in aggregates(meta, "**overall**"):
        row = [name, str(agg["rollouts"]), fmt(agg["mean_reward"]), fmt(agg["completion_rate"])]
        row += [fmt(agg["pass_at_k"].get(k)) for k in ks] + [fmt(agg["pass_hat_k"].get(k)) for k in ks]
        row += [str((agg.get("errors") or {}).get(c, 0)) for c in ERROR_CLASSES]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _delta(a: float | None, b: float | None) -> dict[str, float | None]:
    return {"a": a, "b": b, "delta": (b - a) if a is not None and b is not None else None}


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Per scenario (and ``overall``, last): mean reward, completion and pass@1 of run A and B, and B − A."""
    rows = []
    for name in sorted(set(a["scenarios"]) | set(b["scenarios"])) + ["overall"]:
        aa = (a["overall"] if name == "overall" else a["scenarios"].get(name)) or {}
        bb = (b["overall"] if name == "overall" else b["scenarios"].get(name)) or {}
        row: dict[str, Any] = {"scenario": name}
        for key in ("mean_reward", "completion_rate"):
            row[key] = _delta(aa.get(key), bb.get(key))
        row["pass@1"] = _delta(aa.get("pass_at_k", {}).get("1"), bb.get("pass_at_k", {}).get("1"))
        rows.append(row)
    return rows


def compare_runs(run_a: Path | str, run_b: Path | str) -> dict[str, Any]:
    """Two runs side by side: ``{"a": {run, model}, "b": {run, model}, "rows": compare_rows(...)}``."""
    a, b = run_metadata(run_a), run_metadata(run_b)
    return {"a": {"run": str(run_a), "model": a.get("model")}, "b": {"run": str(run_b), "model": b.get("model")},
            "rows": compare_rows(a, b)}
