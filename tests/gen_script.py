"""Canned model replies for synthesis tests: one small "Tiny Lending Library" scenario whose every stage fails
first (prose instead of JSON, a truncated reply, broken DDL, failing inserts, a refusal and an empty reply, a
server that crashes on start, a verifier that raises) and is repaired on the next attempt."""
from __future__ import annotations

import json

SEEDS = [{"name": "Goodreads", "description": "A site where readers track books they read, rate them and write "
                                              "reviews, and follow friends' reading."},
         {"name": "Eventbrite", "description": "Organisers publish events and sell tickets; attendees browse, "
                                               "register, and manage their orders."}]

SCENARIO = {"name": "Tiny Lending Library",
            "description": "A neighbourhood lending library where members browse a catalogue of books, borrow "
                           "available copies and return them. The service keeps members, books with their "
                           "availability, and loans with due dates."}
# too close to a seed: the diversity filter must reject it
NEAR_SEED = {"name": "Good Reads Club", "description": "A site where readers track books they read, rate them and "
                                                      "write reviews, and follow friends' reading."}

TASKS = ["Borrow the book 'Dune' for me.", "List every book that is currently available.",
         "Return my loan of 'Emma'."]

GOOD_SCHEMA = {"tables": [
    {"name": "users", "ddl": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);", "indexes": []},
    {"name": "books", "ddl": "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL, "
                             "available INTEGER NOT NULL DEFAULT 1);",
     "indexes": ["CREATE INDEX idx_books_title ON books(title);"]},
    {"name": "loans", "ddl": "CREATE TABLE loans (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL "
                             "REFERENCES users(id), book_id INTEGER NOT NULL REFERENCES books(id), returned INTEGER "
                             "NOT NULL DEFAULT 0);", "indexes": []}]}
BROKEN_SCHEMA = {"tables": [
    GOOD_SCHEMA["tables"][0],
    {"name": "books", "ddl": "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL,, available);",
     "indexes": []},
    {"name": "loans", "ddl": "CREATE TABLE loans (id INTEGER PRIMARY KEY, user_id INTEGER); DROP TABLE users;",
     "indexes": []}]}

GOOD_SAMPLE = {"tables": [
    {"table_name": "users", "reasoning": "the member", "insert_statements": [
        "INSERT INTO users (id, name) VALUES (1, 'Ada');"]},
    {"table_name": "books", "reasoning": "catalogue", "insert_statements": [
        "INSERT INTO books (id, title, available) VALUES (1, 'Dune', 1);",
        "INSERT INTO books (id, title, available) VALUES (2, 'Emma', 0);"]},
    {"table_name": "loans", "reasoning": "Emma is on loan", "insert_statements": [
        "INSERT INTO loans (id, user_id, book_id, returned) VALUES (1, 1, 2, 0);"]}]}
FAILING_SAMPLE = {"tables": [
    {"table_name": "loans", "reasoning": "children first: foreign keys fail", "insert_statements": [
        "INSERT INTO loans (id, user_id, book_id, returned) VALUES (1, 7, 9, 0);",
        "INSERT INTO loans (id, user_id, book_id, shelf) VALUES (2, 1, 1, 'A');"]},
    {"table_name": "users", "reasoning": "the member", "insert_statements": [
        "INSERT INTO users (id, name) VALUES (1, 'Ada');"]}]}

SPEC = {"api_groups": [{"group_name": "Books", "endpoints": [
    {"path": "/api/books", "method": "GET", "summary": "List books", "description": "List books, optionally only "
     "available ones.", "operation_id": "list_books", "tags": ["books"],
     "request_params": {"available_only": {"type": "boolean", "param_type": "query", "required": False,
                                           "description": "only available books", "example": True}},
     "response": {"books": {"type": "array", "description": "books", "example": []}},
     "required_tables": ["books"], "required_fields": {"books": ["id", "title", "available"]}},
    {"path": "/api/loans", "method": "POST", "summary": "Borrow a book", "description": "Borrow an available book.",
     "operation_id": "borrow_book", "tags": ["loans"],
     "request_params": {"book_id": {"type": "integer", "param_type": "body", "required": True,
                                    "description": "the book", "example": 1}},
     "response": {"id": {"type": "integer", "description": "loan id", "example": 2}},
     "required_tables": ["loans", "books"], "required_fields": {"loans": ["id"]}}]}]}

