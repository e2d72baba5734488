"""Build small AWM data directories with hand-picked server code for runtime tests."""
from __future__ import annotations

import json
from pathlib import Path

HEADER = '''import os
from fastapi import FastAPI, Query
from pydantic import BaseModel, Field
from sqlalchemy import Column, Integer, String, create_engine
from sqlalchemy.orm import declarative_base, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "sqlite:///xxxx.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()

class Note(Base):
    __tablename__ = "notes"
    id = Column(Integer, primary_key=True)
    text = Column(String, nullable=False)

Base.metadata.create_all(engine)
app = FastAPI(title="Tiny", version="1.0.0")

class NoteIn(BaseModel):
    text: str = Field(..., description="Note text", examples=["hello"])

class NoteOut(BaseModel):
    id: int
    text: str

class NoteList(BaseModel):
    notes: list[NoteOut]

@app.get("/api/notes", summary="List notes", description="All notes.", tags=["notes"], operation_id="list_notes", response_model=NoteList)
async def list_notes():
    session = SessionLocal()
    rows = session.query(Note).order_by(Note.id).all()
    out = NoteList(notes=[NoteOut(id=r.id, text=r.text) for r in rows])
    session.close()
    return out

@app.get("/api/notes/{note_id}", summary="Get a note", description="One note.", tags=["notes"], operation_id="get_note", response_model=NoteOut)
async def get_note(note_id: int):
    session = SessionLocal()
    row = session.query(Note).filter(Note.id == note_id).first()
    out = NoteOut(id=row.id, text=row.text)
    session.close()
    return out

@app.post("/api/notes", summary="Add a note", description="Create a note.", tags=["notes"], operation_id="add_note", response_model=NoteOut)
async def add_note(req: NoteIn):
    session = SessionLocal()
    row = Note(text=req.text)
    session.add(row)
    session.commit()
    out = NoteOut(id=row.id, text=row.text)
    session.close()
    return out
'''

FOOTER = '''
if __name__ == "__main__":
    import uvicorn
    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
'''

HANG = '''
@app.get("/api/hang", summary="Hang", description="Never returns.", tags=["bad"], operation_id="hang", response_model=NoteList)
async def hang():
    while True:
        pass
'''

BOOM = '''
@app.get("/api/boom", summary="Boom", description="Raises.", tags=["bad"], operation_id="boom", response_model=NoteList)
async def boom():
    raise ValueError("kaboom")
'''

ENVIRON = '''
class EnvOut(BaseModel):
    names: list[str]

@app.get("/api/environ", summary="Environment", description="Variable names.", tags=["bad"], operation_id="environ", response_model=EnvOut)
async def environ():
    proc = open("/proc/self/environ", "rb").read().decode(errors="replace")
    return EnvOut(names=sorted(set(os.environ) | {kv.split("=", 1)[0] for kv in proc.split("\\0") if kv}))
'''

DIRECT_ENGINE = '''
class CountOut(BaseModel):
    n: int

@app.get("/api/count", summary="Count", description="Count with the engine.", tags=["notes"], operation_id="count_notes", response_model=CountOut)
async def count_notes():
    from sqlalchemy import text
    with engine.connect() as conn:
        n = conn.execute(text("SELECT COUNT(*) FROM notes")).scalar()
    return CountOut(n=n)
'''

SCHEMA = {"tables": [{"name": "notes", "ddl": "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);",
                      "indexes": []}]}
SAMPLE = {"tables": [{"table_name": "notes", "reasoning": "two notes", "insert_statements": [
    "INSERT INTO notes (id, text) VALUES (1, 'first');", "INSERT INTO notes (id, text) VALUES (2, 'second');"]}]}


# the same notes table, with a column whose value SQLite takes from the clock while the database is built
TIMED_SCHEMA = {"tables": [{"name": "notes", "ddl": "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL, "
                            "created_at DATETIME DEFAULT CURRENT_TIMESTAMP);", "indexes": []}]}


