"""Template databases: each scenario is built once per content hash; episodes copy the template."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .catalog import Scenario
from .dbbuild import BuildReport, build_database
from .dbdiff import copy_database
from .paths import cache_dir


class TemplateCache:
    """``get(scenario)`` returns the path of a built template and its build report."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root else cache_dir() / "templates"

    def paths(self, scenario: Scenario) -> tuple[Path, Path]:
        stem = f"{scenario.key}-{scenario.content_hash()[:16]}"
        return self.root / f"{stem}.db", self.root / f"{stem}.build.json"

    def get(self, scenario: Scenario, rebuild: bool = False) -> tuple[Path, BuildReport]:
        db_path, report_path = self.paths(scenario)
        if not rebuild and db_path.exists() and report_path.exists():
            try:
                return db_path, BuildReport.from_dict(json.loads(report_path.read_text()))
            except (ValueError, TypeError):
                pass
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = db_path.with_name(f"{db_path.stem}.{os.getpid()}.tmp.db")
        report = build_database(scenario.key, scenario.db_schema, scenario.sample_data, tmp)
        tmp.replace(db_path)
        report.path = str(db_path)
        report_path.write_text(json.dumps(report.to_dict(), indent=2))
        return db_path, report

    def episode_db(self, scenario: Scenario, dest: Path | str) -> Path:
        """A fresh working database for one episode: a file copy of the template."""
        template, _ = self.get(scenario)
        return copy_database(template, dest)
