"""awm's own prompts for each synthesis stage (what each must achieve: spec/awm-format.md §10.1).

Every user prompt starts with a one-line header ``[awm gen · stage: S · scenario: X · attempt i/n]`` so logs,
and scripted test models, can tell the stage, scenario and attempt apart.
"""
from __future__ import annotations

import json
from typing import Any


def header(stage: str, scenario: str, attempt: int, attempts: int, task: int | None = None) -> str:
    where = f" · task {task}" if task is not None else ""
    return f"[awm gen · stage: {stage} · scenario: {scenario}{where} · attempt {attempt}/{attempts}]"


def guidance_block(guidance: str | None) -> str:
    if not guidance:
        return ""
    return ("\n\nEarlier attempts at this step failed. Avoid every one of these problems this time:\n"
            f"{guidance.strip()}\n")


SCENARIO_SYSTEM = (
    "You design simulated web applications for training software agents. Each one must be a believable, "
    "CRUD-heavy service whose whole state fits in a small SQLite database: users act on records through an API "
    "(search, create, update, delete, book, pay, review…). Avoid anything that needs real-world side effects, "
    "live data feeds or media processing.")


def scenario_user(examples: list[dict[str, Any]], count: int, avoid: list[str]) -> str:
    shown = "\n".join(f"- {e.get('name')}: {str(e.get('description') or '')[:300]}" for e in examples)
    taken = ", ".join(avoid[:200]) or "(none yet)"
    return (
        f"Examples of the kind of application we want:\n{shown}\n\n"
        f"Write {count} NEW applications, each clearly different from the examples and from these existing ones: "
        f"{taken}.\nFor each give a short unique name and a 150-300 word description of what users can do and "
        "which records the service keeps.\n"
        'Answer with JSON only: {"scenarios": [{"name": "...", "description": "..."}, ...]}')


TASK_SYSTEM = (
    "You write realistic requests that a logged-in user (user id 1) would give an assistant operating a web "
    "application through its API. Each request is one sentence, concrete (names, amounts, dates), solvable with "
    "a few API calls, and checkable afterwards from the application's database.")


def task_user(name: str, description: str, count: int) -> str:
    return (f"Application: {name}\n{description}\n\nWrite exactly {count} distinct requests of varied difficulty "
            "(look-ups, creations, updates, deletions, multi-step changes). Do not mention logging in.\n"
            'Answer with JSON only: {"tasks": ["...", "..."]}')


DB_SYSTEM = (
    "You are a database designer. You write minimal but complete SQLite schemas that can back a web "
    "application's API and every listed user request. Use one CREATE TABLE statement per table, INTEGER PRIMARY "
    "KEY ids, foreign keys where records refer to each other, no authentication tables or password fields (the "
    "current user is the row with id 1 of the users table).")


def db_user(name: str, description: str, tasks: list[str]) -> str:
    listed = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(tasks))
    return (f"Application: {name}\n{description}\n\nUser requests the data must support:\n{listed}\n\n"
            "Each table: its name, exactly one CREATE TABLE statement (SQLite syntax), and a list of CREATE INDEX "
            "statements (one statement per string).\n"
            'Answer with JSON only: {"tables": [{"name": "...", "ddl": "CREATE TABLE ...;", "indexes": ["CREATE '
            'INDEX ...;"]}]}')


SAMPLE_SYSTEM = (
    "You write realistic seed data for a SQLite database. Every INSERT names its columns explicitly, is one "
    "statement per string, respects foreign keys (parents before children) and the constraints of the schema. "
    "User id 1 exists first. The data must make every listed user request possible (the records it mentions "
    "exist with the right values).")


def _schema_and_tasks(name: str, tables: list[dict[str, Any]], tasks: list[str], purpose: str) -> str:
    ddl = "\n".join(str(t.get("ddl")) for t in tables if isinstance(t, dict))
    listed = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(tasks))
    return f"Application: {name}\n\nSchema:\n{ddl}\n\n{purpose}:\n{listed}\n\n"


def sample_user(name: str, tables: list[dict[str, Any]], tasks: list[str]) -> str:
    return (_schema_and_tasks(name, tables, tasks, "User requests the data must support") +
            "Write a handful of rows per table (more where lists matter), in an order that satisfies foreign keys.\n"
            'Answer with JSON only: {"tables": [{"table_name": "...", "reasoning": "why these rows, <=100 words", '
            '"insert_statements": ["INSERT INTO t (a, b) VALUES (1, \'x\');"]}]}')


SPEC_SYSTEM = (
    "You design REST APIs for software agents: small, atomic endpoints grounded in an existing database schema, "
    "each doing one thing, with unique snake_case operation ids and parameters described precisely.")


