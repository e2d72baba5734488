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
import re
from pathlib import Path
from typing import Any, Iterable

from awm_engine.data.jsonl import text_lines

FORMATS = ("jsonl", "parquet")


class MissingDependency(RuntimeError):
    """An optional library a feature needs is not installed."""


EXTENSIONS = {".jsonl": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def format_for(path: Path | str, fmt: str | None = None) -> str:
    """``fmt``, else the format the file's extension names (any case); ValueError for an unknown format or an
    extension that names none (a ``.csv`` written as JSONL would mislead every reader)."""
    if fmt:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
        return fmt
    suffix = Path(str(path)).suffix.lower()
    if suffix not in EXTENSIONS:
        raise ValueError(f"cannot tell the format of {path} from its extension: name it .jsonl or .parquet, or give "
                         "--format jsonl|parquet")
    return EXTENSIONS[suffix]


def require_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise MissingDependency("Parquet export needs pyarrow: install awm's 'train' extra "
                                "(pip install -c constraints.txt -e '.[train]'), or export JSONL "
                                "(--format jsonl)") from None
    return pyarrow


INT_RANGE = (-(1 << 63), (1 << 64) - 1)  # the integers every JSON reader of these files holds (datasets: ujson)


class _NotPlain(ValueError):
    """JSON text whose value does not survive being written again as it was read."""


def _plain(value: Any) -> bool:
    """Whether ``value`` writes back as the same strict JSON: finite numbers, integers within ``INT_RANGE``."""
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return INT_RANGE[0] <= value <= INT_RANGE[1]
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return False


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise _NotPlain("a key twice")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise _NotPlain(name)


def _arguments(args: Any) -> Any:
    """A call's arguments as chat templates read them: the object the model wrote (``{"title": "x"}``, as
    transformers' tool-use format has it), parsed from the JSON text the endpoint returned. Text that is not a
    JSON object, or not one that reads back the same (a key twice, NaN, an integer past 64 bits), stays the text
    it was: nothing the model wrote is changed or lost."""
    if not isinstance(args, str):
        return args
    try:
        parsed = json.loads(args, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return args
    return parsed if isinstance(parsed, dict) and _plain(parsed) else args


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call in the chat-template shape (``type``, ``function.name``, ``function.arguments`` an object)."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    return {"id": call.get("id"), "type": call.get("type") or "function",
            "function": {"name": fn.get("name"), "arguments": _arguments(fn.get("arguments"))}}


def template_message(m: dict[str, Any]) -> dict[str, Any]:
    """One exported message: what the endpoint received, its calls in the chat-template shape, and every message
    with the same fields (``tool_calls`` and ``tool_call_id`` null where it has none), so that files of meta and
    native rows load together (``datasets`` infers one message type from the first file it reads)."""
    calls = m.get("tool_calls")
    return {**m, "tool_calls": [_tool_call(c) for c in calls] if calls else None,
            "tool_call_id": m.get("tool_call_id")}


MESSAGE_COLUMNS = ("prompt", "completion", "messages")
JSON_TYPE_NOTE = (
    "Parquet holds each tool schema and each call's arguments as Arrow's JSON type (arrow.json): readers through "
    "Hugging Face datasets (TRL, verl's RL datasets) get the objects exactly as written; a struct type would give "
    "every schema a null for each field only other tools have. verl's MultiTurnSFTDataset reads through pandas, "
    "which gives their JSON text: use awm_engine.train.verl_sft.AWMMultiTurnSFTDataset (data.custom_cls)")


def template_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row with every message column's calls in the chat-template shape (both formats write this)."""
    if not any(isinstance(row.get(k), list) for k in MESSAGE_COLUMNS):
        return row
    return {k: [template_message(m) if isinstance(m, dict) else m for m in v]
            if k in MESSAGE_COLUMNS and isinstance(v, list) else v for k, v in row.items()}


def message_type(pa):
    """The Arrow type of one message: the same fields in every row, meta and native alike; a call's arguments
    are of the JSON type (each call its own object, no other call's argument names)."""
    call = pa.struct([("id", pa.string()), ("type", pa.string()),
                      ("function", pa.struct([("name", pa.string()), ("arguments", pa.json_())]))])
    return pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                      ("tool_call_id", pa.string())])


def _json_text(value: Any) -> str | None:
    """The strict JSON text of a value of a JSON-typed field. One that strict JSON cannot hold as it is (NaN, an
    integer past 64 bits: a hostile environment's schema may have them) is kept as a JSON string of its text."""
    if value is None:
        return None
    if _plain(value):
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (ValueError, TypeError, RecursionError):
            pass
    return json.dumps(json.dumps(value, ensure_ascii=False, default=str))


