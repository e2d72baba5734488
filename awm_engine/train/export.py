"""Training data on disk: one row per sample (``Sample.to_record``), as JSONL or Parquet.

Parquet needs pyarrow (the optional extra ``train``: ``pip install 'awm[train]'``); JSONL needs nothing.
Rows carry what TRL and verl read: conversational ``prompt``/``completion`` and ``messages`` (TRL's GRPO/SFT
formats, verl's multi-turn SFT), ``data_source``/``extra_info``/``agent_name`` (verl's RL datasets), the step
``reward``, the GRPO ``advantage`` and ``group_id``, and token ids with their mask when the endpoint returned
them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from awm_engine.data.jsonl import text_lines

FORMATS = ("jsonl", "parquet")


class MissingDependency(RuntimeError):
    """An optional library a feature needs is not installed."""


def format_for(path: Path | str, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
        return fmt
    return "parquet" if str(path).endswith(".parquet") else "jsonl"


def require_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise MissingDependency("Parquet export needs pyarrow: install awm's 'train' extra "
                                "(pip install -c constraints.txt -e '.[train]'), or export JSONL "
                                "(--format jsonl)") from None
    return pyarrow


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call in the OpenAI chat shape chat templates read (``function.name``, ``function.arguments`` a JSON
    string, as the endpoint sent it)."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    args = fn.get("arguments")
    return {"id": call.get("id"), "type": call.get("type") or "function",
            "function": {"name": fn.get("name"),
                         "arguments": args if isinstance(args, str) or args is None
                         else json.dumps(args, ensure_ascii=False)}}


def message_type(pa):
    """The Arrow type of one message: the same fields in every row, meta and native alike."""
    call = pa.struct([("id", pa.string()), ("type", pa.string()),
                      ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
    return pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                      ("tool_call_id", pa.string())])


def _parquet_message(m: dict[str, Any]) -> dict[str, Any]:
    calls = m.get("tool_calls")
    return {"role": m.get("role"), "content": m.get("content") or "",
            "tool_calls": [_tool_call(c) for c in calls] if calls else None, "tool_call_id": m.get("tool_call_id")}


MESSAGE_COLUMNS = ("prompt", "completion", "messages")


def _parquet_table(pa, rows: list[dict[str, Any]]):
    """The rows as an Arrow table: message columns with ``message_type`` (``tool_calls`` a list of structs, never
    a JSON string), every other column as pyarrow infers it."""
    table = pa.Table.from_pylist(rows)
    mtype = pa.list_(message_type(pa))
    for key in MESSAGE_COLUMNS:
        if key in table.column_names:
            values = [[_parquet_message(m) for m in r[key]] if isinstance(r.get(key), list) else None for r in rows]
            table = table.set_column(table.column_names.index(key), key, pa.array(values, type=mtype))
    return table


def write_records(records: Iterable[dict[str, Any]], path: Path | str, fmt: str | None = None) -> int:
    """Write the rows (atomically: a temporary file renamed into place); returns how many."""
    path = Path(path)
    fmt = format_for(path, fmt)
    rows = list(records)
    if fmt == "parquet":
        pa = require_pyarrow()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if fmt == "jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        else:
            import pyarrow.parquet as pq

            pq.write_table(_parquet_table(pa, rows), tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(rows)


def read_records(path: Path | str) -> list[dict[str, Any]]:
    """The rows of an exported file (JSONL or Parquet)."""
    path = Path(path)
    if format_for(path) == "parquet":
        require_pyarrow()
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in text_lines(path) if line.strip()]
