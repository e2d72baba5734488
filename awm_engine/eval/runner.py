"""The one loop every run goes through: ``awm eval run`` and each benchmark of ``awm bench``.

A run is an ``Adapter``: its items (``items``, each with its results id: ``item_id``), ``run_one`` (one item to its
results line), ``error_record`` (the line of an item whose ``run_one`` raised), what a finished line is (``done``),
what its progress counts (``progress_type``, ``tally``), its metadata (``metadata``: called as the run goes and at
the end) and what it opens and closes around the items (``start``, ``close``). ``run_items`` owns the rest, the same
for every run: one writer per run directory (``lock_run_dir``), resume (errored and torn lines dropped, finished
items skipped), ``config.json``, the results index and writer (one fsync'd line per item), the concurrency limit,
progress (``on_progress(progress, record)``: once at the start with None, then after every item), an exception of
one item turned into its error line (the run goes on), and the metadata rewritten while running and at the end.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar

from awm_engine.data.run_formats import CONFIG, RESULTS
from awm_engine.eval.results import ResultsIndex, ResultsWriter, compact

Item = TypeVar("Item")


class RunLocked(Exception):
    """Another process is writing this run directory."""


def lock_run_dir(out: Path):
    """An exclusive lock on ``out/.lock`` (released when the process ends, however it ends)."""
    import fcntl

    handle = open(out / ".lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise RunLocked(f"{out} is being written by another awm process (an evaluation is running there); "
                        "wait for it, or use another --out") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


@contextmanager
def locked(out: Path) -> Iterator[Path]:
    """``lock_run_dir`` held for the block."""
    lock = lock_run_dir(out)
    try:
        yield out
    finally:
        lock.close()


@dataclass
class Progress:
    """A run's counts; ``done`` includes the items a resumed run skipped (``skipped``). Subclass for more."""

    total: int
    done: int = 0
    skipped: int = 0
    errors: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    started: float = field(default_factory=time.time)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.scored if self.scored else None


def internal_error(exc: BaseException) -> dict[str, Any]:
    """The error fields of awm's own failure (call inside the ``except``: the traceback is the current one)."""
    return {"status": "error", "error": f"{type(exc).__name__}: {exc}", "error_kind": "internal_error",
            "traceback": traceback.format_exc()}


class Adapter(Generic[Item]):
    """What a run gives the loop; override ``items``, ``item_id``, ``run_one`` and ``metadata``, the rest as needed."""

    concurrency: int = 1
    metadata_every: float = 5.0  # seconds between metadata refreshes while running (0: after every item)
    metadata_at_start: bool = False  # also write the running metadata before the first item
    progress_type: type[Progress] = Progress

    def items(self) -> Sequence[Item]:
        raise NotImplementedError

    def item_id(self, item: Item) -> str:
        raise NotImplementedError

    async def run_one(self, item: Item) -> dict[str, Any]:
        """The item's results line (its own expected failures as error lines; anything else may raise)."""
        raise NotImplementedError

    def error_record(self, item: Item, error: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
        """The line of an item whose ``run_one`` raised: ``error`` is ``internal_error``'s fields."""
        return {"id": self.item_id(item), **error}

    def done(self, summary: dict[str, Any]) -> bool:
        """Whether a results line (its index summary) is finished: kept on resume and not run again."""
        return summary.get("status") == "ok"

    def tally(self, progress: Progress, record: dict[str, Any], resumed: bool) -> None:
        """Count one line into ``progress``: a new one, or (``resumed``) a finished line a resumed run keeps."""
        if record.get("status") == "error":
            progress.errors += 1
        elif record.get("has_verdict") and record.get("reward") is not None:
            progress.scored += 1
            progress.reward_sum += record["reward"]

    def metadata(self, progress: Progress, index: ResultsIndex, running: bool) -> dict[str, Any]:
        """Write ``metadata.json`` (while ``running``: from a thread) and return it."""
        raise NotImplementedError

    async def start(self) -> None:
        """Open what the items need (after the resumed lines are counted, before the first item)."""

    async def close(self) -> None:
        """Close what ``start`` opened (after the last item, before the final metadata)."""


async def run_items(adapter: Adapter, out: Path | str, config: dict[str, Any], resume: bool = False,
                    on_progress: Callable[[Progress, dict | None], None] | None = None) -> dict[str, Any]:
    """Run (or ``resume``) ``adapter``'s items into the run directory ``out`` (``config`` becomes its
    ``config.json``); returns the final metadata. ``RunLocked`` when another process writes ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with locked(out):
        return await _run_locked(adapter, out, config, resume, on_progress)


async def _run_locked(adapter: Adapter, out: Path, config: dict[str, Any], resume: bool, on_progress) -> dict:
    results = out / RESULTS.file
    if resume:
        compact(results, adapter.done)
    (out / CONFIG.file).write_text(json.dumps(config, indent=2))
    index = ResultsIndex(results)
    index.refresh()
    done = [rid for rid in index.order if adapter.done(index.entries[rid].summary)]
    items = list(adapter.items())
    finished = set(done)
    todo = [item for item in items if adapter.item_id(item) not in finished]
    progress = adapter.progress_type(total=len(items), done=len(items) - len(todo), skipped=len(items) - len(todo))
    for rid in done:
        adapter.tally(progress, index.entries[rid].summary, True)
    if on_progress:
        on_progress(progress, None)
    if adapter.metadata_at_start:
        adapter.metadata(progress, index, True)
    await adapter.start()
    writer = ResultsWriter(results)
    semaphore = asyncio.Semaphore(max(1, adapter.concurrency))
    refreshing = asyncio.Lock()  # one metadata refresh at a time (they share the index)
    last_meta = 0.0

    async def one(item) -> None:
        nonlocal last_meta
        async with semaphore:
            started = time.perf_counter()
            try:
                record = await adapter.run_one(item)
            except Exception as exc:  # noqa: BLE001 - one item's failure: recorded with its traceback, the run goes on
                record = adapter.error_record(item, internal_error(exc), time.perf_counter() - started)
            await writer.awrite(record)
            progress.done += 1
            adapter.tally(progress, record, False)
            if on_progress:
                on_progress(progress, record)
            if adapter.metadata_every <= 0 or time.time() - last_meta > adapter.metadata_every:
                last_meta = time.time()
                async with refreshing:
                    await asyncio.to_thread(adapter.metadata, progress, index, True)

    try:
        await asyncio.gather(*(one(item) for item in todo))
    finally:
        writer.close()
        await adapter.close()
        meta = adapter.metadata(progress, index, False)
    return meta