def spec_user(name: str, tables: list[dict[str, Any]], tasks: list[str]) -> str:
    return (_schema_and_tasks(name, tables, tasks, "Requests the API must make possible") +
            "Group endpoints by resource. For each endpoint give path, method (GET|POST|PUT|PATCH|DELETE), summary "
            "(<=80 chars), description (one line), operation_id, tags, request_params ({name: {type, param_type: "
            "query|path|body, required, description, example}}), response ({field: {type, description, example}}), "
            "required_tables and required_fields ({table: [columns]}).\n"
            'Answer with JSON only: {"api_groups": [{"group_name": "...", "endpoints": [...]}]}')


ENV_SYSTEM = (
    "You write complete, runnable Python web services. Output one self-contained module and nothing else: no "
    "prose, no comments.")


def env_user(name: str, tables: list[dict[str, Any]], spec: dict[str, Any]) -> str:
    ddl = "\n".join(str(t.get("ddl")) for t in tables if isinstance(t, dict))
    return (
        f"Application: {name}\n\nSQLite schema (the database already exists with data):\n{ddl}\n\n"
        f"API specification:\n{json.dumps(spec, ensure_ascii=False)[:60000]}\n\n"
        "Implement every endpoint of the specification as one FastAPI module:\n"
        "- SQLAlchemy ORM models mapping the existing tables (declarative_base, sessionmaker named SessionLocal, "
        "Base.metadata.create_all(engine) after the models); the engine is create_engine(DATABASE_PATH, "
        "connect_args={\"check_same_thread\": False}) with DATABASE_PATH = os.getenv(\"DATABASE_PATH\", "
        "\"sqlite:///app.db\").\n"
        "- Pydantic v2 request and response models (ConfigDict(from_attributes=True), Field with description and "
        "example).\n"
        "- Every route decorator has summary, description, tags, operation_id (exactly the specification's) and "
        "response_model; handlers are async and open and close a session per request; the current user is id 1.\n"
        "- No try/except, no HTTPException, no JSONResponse, no comments.\n"
        "- End with: if __name__ == \"__main__\": then, indented, import uvicorn, read HOST and PORT from the "
        "environment (defaults 127.0.0.1 and 8000) and uvicorn.run(app, host=host, port=port).\n"
        "Answer with the Python source only.")


VERIFIER_SYSTEM = {
    "sql": ("You write Python functions that inspect two SQLite databases — the state before and after an agent "
            "worked on a request — and collect the facts a reviewer needs to decide whether the request was "
            "fulfilled. They only read, never write."),
    "code": ("You write deterministic Python checks that decide from two SQLite databases — before and after an "
             "agent worked on a request — and the agent's final answer whether the request was fulfilled. They "
             "only read, never write, and say complete only when the evidence is unambiguous."),
}


def verifier_user(mode: str, name: str, task: str, dump: str) -> str:
    if mode == "code":
        contract = (
            "Write `def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None "
            "= None) -> dict` returning {\"result\": \"complete\"} only when the final database (and, for "
            "questions, the final answer) shows the request done, else {\"result\": \"others\"}. On the initial "
            "database the request is not yet done, so it must return others there.\n"
            'Answer with JSON only: {"reasoning": "...", "verification_strategy": "query_based|modification_based|'
            'combined", "key_checks": ["..."], "python_code": "...", "function_name": "verify_task_completion"}')
    else:
        contract = (
            "Write `def verify_task(initial_db_path: str, final_db_path: str) -> dict` that opens both databases "
            "read-only with sqlite3 and returns a JSON-serializable dict of the facts that show whether the request "
            "was fulfilled (relevant rows before and after, counts, differences).\n"
            'Answer with JSON only: {"reasoning": "...", "python_code": "...", "function_name": "verify_task", '
            '"success_criteria": "...", "failure_criteria": "..."}')
    return (f"Application: {name}\nRequest: {task}\n\nThe initial database:\n{dump}\n\n"
            "Use only the standard library (sqlite3, json). " + contract)


SUMMARY_SYSTEM = (
    "You review failures of generated artifacts and turn raw error messages into short, concrete instructions "
    "that prevent them next time. Name the offending table, statement, function or line; give the fix. No "
    "preamble.")


def summary_user(stage: str, scenario: str, errors: str) -> str:
    return (f"[awm gen · summarize errors of {stage} · scenario: {scenario}]\n"
            f"These errors came from running what was generated at the {stage} step:\n{errors}\n\n"
            "Write at most 10 bullet points of guidance.")