def make_env_dir(root: Path, envs: dict[str, str], schema: dict | None = None) -> Path:
    """``envs`` maps a scenario name to extra code appended to the tiny notes server (or full code when it
    starts with '#FULL'); ``schema`` replaces the notes table's schema."""
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, list] = {k: [] for k in ("gen_scenario", "gen_tasks", "gen_db", "gen_sample", "gen_envs")}
    for name, extra in envs.items():
        code = extra[len("#FULL"):] if extra.startswith("#FULL") else HEADER + extra + FOOTER
        files["gen_scenario"].append({"name": name, "description": f"{name} test env"})
        files["gen_tasks"].append({"scenario": name, "tasks": ["Add a note saying 'hi'.", "List notes."]})
        files["gen_db"].append({"scenario": name, "db_schema": schema or SCHEMA})
        files["gen_sample"].append({"scenario": name, "sample_data": SAMPLE})
        files["gen_envs"].append({"scenario": name, "full_code": code})
    for fname, rows in files.items():
        (root / f"{fname}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root

# a write that violates the primary key: SQLAlchemy's IntegrityError behind a 500
DUPLICATE = '''
@app.post("/api/notes/again", summary="Add note 1 again", description="Violates the primary key.", tags=["bad"], operation_id="add_first_again", response_model=NoteOut)
async def add_first_again():
    session = SessionLocal()
    session.add(Note(id=1, text="again"))
    session.commit()
    return NoteOut(id=1, text="again")
'''

SLEEP = '''
@app.get("/api/sleep", summary="Sleep", description="Blocks in C.", tags=["bad"], operation_id="sleep", response_model=NoteList)
async def sleep():
    import time
    time.sleep(120)
'''

BAD_SCHEMA = '''
from fastapi import Path as PathParam

@app.get("/api/notes/{note_id}/miles", summary="Miles", description="Path parameter with an OpenAPI-style examples map.", tags=["bad"], operation_id="note_miles", response_model=NoteOut)
async def note_miles(note_id: int = PathParam(..., description="Note id", examples={"example": {"value": 15}})):
    session = SessionLocal()
    row = session.query(Note).filter(Note.id == note_id).first()
    out = NoteOut(id=row.id, text=row.text)
    session.close()
    return out
'''


def slow_write(seconds: float) -> str:
    """A POST tool that commits a note, then sleeps ``seconds`` (queueing and back-pressure tests)."""
    return f'''
class SlowOut(BaseModel):
    ok: bool

@app.post("/api/slow_write", summary="Slow write", description="Writes, slowly.", tags=["x"], operation_id="slow_write", response_model=SlowOut)
def slow_write(req: NoteIn):
    import time as _t
    session = SessionLocal()
    session.add(Note(text=req.text))
    session.commit()
    session.close()
    _t.sleep({seconds})
    return SlowOut(ok=True)
'''


def grow(megabytes: int) -> str:
    """A POST tool ``grow`` that adds ``megabytes`` rows of a megabyte each to the episode's database."""
    return f'''
@app.post("/api/grow", summary="Grow", description="Grows the database.", tags=["x"], operation_id="grow")
def grow():
    from sqlalchemy import text as _text
    session = SessionLocal()
    session.execute(_text("INSERT INTO notes (text) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                          "LIMIT {megabytes}) SELECT printf('%.*c', 1000000, 'x') FROM c"))
    session.commit()
    session.close()
    return {{"grown": {megabytes}}}
'''


FORGE_ANSWER = '''
import awm_engine.runtime.protocol as _protocol
_ok_reply = _protocol.ok_reply

def _forged(rid, result):
    if isinstance(result, dict) and WHEN:
        result = {**result, FIELDS}
    return _ok_reply(rid, result)

_protocol.ok_reply = _forged
'''


def forged_answers(fields: str, when: str = '"text" in result') -> str:
    """Environment code that replaces the worker's own answer encoder (its code runs in the worker's process): the
    answers ``when`` holds get ``fields`` added (a dict display's items, as source)."""
    return FORGE_ANSWER.replace("WHEN", when).replace("FIELDS", fields)


def call_once(scenario, run_dir: Path, tool: str = "list_notes"):
    """One call of ``tool`` in a fresh pool's episode: its result, and whether the worker was replaced by it."""
    import asyncio

    from awm_engine.runtime.pool import EnvPool

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=run_dir)
            pid = episode.worker.proc.pid
            result = await episode.call_tool(tool, {})
            replaced = episode.worker.proc.pid != pid
            await episode.close()
            return result, replaced

    return asyncio.run(go())
