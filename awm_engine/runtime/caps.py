"""Caps on what an environment can make awm hold and store: one tool result, and the tool-result text of a run.

**Result cap** (``AWM_RESULT_CAP``, ``--result-cap``; default and maximum 4 MiB, at least 1 KiB): a tool result's
text keeps its first ``cap`` bytes (UTF-8, cut on a character boundary) followed by a marker the model reads,
``...[awm: tool result cut at 4,194,304 of 104,857,600 bytes]``. The cut is made inside the environment worker,
where the text is produced (``inprocess.Episode``, and every other episode the worker hosts), so a huge answer
never crosses the worker↔parent channel; front ends cut again at their own (possibly lower) cap. A text is also
cut short enough that its JSON encoding fits the channel's line (``protocol.LINE_LIMIT``) whatever it holds. The
markers are ASCII: a non-ASCII character would make Python store a long ASCII text at two bytes a character.

**Trajectory cap** (``AWM_TRAJECTORY_CAP``, ``--trajectory-cap``; default 8 MiB): the tool-result text one run
stores (``trajectory.json``, ``events.jsonl``, its record in ``results.jsonl``), counted once per result. Results
are stored whole while the budget lasts; past it each result keeps its first ``STORED_HEAD`` bytes and a marker
(``...[awm: stored copy cut at ...]``). The model still saw each result in full (up to the result cap).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from typing import Any

RESULT_CAP_ENV = "AWM_RESULT_CAP"
TRAJECTORY_CAP_ENV = "AWM_TRAJECTORY_CAP"
MIN_CAP = 1 << 10
DEFAULT_RESULT_CAP = 4 << 20  # also the largest: a worker never sends more, a front end may ask for less
DEFAULT_TRAJECTORY_CAP = 8 << 20
STORED_HEAD = 1 << 10  # what a result stored past the trajectory cap keeps (smaller results are stored whole)

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_size(value: Any) -> int:
    """A number of bytes from ``4194304``, ``"4194304"``, ``"4MiB"``, ``"512k"`` (K, M, G are powers of 1024)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {value!r} (a number of bytes, e.g. 4194304, 512K or 4MiB)")
    return int(float(match.group(1)) * _UNITS[unit])


def _size_setting(value: Any, env: str, default: int, what: str) -> tuple[int, str]:
    """(bytes, where they came from): ``value``, else ``$env``, else ``default``; ``ValueError`` naming the source."""
    where = f"{what} ${env}" if value is None and os.environ.get(env) else what
    raw = value if value is not None else os.environ.get(env) or default
    try:
        return parse_size(raw), where
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def result_cap(value: Any = None) -> int:
    """The result cap: ``value``, else ``$AWM_RESULT_CAP``, else 4 MiB; ``ValueError`` outside 1 KiB–4 MiB."""
    cap, where = _size_setting(value, RESULT_CAP_ENV, DEFAULT_RESULT_CAP, "result cap")
    if not MIN_CAP <= cap <= DEFAULT_RESULT_CAP:
        raise ValueError(f"{where} {cap:,} bytes: between {MIN_CAP:,} and {DEFAULT_RESULT_CAP:,} bytes")
    return cap


def trajectory_cap(value: Any = None) -> int:
    """The trajectory cap: ``value``, else ``$AWM_TRAJECTORY_CAP``, else 8 MiB; ``ValueError`` below 1 KiB."""
    cap, where = _size_setting(value, TRAJECTORY_CAP_ENV, DEFAULT_TRAJECTORY_CAP, "trajectory cap")
    if cap < MIN_CAP:
        raise ValueError(f"{where} {cap:,} bytes: at least {MIN_CAP:,} bytes")
    return cap


