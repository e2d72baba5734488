"""Warm a fresh worker before it is given a scenario: load a small environment of awm's own, in the shape of AWM's
generated servers (a FastAPI app of GET and POST routes with path, query and body parameters and response models
over SQLAlchemy tables), list its tools, open an episode and call two of its tools, then drop it.

The first environment a Python process loads pays for much that later ones do not (FastAPI's and pydantic's
schema machinery, SQLAlchemy's compiler caches, the OpenAPI and JSON-Schema code paths): measured, a scenario's
load took 0.67 s as the first in its process and 0.17 s after another. A spare worker pays it before any scenario
is bound, off the path of an episode's or a server's start. Nothing of it is kept: its module is unloaded and its
directory removed.
"""
from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

CODE = '''import os
from typing import List, Optional

from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel, Field
from sqlalchemy import Column, DateTime, ForeignKey, Integer, String, Text, create_engine
from sqlalchemy.orm import declarative_base, relationship, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "sqlite:///warmup.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()


class Shelf(Base):
    __tablename__ = "shelves"
    id = Column(Integer, primary_key=True)
    label = Column(String, nullable=False)


class Item(Base):
    __tablename__ = "items"
    id = Column(Integer, primary_key=True)
    shelf_id = Column(Integer, ForeignKey("shelves.id"), nullable=False)
    title = Column(String, nullable=False)
    note = Column(Text)
    added_at = Column(DateTime)
    shelf = relationship("Shelf")


app = FastAPI(title="Warm-up", version="1.0.0")


class ItemOut(BaseModel):
    id: int
    shelf_id: int
    title: str
    note: Optional[str] = None


class ItemList(BaseModel):
    items: List[ItemOut]


class ItemIn(BaseModel):
    shelf_id: int = Field(..., description="Shelf id", ge=1)
    title: str = Field(..., description="Title", min_length=1, examples=["A title"])
    note: Optional[str] = Field(None, description="Note")


@app.get("/api/items", summary="List items", tags=["items"], operation_id="list_items", response_model=ItemList)
def list_items(shelf_id: Optional[int] = Query(None, description="Filter by shelf"), limit: int = Query(20, ge=1)):
    session = SessionLocal()
    try:
        query = session.query(Item)
        if shelf_id is not None:
            query = query.filter(Item.shelf_id == shelf_id)
        rows = query.order_by(Item.id).limit(limit).all()
        return ItemList(items=[ItemOut(id=r.id, shelf_id=r.shelf_id, title=r.title, note=r.note) for r in rows])
    finally:
        session.close()


@app.get("/api/items/{item_id}", summary="Get an item", tags=["items"], operation_id="get_item",
         response_model=ItemOut)
def get_item(item_id: int):
    session = SessionLocal()
    try:
        row = session.query(Item).filter(Item.id == item_id).first()
        if row is None:
            raise HTTPException(status_code=404, detail="Item not found")
        return ItemOut(id=row.id, shelf_id=row.shelf_id, title=row.title, note=row.note)
    finally:
        session.close()


@app.post("/api/items", summary="Add an item", tags=["items"], operation_id="add_item", response_model=ItemOut)
def add_item(req: ItemIn):
    session = SessionLocal()
    try:
        row = Item(shelf_id=req.shelf_id, title=req.title, note=req.note)
        session.add(row)
        session.commit()
        return ItemOut(id=row.id, shelf_id=row.shelf_id, title=row.title, note=row.note)
    finally:
        session.close()
'''

SCHEMA = """CREATE TABLE shelves (id INTEGER PRIMARY KEY, label TEXT NOT NULL);
CREATE TABLE items (id INTEGER PRIMARY KEY, shelf_id INTEGER NOT NULL REFERENCES shelves(id), title TEXT NOT NULL,
                    note TEXT, added_at DATETIME);
INSERT INTO shelves (id, label) VALUES (1, 'first');
INSERT INTO items (id, shelf_id, title) VALUES (1, 1, 'one');"""


def warm_up() -> None:
    """Load, list, open, call and drop the warm-up environment (any failure is ignored: warming is a bonus)."""
    from awm_engine.runtime.inprocess import Episode, LoadedEnv

    work = Path(tempfile.mkdtemp(prefix="awm_warmup_"))
    try:
        template = work / "template.db"
        with sqlite3.connect(template) as db:
            db.executescript(SCHEMA)
        env = LoadedEnv("awm_warmup", CODE, template, work / "env")
        env.mcp_tools()
        episode = Episode(env, work / "episode")
        episode.call_tool_sync("list_items", {"shelf_id": 1})
        episode.call_tool_sync("add_item", {"shelf_id": 1, "title": "two"})
        episode.close_now()
        env.close()
    except Exception:  # noqa: BLE001 - a failed warm-up only costs the first load its head start
        pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