def _parquet_message(m: dict[str, Any]) -> dict[str, Any]:
    calls = m.get("tool_calls")
    return {"role": m.get("role"), "content": m.get("content") or "",
            "tool_calls": [{"id": c.get("id"), "type": c.get("type"),
                            "function": {"name": c["function"].get("name"),
                                         "arguments": _json_text(c["function"].get("arguments"))}}
                           for c in calls] if calls else None,
            "tool_call_id": m.get("tool_call_id")}


def _json_list(pa, values: list[Any]):
    """A column of lists of JSON values (each its own object) as ``list<arrow.json>``."""
    texts = [[_json_text(v) for v in value] if isinstance(value, list) else None for value in values]
    return pa.array(texts, type=pa.list_(pa.string())).cast(pa.list_(pa.json_()))


def _parquet_table(pa, rows: list[dict[str, Any]]):
    """The rows as an Arrow table: message columns with ``message_type`` (``tool_calls`` a list of structs, never
    a JSON string), ``tools`` a list of JSON objects, every other column as pyarrow infers it."""
    special = set(MESSAGE_COLUMNS) | {"tools"}
    names = list(dict.fromkeys(k for r in rows for k in r))
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k not in special} for r in rows])
    mtype = pa.list_(message_type(pa))
    storage = _storage_type(pa, mtype)
    columns = {}
    for key in MESSAGE_COLUMNS:
        if key in names:
            values = [[_parquet_message(m) for m in r[key]] if isinstance(r.get(key), list) else None for r in rows]
            columns[key] = pa.array(values, type=storage).cast(mtype)
    if "tools" in names:
        columns["tools"] = _json_list(pa, [r.get("tools") for r in rows])
    if not columns:
        return table
    return pa.table({name: columns[name] if name in columns else table.column(name) for name in names})


def _storage_type(pa, dtype):
    """``dtype`` with each JSON type replaced by plain strings (what a JSON value is written from)."""
    if isinstance(dtype, pa.JsonType):
        return pa.string()
    if pa.types.is_list(dtype):
        return pa.list_(_storage_type(pa, dtype.value_type))
    if pa.types.is_struct(dtype):
        return pa.struct([(f.name, _storage_type(pa, f.type)) for f in dtype])
    return dtype


def write_records(records: Iterable[dict[str, Any]], path: Path | str, fmt: str | None = None) -> int:
    """Write the rows (atomically: a temporary file renamed into place); returns how many."""
    path = Path(path)
    fmt = format_for(path, fmt)
    rows = [template_row(r) for r in records]
    if fmt == "parquet":
        pa = require_pyarrow()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if fmt == "jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in rows:
                    line = json.dumps(row, ensure_ascii=False, default=str)
                    try:
                        line.encode("utf-8")
                    except UnicodeEncodeError:  # a lone surrogate (a "\ud800" escape in a tool's answer): escaped
                        line = json.dumps(row, ensure_ascii=True, default=str)  # as it came, and read back the same
                    fh.write(line + "\n")
        else:
            import pyarrow.parquet as pq

            try:
                table = _parquet_table(pa, rows)
            except UnicodeEncodeError:  # Parquet strings are UTF-8, which cannot hold a lone surrogate
                table = _parquet_table(pa, [_without_surrogates(r) for r in rows])
            pq.write_table(table, tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(rows)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate (text no UTF-8 file can hold) replaced by U+FFFD."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


def read_records(path: Path | str) -> list[dict[str, Any]]:
    """The rows of an exported file (JSONL or Parquet)."""
    path = Path(path)
    if format_for(path) == "parquet":
        pa = require_pyarrow()
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        rows = table.to_pylist()
        # only the columns that hold a JSON-typed value are walked (the tools, the message columns' arguments)
        for f in table.schema:
            if "arrow.json" in str(f.type):
                for row in rows:
                    row[f.name] = _decoded(pa, row[f.name], f.type)
        return rows
    return [json.loads(line) for line in text_lines(path) if line.strip()]


def _decoded(pa, value: Any, dtype) -> Any:
    """A Parquet value as written: the text of each JSON-typed value parsed back into its object."""
    if value is None:
        return None
    if isinstance(dtype, pa.JsonType):
        return json.loads(value)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [_decoded(pa, v, dtype.value_type) for v in value]
    if pa.types.is_struct(dtype):
        return {f.name: _decoded(pa, value.get(f.name), f.type) for f in dtype}
    return value
