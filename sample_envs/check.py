"""Check hand-written sample environments end to end, straight from their sources.

    .venv/bin/python sample_envs/check.py [ENV_DIR_NAME ...]

For each environment: size rules (>= 8 tables, >= 40 rows, >= 15 tools, 10 tasks), a database
build with zero failed statements, every route listed, every task's reference solution run
against a fresh database (each call must succeed), the code verifier saying "complete" after the
solution and "others" for an agent that did nothing, and the sql verifier returning a dict.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from awm_engine.db.build import build_database  # noqa: E402
from awm_engine.runtime.openapi_tools import http_call_for, tools_from_openapi  # noqa: E402


def load_app(server_py: Path, db_file: Path, tag: str):
    os.environ["DATABASE_PATH"] = f"sqlite:///{db_file}"
    spec = importlib.util.spec_from_file_location(f"sample_server_{tag}", server_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


def run_verifier(code: str, func: str, **kwargs):
    namespace: dict = {}
    exec(compile(code, "<verifier>", "exec"), namespace)
    return namespace[func](**kwargs)


def check_env(env_dir: Path) -> list[str]:
    from fastapi.testclient import TestClient

    problems: list[str] = []
    load = lambda name: json.loads((env_dir / name).read_text())  # noqa: E731
    schema, sample, tasks, solutions = load("schema.json"), load("sample.json"), load("tasks.json"), load("solutions.json")
    n_rows = sum(len(t["insert_statements"]) for t in sample["tables"])
    if len(schema["tables"]) < 8:
        problems.append(f"only {len(schema['tables'])} tables (need >= 8)")
    if n_rows < 40:
        problems.append(f"only {n_rows} sample rows (need >= 40)")
    if len(tasks) != 10:
        problems.append(f"{len(tasks)} tasks (need 10)")
    work = Path(tempfile.mkdtemp(prefix="awm_check_"))
    template = work / "template.db"
    report = build_database(env_dir.name, schema, sample, template)
    for f in report.failures:
        problems.append(f"build: {f.message}")
    if report.fatal:
        problems.append(f"build: {report.fatal}")
    app = load_app(env_dir / "server.py", template, "probe")
    tools = {t.name: t for t in tools_from_openapi(app.openapi())}
    if len(tools) < 15:
        problems.append(f"only {len(tools)} tools (need >= 15)")
    by_task = {s["task_idx"]: s for s in solutions}
    for idx in range(len(tasks)):
        sol = by_task.get(idx)
        if sol is None:
            problems.append(f"task {idx}: no reference solution")
            continue
        initial, final = work / f"t{idx}_initial.db", work / f"t{idx}_final.db"
        shutil.copy(template, initial)
        shutil.copy(template, final)
        app = load_app(env_dir / "server.py", final, f"t{idx}")
        client = TestClient(app, raise_server_exceptions=False)
        for call in sol["calls"]:
            tool = tools.get(call["tool"])
            if tool is None:
                problems.append(f"task {idx}: unknown tool {call['tool']}")
                continue
            req = http_call_for(tool, call.get("arguments") or {})
            resp = client.request(req.method.upper(), req.path, params=req.query, json=req.body)
            if resp.status_code >= 400:
                problems.append(f"task {idx}: {call['tool']} -> HTTP {resp.status_code}: {resp.text[:300]}")
        code = (env_dir / "verifiers" / f"code_{idx:02d}.py").read_text()
        sql = (env_dir / "verifiers" / f"sql_{idx:02d}.py").read_text()
        try:
            done = run_verifier(code, "verify_task_completion", initial_db_path=str(initial),
                                final_db_path=str(final), final_answer=sol.get("final_answer", ""))
            idle = run_verifier(code, "verify_task_completion", initial_db_path=str(initial),
                                final_db_path=str(initial), final_answer="")
            info = run_verifier(sql, "verify_task", initial_db_path=str(initial), final_db_path=str(final))
        except Exception as exc:  # report, keep checking the other tasks
            problems.append(f"task {idx}: verifier raised {type(exc).__name__}: {exc}")
            continue
        if done != {"result": "complete"}:
            problems.append(f"task {idx}: code verifier after the reference solution gave {done}")
        if idle != {"result": "others"}:
            problems.append(f"task {idx}: code verifier for a do-nothing agent gave {idle}")
        if not isinstance(info, dict):
            problems.append(f"task {idx}: sql verifier returned {type(info).__name__}, not dict")
        else:
            json.dumps(info)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{env_dir.name}: {len(schema['tables'])} tables, {n_rows} rows, {len(tools)} tools, "
          f"{len(tasks)} tasks, {report.inserts_failed} failed inserts -> {'OK' if not problems else 'PROBLEMS'}")
    return problems


def main(argv: list[str]) -> int:
    names = argv or sorted(p.name for p in (HERE / "src").iterdir() if (p / "scenario.json").exists())
    bad = 0
    for name in names:
        problems = check_env(HERE / "src" / name)
        for p in problems:
            print("  -", p)
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
