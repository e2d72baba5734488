"""Assemble the hand-written sources under ``sample_envs/src/<env>/`` into AWM JSONL files.

Run ``python sample_envs/build.py`` after editing a source; a test fails when the JSONL files in
``sample_envs/`` are out of date. Source layout of one environment (see README "Sample environments"):

    scenario.json        {"name": ..., "description": ...}
    tasks.json           ["task 0", ..., "task 9"]
    schema.json          {"tables": [{"name", "ddl", "indexes"}]}          -> gen_db.jsonl
    sample.json          {"tables": [{"table_name", "reasoning", "insert_statements"}]}  -> gen_sample.jsonl
    spec.json            {"api_groups": [...]}                             -> gen_spec.jsonl
    server.py            the FastAPI + SQLAlchemy module                   -> gen_envs.jsonl
    verifiers/sql_NN.py  verify_task(initial_db_path, final_db_path)       -> gen_verifier.jsonl
    verifiers/code_NN.py verify_task_completion(..., final_answer)         -> gen_verifier.pure_code.jsonl
    verifiers/meta.json  {"N": {"sql": {reasoning, success_criteria, failure_criteria},
                                "code": {reasoning, verification_strategy, key_checks}}}
    solutions.json       [{"task_idx", "calls": [{"tool", "arguments"}], "final_answer"}]  -> reference_solutions.jsonl
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
OUTPUT_FILES = ("gen_scenario.jsonl", "gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl", "gen_spec.jsonl",
                "gen_envs.jsonl", "gen_verifier.jsonl", "gen_verifier.pure_code.jsonl", "reference_solutions.jsonl")


def _norm(name: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", name.lower())).strip("_").strip()


def _load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def env_rows(env_dir: Path) -> dict[str, list[dict]]:
    scenario = _load(env_dir / "scenario.json")
    name = scenario["name"]
    norm = _norm(name)
    tasks = _load(env_dir / "tasks.json")
    sample = _load(env_dir / "sample.json")
    meta = _load(env_dir / "verifiers" / "meta.json")
    db_path = f"./outputs/databases/{norm}.db"
    rows: dict[str, list[dict]] = {f: [] for f in OUTPUT_FILES}
    rows["gen_scenario.jsonl"].append({"name": name, "description": scenario["description"]})
    rows["gen_tasks.jsonl"].append({"scenario": name, "tasks": tasks})
    rows["gen_db.jsonl"].append({"scenario": name, "db_schema": _load(env_dir / "schema.json"), "db_path": db_path})
    rows["gen_sample.jsonl"].append({
        "scenario": name, "tables_count": len(sample["tables"]),
        "inserts_count": sum(len(t["insert_statements"]) for t in sample["tables"]), "sample_data": sample})
    rows["gen_spec.jsonl"].append({"scenario": name, "api_spec": _load(env_dir / "spec.json")})
    rows["gen_envs.jsonl"].append({"scenario": name, "db_path": db_path,
                                   "full_code": (env_dir / "server.py").read_text(encoding="utf-8")})
    for idx, task in enumerate(tasks):
        for mode, fname, out, func in (("sql", f"sql_{idx:02d}.py", "gen_verifier.jsonl", "verify_task"),
                                       ("code", f"code_{idx:02d}.py", "gen_verifier.pure_code.jsonl",
                                        "verify_task_completion")):
            code = (env_dir / "verifiers" / fname).read_text(encoding="utf-8")
            raw = dict(meta[str(idx)][mode])
            raw["python_code"] = code
            raw["function_name"] = func
            rows[out].append({"scenario": norm, "task_idx": idx, "task": task,
                              "verification": {"code": code, "raw_response": json.dumps(raw, ensure_ascii=False)}})
    for sol in _load(env_dir / "solutions.json"):
        rows["reference_solutions.jsonl"].append({
            "scenario": norm, "task_idx": sol["task_idx"], "task": tasks[sol["task_idx"]],
            "calls": sol["calls"], "final_answer": sol.get("final_answer", "")})
    return rows


def render() -> dict[str, str]:
    """The text of every output file, from the sources (environments in directory-name order)."""
    merged: dict[str, list[dict]] = {f: [] for f in OUTPUT_FILES}
    for env_dir in sorted(p for p in SRC.iterdir() if (p / "scenario.json").exists()):
        for fname, rows in env_rows(env_dir).items():
            merged[fname].extend(rows)
    return {f: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) for f, rows in merged.items()}


def main() -> int:
    for fname, text in render().items():
        (HERE / fname).write_text(text, encoding="utf-8")
        print(f"wrote {fname}: {text.count(chr(10))} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
