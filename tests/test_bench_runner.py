"""The one run loop (``awm_engine.eval.runner``) that ``awm eval run`` and every ``awm bench`` benchmark go through."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest

from awm_engine.eval.results import read_records
from awm_engine.eval.runner import Adapter, Progress, RunLocked, lock_run_dir, run_items


class Toy(Adapter):
    """Items are names; ``run_one`` scores 1.0 unless the name is in ``failing`` (then it raises)."""

    def __init__(self, names, failing=(), concurrency=4, hook=None):
        self.names, self.failing, self.concurrency, self.hook = list(names), set(failing), concurrency, hook
        self.ran: list[str] = []
        self.metas: list[dict] = []
        self.events: list[str] = []

    def items(self):
        return self.names

    def item_id(self, item):
        return item

    async def run_one(self, item):
        self.ran.append(item)
        if self.hook is not None:
            await self.hook(item)
        if item in self.failing:
            raise RuntimeError(f"broken {item}")
        return {"id": item, "status": "ok", "has_verdict": True, "reward": 1.0}

    def metadata(self, progress, index, running):
        index.refresh()
        meta = {"running": running, "results": len(index), "done": progress.done}
        self.metas.append(meta)
        return meta

    async def start(self):
        self.events.append("start")

    async def close(self):
        self.events.append("close")


def run(adapter, out, **kwargs):
    return asyncio.run(run_items(adapter, out, {"benchmark": "toy"}, **kwargs))


def test_one_items_exception_is_its_error_line_and_the_rest_run(tmp_path):
    toy = Toy(["a", "b", "c"], failing={"b"})
    meta = run(toy, tmp_path / "run")
    records = {r["id"]: r for r in read_records(tmp_path / "run" / "results.jsonl")}
    assert sorted(records) == ["a", "b", "c"] and sorted(toy.ran) == ["a", "b", "c"]
    assert records["a"]["status"] == records["c"]["status"] == "ok"
    assert records["b"]["status"] == "error" and records["b"]["error_kind"] == "internal_error"
    assert records["b"]["error"] == "RuntimeError: broken b" and "RuntimeError: broken b" in records["b"]["traceback"]
    assert meta == {"running": False, "results": 3, "done": 3} and toy.events == ["start", "close"]
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == {"benchmark": "toy"}


def test_resume_skips_finished_items_and_reruns_errored_ones(tmp_path):
    out = tmp_path / "run"
    run(Toy(["a", "b", "c"], failing={"b"}), out)
    with open(out / "results.jsonl", "a") as fh:
        fh.write('{"id": "c", "status": "ok"')  # a torn last line (a killed writer): dropped
    again = Toy(["a", "b", "c"])
    seen = []
    run(again, out, resume=True, on_progress=lambda p, r: seen.append((p.done, p.skipped, p.scored, r and r["id"])))
    assert again.ran == ["b"]
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "c", "b"]  # each once, the errored line gone
    assert all(json.loads(line)["status"] == "ok" for line in lines)
    assert seen == [(2, 2, 2, None), (3, 2, 3, "b")]  # the kept lines counted before anything runs


def test_without_resume_nothing_is_dropped_or_skipped(tmp_path):
    out = tmp_path / "run"
    run(Toy(["a", "b"], failing={"b"}), out)
    again = Toy(["a", "b"])
    run(again, out)  # not resumed: finished items are still skipped, the errored line stays (the last line wins)
    assert again.ran == ["b"]
    assert [json.loads(line)["status"] for line in (out / "results.jsonl").read_text().splitlines()] \
        == ["ok", "error", "ok"]


def test_a_second_writer_is_refused_by_the_lock(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    holder = lock_run_dir(out)
    try:
        toy = Toy(["a"])
        with pytest.raises(RunLocked, match="being written by another awm process"):
            run(toy, out)
        assert toy.ran == [] and not (out / "results.jsonl").exists() and not (out / "config.json").exists()
    finally:
        holder.close()
    refused = []

    async def second_run_while_running(item):
        with pytest.raises(RunLocked):
            await run_items(Toy(["x"]), out, {})
        refused.append(item)

    run(Toy(["a"], hook=second_run_while_running), out)
    assert refused == ["a"]
    run(Toy(["b"]), out)  # released at the end


def test_the_concurrency_limit_is_honoured(tmp_path):
    async def main():
        gate, full = asyncio.Event(), asyncio.Event()
        active, peak = [0], [0]

        async def hook(item):
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            if active[0] == 2:
                full.set()
            await gate.wait()
            active[0] -= 1

        toy = Toy([f"i{n}" for n in range(6)], concurrency=2, hook=hook)
        task = asyncio.ensure_future(run_items(toy, tmp_path / "run", {}))
        await full.wait()
        for _ in range(50):  # every other item gets its chance to start (it must not)
            await asyncio.sleep(0)
        assert active[0] == 2 and len(toy.ran) == 2
        gate.set()
        await task
        return toy, peak[0]

    toy, peak = asyncio.run(main())
    assert peak == 2 and sorted(toy.ran) == [f"i{n}" for n in range(6)]


@dataclass
class Counted(Progress):
    failed: int = 0


class CountingToy(Toy):
    progress_type = Counted
    metadata_every = 0  # after every item
    metadata_at_start = True

    def tally(self, progress, record, resumed):
        super().tally(progress, record, resumed)
        progress.failed += record.get("status") == "error"


def test_progress_callback_counts_and_metadata_refreshes(tmp_path):
    seen = []
    toy = CountingToy(["a", "b", "c"], failing={"b"}, concurrency=1)
    meta = run(toy, tmp_path / "run", on_progress=lambda p, r: seen.append(
        (type(p).__name__, p.total, p.done, p.errors, p.failed, p.scored, p.mean_reward, r and r["id"])))
    assert seen == [("Counted", 3, 0, 0, 0, 0, None, None), ("Counted", 3, 1, 0, 0, 1, 1.0, "a"),
                    ("Counted", 3, 2, 1, 1, 1, 1.0, "b"), ("Counted", 3, 3, 1, 1, 2, 1.0, "c")]
    assert [m["running"] for m in toy.metas] == [True, True, True, True, False]  # at the start, each item, the end
    assert [m["results"] for m in toy.metas] == [0, 1, 2, 3, 3] and meta == toy.metas[-1]


def test_the_final_metadata_is_written_when_the_run_is_interrupted(tmp_path):
    async def interrupt(item):
        if item == "b":
            raise KeyboardInterrupt

    toy = Toy(["a", "b"], concurrency=1, hook=interrupt)
    with pytest.raises(KeyboardInterrupt):
        run(toy, tmp_path / "run")
    assert toy.metas[-1]["running"] is False and toy.events == ["start", "close"]
    assert [r["id"] for r in read_records(tmp_path / "run" / "results.jsonl")] == ["a"]
