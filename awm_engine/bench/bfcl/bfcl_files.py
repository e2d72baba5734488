"""BFCL's own file formats: result files (``BFCL_v4_<category>_result.json``, one ``{"id", "result"}`` line per
entry) and score files (``BFCL_v4_<category>_score.json``: a header line ``{"accuracy", "correct_count",
"total_count"}``, then one line per failed entry), laid out as ``<model>/<group>/<file>``.

A run exports the first sample of each entry as result files (so BFCL's own runner can score it), and
``awm bench bfcl score`` scores result files made anywhere — v3-era names and ids (``BFCL_v3_simple``,
``simple_12``, ``java_3``) are read as their v4 counterparts — with the official checkers in the sandbox.
"""
from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from awm_engine.bench.bfcl import scores
from awm_engine.bench.bfcl.categories import BY_WHEEL_NAME, CATEGORIES, category_of
from awm_engine.bench.bfcl.sandboxed import CheckerError, CheckerHost
from awm_engine.data.jsonl import dumps_text
from awm_engine.eval.results import ResultsIndex

PREFIX = "BFCL_v4"
_V3_RENAMES = {"simple": "simple_python", "java": "simple_java", "javascript": "simple_javascript"}


def model_dir(model: str) -> str:
    return model.replace("/", "_")


