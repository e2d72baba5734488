"""What the evaluation dashboard knows about one run (shared by the dashboard and the τ² screens)."""
from __future__ import annotations

from pathlib import Path

from awm_engine.data.catalog import Catalog
from awm_engine.eval.batch import work_items
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runs import load_eval_config, read_metadata


class RunView:
    """What the dashboard knows about one run; refreshed incrementally (only new lines are read).
    A run written by a newer awm is refused here (``NewerFormatError``), or at the first newer results line."""

    def __init__(self, path: Path):
        self.path = path
        self.config = load_eval_config(path)
        read_metadata(path)  # checks its format version
        self.index = ResultsIndex(path / "results.jsonl")
        self.expected: int | None = None
        self.error: str | None = None  # why the run cannot be followed any more

    def expected_total(self) -> int | None:
        if self.expected is None:
            try:
                self.expected = len(work_items(Catalog.load(self.config.data_dirs), self.config))
            except Exception:  # noqa: BLE001 - data moved away: progress shows counts only
                self.expected = None
        return self.expected

    def running(self) -> bool:
        try:
            meta = read_metadata(self.path)
        except (OSError, ValueError):
            return True
        return True if meta is None else bool(meta.get("running"))
