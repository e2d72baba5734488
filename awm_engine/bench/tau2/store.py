"""A domain's state as an SQLite file, so a τ² episode has an ``initial.db`` and a ``final.db`` like any AWM
episode (database diffs, the TUI's Data tab, replays, attach after a worker restart).

Each collection of a database is a table — ``flights``, ``users``, ``reservations``; ``products``, ``users``,
``orders``; ``plans``, ``customers``, ``lines``, ``bills``, ``devices`` — and the telecom phone's ``device`` and
``surroundings`` are the one-row tables ``user_device`` and ``user_surroundings``. A row is one record: ``_key``
(its dict key or id; the primary key, so diffs match records), ``_pos`` (its position: order matters for lists),
then one column per field — scalars as SQLite values, nested structures as JSON text. ``_awm_tau2`` holds the
domain, the task and the environment's hidden state (the VPN quirk). ``read_state`` rebuilds the pydantic
databases exactly; the evaluator never reads these files (it replays), they are for people and recovery.
"""
from __future__ import annotations

import datetime
import json
import sqlite3
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

META_TABLE = "_awm_tau2"
FORMAT = "1"
USER_PREFIX = "user_"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _strip_optional(annotation: Any) -> Any:
    """``X`` for ``Optional[X]`` / ``X | None``; anything else as it is."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def column_kind(annotation: Any) -> str:
    """How a field is stored: text, integer, real, bool (0/1) or json."""
    t = _strip_optional(annotation)
    if typing.get_origin(t) is typing.Literal:
        return "text"
    if t is bool:
        return "bool"
    if t is int:
        return "integer"
    if t is float:
        return "real"
    if t is str or (isinstance(t, type) and issubclass(t, (Enum, datetime.date))):
        return "text"
    return "json"


SQL_TYPES = {"text": "TEXT", "integer": "INTEGER", "real": "REAL", "bool": "INTEGER", "json": "TEXT"}


class Collection:
    """One table: a field of a database model holding a dict or list of records, or a single record."""

    def __init__(self, db_name: str, field: str, annotation: Any):
        self.db_name, self.field = db_name, field
        self.table = (USER_PREFIX if db_name == "user_db" else "") + field
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is dict:
            self.shape, self.model = "dict", args[1]
        elif origin is list:
            self.shape, self.model = "list", args[0]
        else:
            self.shape, self.model = "single", annotation
        self.columns = {name: column_kind(info.annotation) for name, info in self.model.model_fields.items()}

    def ddl(self) -> str:
        cols = ", ".join(f"{_q(c)} {SQL_TYPES[k]}" for c, k in self.columns.items())
        return f"CREATE TABLE {_q(self.table)} (_key TEXT PRIMARY KEY, _pos INTEGER, {cols})"

    def records(self, value: Any) -> list[tuple[str, BaseModel | Any]]:
        if self.shape == "dict":
            return [(str(k), v) for k, v in (value or {}).items()]
        if self.shape == "list":
            out, seen = [], set()
            first = next(iter(self.columns))
            for pos, item in enumerate(value or []):
                key = str(getattr(item, first, pos))
                if key in seen:
                    key = f"{key}#{pos}"
                seen.add(key)
                out.append((key, item))
            return out
        return [(self.field, value)]

    def row(self, record: Any) -> tuple:
        data = record.model_dump(mode="json", warnings=False) if isinstance(record, BaseModel) else (record or {})
        out = []
        for name, kind in self.columns.items():
            value = data.get(name) if isinstance(data, dict) else None
            if value is None:
                out.append(None)
            elif kind == "json":
                out.append(json.dumps(value, ensure_ascii=False, default=str))
            elif kind == "bool":
                out.append(1 if value else 0) if isinstance(value, bool) else out.append(value)
            else:
                out.append(value)
        return tuple(out)

    def decode(self, values: tuple) -> dict[str, Any]:
        out = {}
        for (name, kind), value in zip(self.columns.items(), values):
            if value is not None and kind == "json":
                value = json.loads(value)
            elif value is not None and kind == "bool" and isinstance(value, int):
                value = bool(value)
            out[name] = value
        return out


def collections_of(databases: dict[str, BaseModel]) -> list[Collection]:
    return [Collection(db_name, field, info.annotation)
            for db_name, db in databases.items() for field, info in type(db).model_fields.items()]


class StateStore:
    """Writes a domain's databases to one SQLite file and keeps it up to date with few writes (only the rows
    that changed since the last write)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._rows: dict[tuple[str, str], tuple] = {}
        self._fingerprint: str | None = None
        self._meta: dict[str, str] = {}

    def write_all(self, databases: dict[str, BaseModel], meta: dict[str, str]) -> None:
        self.path.unlink(missing_ok=True)
        self._rows.clear()
        conn = sqlite3.connect(self.path)
        try:
            conn.execute(f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT)")
            for collection in collections_of(databases):
                conn.execute(collection.ddl())
            self._sync(conn, databases)
            self._write_meta(conn, {"format": FORMAT, **meta})
            conn.commit()
        finally:
            conn.close()

    def update(self, databases: dict[str, BaseModel], meta: dict[str, str] | None = None) -> bool:
        """Write what changed; returns whether anything did."""
        fingerprint = "|".join(db.model_dump_json(warnings=False) for db in databases.values())
        meta = {k: v for k, v in (meta or {}).items() if self._meta.get(k) != v}
        if fingerprint == self._fingerprint and not meta:
            return False
        conn = sqlite3.connect(self.path)
        try:
            changed = self._sync(conn, databases)
            if meta:
                self._write_meta(conn, meta)
            conn.commit()
        finally:
            conn.close()
        self._fingerprint = fingerprint
        return changed

    def adopt(self, databases: dict[str, BaseModel], meta: dict[str, str] | None = None) -> None:
        """Remember ``databases`` (and ``meta``) as what the file holds (after ``read_state`` or a copy of a
        written file)."""
        self._rows = {}
        self._meta = dict(meta or {})
        for collection in collections_of(databases):
            db = databases[collection.db_name]
            for key, record in collection.records(getattr(db, collection.field)):
                self._rows[(collection.table, key)] = collection.row(record)
        self._fingerprint = "|".join(db.model_dump_json(warnings=False) for db in databases.values())

    def _write_meta(self, conn: sqlite3.Connection, meta: dict[str, str]) -> None:
        self._meta.update(meta)
        conn.executemany(f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES (?, ?)",
                         [(str(k), None if v is None else str(v)) for k, v in meta.items()])

    def _sync(self, conn: sqlite3.Connection, databases: dict[str, BaseModel]) -> bool:
        changed = False
        for collection in collections_of(databases):
            db = databases[collection.db_name]
            table, cols = _q(collection.table), list(collection.columns)
            current = collection.records(getattr(db, collection.field))
            keys = set()
            for pos, (key, record) in enumerate(current):
                keys.add(key)
                row = collection.row(record)
                old = self._rows.get((collection.table, key))
                if old == row and old is not None:
                    continue
                changed = True
                if old is None:
                    conn.execute(f"INSERT OR REPLACE INTO {table} (_key, _pos, {', '.join(map(_q, cols))}) "
                                 f"VALUES (?, ?, {', '.join('?' for _ in cols)})", (key, pos, *row))
                else:
                    sets = ", ".join(f"{_q(c)} = ?" for c in cols)
                    conn.execute(f"UPDATE {table} SET _pos = ?, {sets} WHERE _key = ?", (pos, *row, key))
                self._rows[(collection.table, key)] = row
            for gone in [k for (t, k) in self._rows if t == collection.table and k not in keys]:
                conn.execute(f"DELETE FROM {table} WHERE _key = ?", (gone,))
                del self._rows[(collection.table, gone)]
                changed = True
        return changed


def read_meta(path: Path | str) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    finally:
        conn.close()


def read_state(path: Path | str, models: dict[str, type[BaseModel]]) -> dict[str, BaseModel]:
    """The databases a state file holds (``models``: database name -> its model class)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out: dict[str, BaseModel] = {}
    try:
        data: dict[str, dict[str, Any]] = {name: {} for name in models}
        for name, model in models.items():
            for field, info in model.model_fields.items():
                collection = Collection(name, field, info.annotation)
                cols = ", ".join(_q(c) for c in collection.columns)
                rows = conn.execute(f"SELECT _key, {cols} FROM {_q(collection.table)} ORDER BY _pos").fetchall()
                records = [(row[0], collection.decode(row[1:])) for row in rows]
                if collection.shape == "dict":
                    data[name][field] = {k: r for k, r in records}
                elif collection.shape == "list":
                    data[name][field] = [r for _, r in records]
                elif records:
                    data[name][field] = records[0][1]
            out[name] = model.model_validate(data[name])
    finally:
        conn.close()
    return out