def worker_result_cap(requested: Any = None) -> int:
    """The cap an environment worker cuts at: the one a call asks for, else the process's; never an error (a bad
    value falls back to the default: the worker must answer)."""
    for candidate in (requested, None):
        try:
            return result_cap(candidate)
        except ValueError:
            continue
    return DEFAULT_RESULT_CAP


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (a long text is encoded a megabyte at a time: no second copy of it)."""
    if text.isascii():
        return len(text)
    step = 1 << 20
    return sum(len(text[i:i + step].encode("utf-8", "surrogatepass")) for i in range(0, len(text), step))


def _head(text: str, limit: int) -> tuple[str, int]:
    """The longest start of ``text`` whose UTF-8 encoding takes at most ``limit`` bytes, and that size."""
    chunk = text[:limit]  # never fewer bytes than characters: enough text for ``limit`` bytes
    data = chunk.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return chunk, len(data)
    end = limit
    while end > 0 and (data[end] & 0xC0) == 0x80:  # the first byte left out continues a character: drop it all
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass"), end


def _encoded_size(text: str) -> int:
    """Bytes ``text`` takes on the worker channel (a JSON string, non-ASCII as UTF-8)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def result_marker(kept: int, total: int) -> str:
    return f"\n...[awm: tool result cut at {kept:,} of {total:,} bytes]"


_MARKER = re.compile(r"\n\.\.\.\[awm: tool result cut at ([\d,]+) of ([\d,]+) bytes\]\Z")


def cut_text(text: str, cap: int, original_bytes: int | None = None,
             line_budget: int | None = None) -> tuple[str, int | None]:
    """(the text as the model sees it, its size before the cut — None when nothing was cut).

    ``original_bytes``: the size before an earlier cut (``text`` then ends with that cut's marker: kept when that
    cut was at this cap or lower, replaced when this one is lower). ``line_budget``: the most bytes the text's
    JSON encoding may take (the worker channel's line); escaped control characters (six bytes each) can need it
    before ``cap`` does."""
    if len(text) * 4 <= cap and (line_budget is None or len(text) * 6 <= line_budget):
        return text, None  # fits whatever it holds (the usual case: nothing encoded)
    marker = ""
    if original_bytes is not None:
        earlier = _MARKER.search(text, max(0, len(text) - 120))
        if earlier is not None:
            if int(earlier.group(1).replace(",", "")) <= cap and line_budget is None:
                return text, original_bytes  # cut before, no longer than this cap allows: as it is (no copy)
            text, marker = text[:earlier.start()], earlier.group(0)
    size = utf8_size(text)
    total = original_bytes if original_bytes is not None else size
    limit = cap
    if size <= cap:
        whole = text + marker
        if line_budget is None:
            return whole, (total if marker else None)
        encoded = _encoded_size(whole)
        if encoded <= line_budget:
            return whole, (total if marker else None)
        limit = max(MIN_CAP, size * line_budget // encoded - 256)
    while True:
        head, kept = _head(text, limit)
        shown = head + result_marker(kept, total)
        if line_budget is None or kept <= MIN_CAP or _encoded_size(shown) <= line_budget:
            return shown, total
        limit = kept // 2


def cap_result(result: Any, cap: int, line_budget: int | None = None) -> Any:
    """A ``ToolResult`` whose text is cut at ``cap`` (the same object when nothing is cut)."""
    text, original = cut_text(result.text, cap, getattr(result, "original_bytes", None), line_budget)
    if original is None:
        return result
    return replace(result, text=text, truncated=True, original_bytes=original)


class StoredBudget:
    """The trajectory cap of one run: ``store(text)`` gives the copy a run stores of one result, and what was cut."""

    def __init__(self, cap: int):
        self.cap = cap
        self.used = 0
        self.cut = 0  # results stored cut

    def store(self, text: str) -> tuple[str, dict[str, int] | None]:
        """(the stored copy, ``{"stored_bytes", "model_saw_bytes"}`` when it is cut, else None)."""
        size = utf8_size(text)
        room = self.cap - self.used
        if size <= max(room, STORED_HEAD):
            self.used += size
            return text, None
        head, kept = _head(text, max(room, STORED_HEAD))
        self.used += kept
        self.cut += 1
        marker = (f"\n...[awm: stored copy cut at {kept:,} of {size:,} bytes (this run's trajectory cap of "
                  f"{self.cap:,} bytes was reached); the model saw all {size:,}]")
        return head + marker, {"stored_bytes": kept, "model_saw_bytes": size}
