"""Evaluation results files: append-only JSONL, one line per rollout, read lazily.

``ResultsIndex`` scans a results file once, keeping only a small summary and the byte offset of
each line, and picks up lines appended since the last scan (a running evaluation); the full record
(messages and all) is read from its offset on demand. A torn last line (a killed writer) is ignored
until it is complete. For a rollout id seen more than once, the last line wins. Each line carries the
results ``format_version`` (``awm_engine.data.run_formats``); a line from a newer awm stops the scan
with ``NewerFormatError``.
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from awm_engine.data.jsonl import dumps_text
from awm_engine.data.run_formats import RESULTS

SUMMARY_KEYS = ("id", "scenario", "task_id", "sample", "status", "label", "reward", "has_verdict", "stop_reason",
                "error_kind", "run_dir", "env_error", "error")


def loads_line(raw: bytes | str) -> Any:
    """``json.loads`` of one line, whatever the caller's stack depth: a line nested nearly as deep as the
    recursion limit (a model's tool-call arguments, say) was written from a shallow thread and would fail to parse
    from a deeper caller (a report, a resume, the dashboard), stopping the whole file's reading: it is parsed
    again on a fresh thread."""
    try:
        return json.loads(raw)
    except RecursionError:
        box: list[Any] = []

        def parse() -> None:
            try:
                box.append(json.loads(raw))
            except (ValueError, RecursionError) as exc:
                box.append(exc)

        thread = threading.Thread(target=parse, name="awm-deep-line")
        thread.start()
        thread.join()
        if isinstance(box[0], Exception):
            raise ValueError(f"unreadable line: {type(box[0]).__name__}") from None
        return box[0]


def rollout_id(scenario: str, task_id: int, sample: int) -> str:
    return f"{scenario}/{task_id}/{sample}"


@dataclass
class Entry:
    offset: int
    length: int
    summary: dict[str, Any]

    @property
    def id(self) -> str:
        return self.summary["id"]


class ResultsIndex:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.entries: dict[str, Entry] = {}
        self.order: list[str] = []
        self.scanned = 0  # bytes of complete lines already indexed
        self.bad_lines = 0

    def refresh(self) -> int:
        """Index lines appended since the last call; returns how many new records were seen."""
        if not self.path.is_file():
            return 0
        size = self.path.stat().st_size
        if size < self.scanned:  # rewritten (compacted): start over
            self.entries.clear()
            self.order.clear()
            self.scanned = 0
        new = 0
        with open(self.path, "rb") as fh:
            fh.seek(self.scanned)
            offset = self.scanned
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # a line still being written, or torn by a crash
                try:
                    record = loads_line(raw)
                except ValueError:
                    record = None
                if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                    self.bad_lines += 1  # not JSON, or not a record (a list, null, no string id): skipped
                    offset += len(raw)
                    continue
                summary = {k: record.get(k) for k in SUMMARY_KEYS}
                RESULTS.check(record, self.path)
                if summary["id"] not in self.entries:
                    self.order.append(summary["id"])
                self.entries[summary["id"]] = Entry(offset, len(raw), summary)
                offset += len(raw)
                new += 1
            self.scanned = offset
        return new

    def __len__(self) -> int:
        return len(self.entries)

    def summaries(self) -> Iterator[dict[str, Any]]:
        for rid in self.order:
            yield self.entries[rid].summary

    def record(self, rid: str) -> dict[str, Any]:
        entry = self.entries[rid]
        with open(self.path, "rb") as fh:
            fh.seek(entry.offset)
            return loads_line(fh.read(entry.length))


def read_records(path: Path | str) -> list[dict[str, Any]]:
    """Every complete record, last line winning per id (small files; tests and reports)."""
    index = ResultsIndex(path)
    index.refresh()
    return [index.record(rid) for rid in index.order]


class ResultsWriter:
    """Appends one JSON line per rollout and makes it durable before returning."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = dumps_text(RESULTS.stamp(record), default=str) + "\n"
        with self._lock:
            self.fh.write(line)
            self.fh.flush()
            os.fsync(self.fh.fileno())

    async def awrite(self, record: dict[str, Any]) -> None:
        """``write`` on a thread: serializing a long rollout and fsync must not stall the event loop."""
        await asyncio.to_thread(self.write, record)

    def close(self) -> None:
        self.fh.close()


def compact(path: Path | str, keep) -> int:
    """Rewrite ``path`` with the last complete line per id for which ``keep(summary)`` holds; returns lines kept."""
    path = Path(path)
    if not path.is_file():
        return 0
    index = ResultsIndex(path)
    index.refresh()
    tmp = path.with_suffix(".jsonl.tmp")
    kept = 0
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        for rid in index.order:
            entry = index.entries[rid]
            if keep(entry.summary):
                src.seek(entry.offset)
                dst.write(src.read(entry.length))
                kept += 1
        dst.flush()
        os.fsync(dst.fileno())
    tmp.replace(path)
    return kept


def resume_results(path: Path | str, resume: bool) -> tuple[ResultsIndex, set[str]]:
    """A run's results file ready to append to: with ``resume``, errored and torn lines dropped first; returns its
    index and the ids of the rollouts that finished ``ok`` (those a resumed run skips)."""
    if resume:
        compact(path, lambda s: s.get("status") == "ok")
    index = ResultsIndex(path)
    index.refresh()
    return index, {rid for rid, e in index.entries.items() if e.summary.get("status") == "ok"}