ENV_CODE = '''import os
from typing import List

from fastapi import FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, ForeignKey, Integer, String, create_engine
from sqlalchemy.orm import declarative_base, sessionmaker

DATABASE_PATH = os.getenv("DATABASE_PATH", "sqlite:///library.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False)


class Book(Base):
    __tablename__ = "books"
    id = Column(Integer, primary_key=True)
    title = Column(String, nullable=False)
    available = Column(Integer, nullable=False, default=1)


class Loan(Base):
    __tablename__ = "loans"
    id = Column(Integer, primary_key=True, autoincrement=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    book_id = Column(Integer, ForeignKey("books.id"), nullable=False)
    returned = Column(Integer, nullable=False, default=0)


Base.metadata.create_all(engine)
app = FastAPI(title="Tiny Lending Library")


class BookOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="book id", example=1)
    title: str = Field(..., description="title", example="Dune")
    available: int = Field(..., description="1 if on the shelf", example=1)


class BorrowIn(BaseModel):
    book_id: int = Field(..., description="the book to borrow", example=1)


class LoanOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="loan id", example=2)
    book_id: int = Field(..., description="book id", example=1)


@app.get("/api/books", summary="List books", description="List books.", tags=["books"],
         operation_id="list_books", response_model=List[BookOut])
async def list_books(available_only: bool = Query(False, description="only available books")):
    session = SessionLocal()
    query = session.query(Book)
    if available_only:
        query = query.filter(Book.available == 1)
    books = query.order_by(Book.id).all()
    session.close()
    return books


@app.post("/api/loans", summary="Borrow a book", description="Borrow an available book.", tags=["loans"],
          operation_id="borrow_book", response_model=LoanOut)
async def borrow_book(body: BorrowIn):
    session = SessionLocal()
    book = session.query(Book).filter(Book.id == body.book_id).first()
    book.available = 0
    loan = Loan(user_id=1, book_id=book.id, returned=0)
    session.add(loan)
    session.commit()
    session.refresh(loan)
    session.close()
    return loan


if __name__ == "__main__":
    import uvicorn
    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
'''
CRASHING_ENV = "import os\nraise RuntimeError('the server cannot start: missing settings')\n" + ENV_CODE

VERIFIER_CODE = '''def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    before = sqlite3.connect(initial_db_path).execute("SELECT COUNT(*) FROM loans").fetchone()[0]
    after = sqlite3.connect(final_db_path).execute("SELECT COUNT(*) FROM loans").fetchone()[0]
    return {"result": "complete" if after > before else "others"}
'''
RAISING_VERIFIER = '''def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    rows = sqlite3.connect(final_db_path).execute("SELECT * FROM borrowings").fetchall()
    return {"result": "complete" if rows else "others"}
'''
ALWAYS_COMPLETE = '''def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    return {"result": "complete"}
'''


SQL_VERIFIER = {"reasoning": "loans before and after", "python_code": '''def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3
    def loans(path):
        return sqlite3.connect(path).execute("SELECT book_id, returned FROM loans ORDER BY id").fetchall()
    return {"loans_before": loans(initial_db_path), "loans_after": loans(final_db_path)}
''', "function_name": "verify_task", "success_criteria": "a new loan of the book", "failure_criteria": "no new loan"}


def _json(value) -> str:
    return json.dumps(value)


def _verifier(code: str) -> str:
    return _json({"reasoning": "count loans", "verification_strategy": "modification_based",
                  "key_checks": ["a new loan"], "python_code": code, "function_name": "verify_task_completion"})


def rule(stage: str, attempt: int | None, content: str, **extra) -> dict:
    match = [f"stage: {stage} ·"] + ([f"attempt {attempt}/"] if attempt else [])
    return {"match": match, "responses": [{"content": content, **extra}]}


def script(scenario: dict | None = None) -> dict:
    """The whole run's replies (rules keyed by stage and attempt; the stateless cursor gives each request its
    rule's single reply)."""
    scenario = scenario or SCENARIO
    return {"model": "gen-scripted", "rules": [
        {"match": "summarize errors of", "responses": [{"content": "- Follow the schema exactly; one statement "
                                                                   "per string; parents before children."}]},
        rule("scenario", 1, "Sure! Here are a few ideas for applications: a library, a gym and a bakery."),
        rule("scenario", None, _json({"scenarios": [NEAR_SEED, scenario]})),
        rule("task", 1, '{"tasks": ["Borrow the book', finish_reason="length"),
        rule("task", None, _json({"tasks": TASKS + ["An extra task that is cut off."]})),
        rule("db", 1, "```json\n" + _json(BROKEN_SCHEMA) + "\n```"),
        rule("db", None, _json(GOOD_SCHEMA)),
        rule("sample", 1, _json(FAILING_SAMPLE)),
        rule("sample", None, _json(GOOD_SAMPLE)),
        rule("spec", 1, "I'm sorry, but I can't help with that."),
        rule("spec", 2, ""),
        rule("spec", None, "Here is the specification:\n" + _json(SPEC)),
        rule("env", 1, "```python\n" + CRASHING_ENV + "```"),
        rule("env", None, ENV_CODE),
        rule("verifier-code", 1, _verifier(RAISING_VERIFIER)),
        rule("verifier-code", 2, _verifier(ALWAYS_COMPLETE)),
        rule("verifier-code", None, _verifier(VERIFIER_CODE)),
        rule("verifier-sql", None, _json(SQL_VERIFIER)),
    ]}
