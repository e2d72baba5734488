"""Template databases: each scenario is built once per content hash; episodes copy the template."""
from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

from awm_engine.data.catalog import Scenario
from awm_engine.data.paths import cache_dir
from awm_engine.db.build import BuildReport, build_database
from awm_engine.db.diff import copy_database

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


class TemplateCache:
    """``get(scenario)`` returns the path of a built template and its build report (safe to call from many
    threads and processes at once: one build per template per process, atomic renames across processes)."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root else cache_dir() / "templates"

    def paths(self, scenario: Scenario) -> tuple[Path, Path]:
        stem = f"{scenario.key}-{scenario.content_hash()[:16]}"
        return self.root / f"{stem}.db", self.root / f"{stem}.build.json"

    def get(self, scenario: Scenario, rebuild: bool = False) -> tuple[Path, BuildReport]:
        db_path, report_path = self.paths(scenario)
        with _lock_for(db_path):
            if not rebuild:
                cached = self._cached(db_path, report_path)
                if cached is not None:
                    return cached
            self.root.mkdir(parents=True, exist_ok=True)
            tag = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
            tmp = db_path.with_name(f"{db_path.stem}.{tag}.tmp.db")
            report = build_database(scenario.key, scenario.db_schema, scenario.sample_data, tmp)
            report.path = str(db_path)
            tmp_report = report_path.with_name(f"{report_path.name}.{tag}.tmp")
            tmp_report.write_text(json.dumps(report.to_dict(), indent=2))
            tmp.replace(db_path)
            tmp_report.replace(report_path)
            return db_path, report

    @staticmethod
    def _cached(db_path: Path, report_path: Path) -> tuple[Path, BuildReport] | None:
        if db_path.exists() and report_path.exists():
            try:
                return db_path, BuildReport.from_dict(json.loads(report_path.read_text()))
            except (ValueError, TypeError):
                return None
        return None

    def episode_db(self, scenario: Scenario, dest: Path | str) -> Path:
        """A fresh working database for one episode: a file copy of the template."""
        template, _ = self.get(scenario)
        return copy_database(template, dest)