def _index_key(entry_id: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", entry_id.rsplit("_", 1)[-1]))


def export_results(run_dir: Path | str, index: ResultsIndex | None = None) -> Path:
    """Write the run's answers (sample 0, scored entries) as BFCL result files; returns the model's folder."""
    run_dir = Path(run_dir)
    index = index or ResultsIndex(run_dir / "results.jsonl")
    index.refresh()
    by_category: dict[str, list[dict[str, Any]]] = {}
    model = "model"
    for rid, entry in index.entries.items():
        summary = entry.summary
        if summary.get("status") != "ok" or summary.get("sample") != 0:
            continue
        record = index.record(rid)
        model = record.get("model") or model
        by_category.setdefault(record["category"], []).append({"id": record["entry_id"], "result": record["raw"]})
    root = run_dir / "bfcl" / "result" / model_dir(model)
    for name, lines in by_category.items():
        cat = CATEGORIES[name]
        folder = root / cat.group
        folder.mkdir(parents=True, exist_ok=True)
        lines.sort(key=lambda line: _index_key(line["id"]))
        (folder / f"{PREFIX}_{cat.wheel}_result.json").write_text(
            "".join(dumps_text(line) + "\n" for line in lines), encoding="utf-8")
    return root


def _wheel_id(entry_id: str) -> str:
    """A v3-era id (``simple_3``, ``java_0``, ``javascript_7``) as the wheel's id."""
    head, _, number = entry_id.rpartition("_")
    return f"{_V3_RENAMES[head]}_{number}" if head in _V3_RENAMES else entry_id


def read_result_file(path: Path | str) -> list[dict[str, Any]]:
    """The ``{"id", "result"}`` lines of one BFCL result file, ids in the wheel's form (``ValueError`` when
    a line is not such an object or names no BFCLv3 entry)."""
    lines = []
    for number, text in enumerate(Path(path).read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
            entry_id = _wheel_id(str(line["id"]))
            category_of(entry_id)
            lines.append({"id": entry_id, "result": line["result"]})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a BFCL result line ({exc})") from None
    return lines


def infer_mode(lines: list[dict[str, Any]]) -> str:
    """fc when some answer is a list of calls (``[{name: args}]``), else prompt (text answers)."""
    for line in lines:
        result = line["result"]
        multi = category_of(line["id"]).kind == "multi_turn"
        # a multi-turn answer's turns are lists of steps; anything else in it is no step (it is scored as it is)
        steps = [s for turn in result if isinstance(turn, list) for s in turn] \
            if multi and isinstance(result, list) else [result]
        if any(isinstance(s, list) for s in steps):
            return "fc"
    return "prompt"


def guess_model(path: Path) -> str:
    """The model folder of ``…/<model>/<group>/BFCL_v4_x_result.json`` (else the file's folder)."""
    parent = path.parent
    return parent.parent.name if parent.name in ("non_live", "live", "multi_turn") else parent.name


def _requests(lines: list[dict[str, Any]], mode: str) -> list[tuple[str, dict[str, Any]]]:
    return [("check", {"entry_id": line["id"], "raw": line["result"], "mode": mode})
            if category_of(line["id"]).kind == "multi_turn" else
            ("score", {"entry_id": line["id"], "raw": line["result"], "mode": mode, "display": False})
            for line in lines]


def _verdicts(lines: list[dict[str, Any]], answers: list[Any]) -> list[dict[str, Any]]:
    return [answer.verdict(line["id"]) if isinstance(answer, CheckerError) else answer["verdict"]
            for line, answer in zip(lines, answers)]


async def score_lines(lines: list[dict[str, Any]], mode: str, host: CheckerHost) -> list[dict[str, Any]]:
    """The official verdict on every line (multi-turn lines are executed and checked in the sandbox); nothing
    is computed for display. A line the checker could not answer (timeout, crash) is ``awm:checker_error``."""
    return _verdicts(lines, await asyncio.to_thread(host.map, _requests(lines, mode)))


def write_score_file(out: Path, model: str, wheel_category: str, verdicts: list[dict[str, Any]]) -> Path:
    cat = BY_WHEEL_NAME[wheel_category]
    correct = sum(bool(v.get("valid")) for v in verdicts)
    header = {"accuracy": correct / len(verdicts) if verdicts else 0.0, "correct_count": correct,
              "total_count": len(verdicts)}
    folder = out / model_dir(model) / cat.group
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{PREFIX}_{wheel_category}_score.json"
    failed = [v for v in verdicts if not v.get("valid")]
    path.write_text("".join(dumps_text(x, default=str) + "\n" for x in [header, *failed]), encoding="utf-8")
    return path


def error_type(verdict: dict[str, Any]) -> str | None:
    """The checker's error type (multi-turn verdicts keep it inside ``error``)."""
    error = verdict.get("error")
    return verdict.get("error_type") or (error.get("error_type") if isinstance(error, dict) else None)


def _entry_row(line: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """One entry's verdict as ``score --json`` lists it: the checker's error type and reason, no prompt."""
    valid = bool(verdict.get("valid"))
    error = verdict.get("error")
    reason = error.get("error_message") if isinstance(error, dict) else error
    return {"id": line["id"], "category": category_of(line["id"]).name, "valid": valid,
            "error_type": None if valid else error_type(verdict), "error": None if valid else reason}


async def score_files(paths: list[Path | str], mode: str = "auto", out: Path | str | None = None,
                      host: CheckerHost | None = None) -> dict[str, Any]:
    """Score BFCL result files, every model folder on its own (``auto``: each model's mode from its answers).

    Returns ``models``: per model its ``model``, ``mode``, the per-category table and the aggregates, and
    ``entries`` (every entry's verdict); with a single model its result is also the top level. With ``out``
    the score files written are listed under ``score_files``."""
    by_model: dict[str, dict[str, list[dict[str, Any]]]] = {}  # model -> wheel category -> lines
    seen: dict[tuple[str, str], str] = {}  # (model, entry id) -> where it was answered
    for path in dict.fromkeys(Path(p).resolve() for p in paths):  # a file named twice is read once
        lines = read_result_file(path)
        for number, line in enumerate(lines, 1):
            model, where = guess_model(path), f"{path}:{number}"
            if (model, line["id"]) in seen:  # BFCL's own runner refuses such files (its lengths no longer match)
                raise ValueError(f"{line['id']} is answered more than once for model {model} ({seen[model, line['id']]}"
                                 f" and {where}): each entry is scored once; keep one answer")
            seen[model, line["id"]] = where
            by_model.setdefault(model, {}).setdefault(category_of(line["id"]).wheel, []).append(line)
    own = host is None
    host = host or CheckerHost()
    results, written = [], []
    try:
        modes = {model: infer_mode([line for lines in groups.values() for line in lines]) if mode == "auto" else mode
                 for model, groups in by_model.items()}
        jobs = [(model, wheel_category, lines) for model, groups in by_model.items()
                for wheel_category, lines in groups.items()]
        # every line of every model in one go: the host's pool stays busy across files and models
        requests = [r for model, _, lines in jobs for r in _requests(lines, modes[model])]
        answers = iter(await asyncio.to_thread(host.map, requests))
        verdicts = [_verdicts(lines, [next(answers) for _ in lines]) for _, _, lines in jobs]
    finally:
        if own:
            host.close()
    per_model: dict[str, list[tuple[str, list, list]]] = {}
    for (model, wheel_category, lines), found in zip(jobs, verdicts):
        per_model.setdefault(model, []).append((wheel_category, lines, found))
        if out is not None:
            written.append(str(write_score_file(Path(out), model, wheel_category, found)))
    for model in sorted(per_model):
        summaries, entries = [], []
        for wheel_category, lines, found in per_model[model]:
            summaries += [{"scenario": BY_WHEEL_NAME[wheel_category].name, "task_id": line["id"], "status": "ok",
                           "label": "correct" if v.get("valid") else "incorrect"} for line, v in zip(lines, found)]
            entries += [_entry_row(line, v) for line, v in zip(lines, found)]
        held = Counter(s["scenario"] for s in summaries)
        expected = {c: held[c] for c in CATEGORIES if c in held}
        results.append({"model": model, "mode": modes[model], **scores.summarize(summaries, expected, modes[model]),
                        "entries": entries})
    single = results[0] if len(results) == 1 else {}
    return {**single, "models": results, "score_files": written}
