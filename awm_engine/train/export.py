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


def _parquet_ready(record: dict[str, Any]) -> dict[str, Any]:
    """Messages as Parquet holds them: every message with the same keys (``content`` a string, ``tool_calls`` a
    JSON string or null), so rows of meta and native runs share one schema."""
    def message(m: dict[str, Any]) -> dict[str, Any]:
        calls = m.get("tool_calls")
        return {"role": m.get("role"), "content": m.get("content") or "",
                "tool_calls": json.dumps(calls, ensure_ascii=False) if calls else None,
                "tool_call_id": m.get("tool_call_id")}

    out = dict(record)
    for key in ("prompt", "completion", "messages"):
        if isinstance(record.get(key), list):
            out[key] = [message(m) for m in record[key]]
    return out


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

            pq.write_table(pa.Table.from_pylist([_parquet_ready(r) for r in rows]), tmp)
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
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
