"""Template databases: each scenario is built once per content hash; episodes copy the template.

A build whose contents depend on the clock (``DEFAULT CURRENT_TIMESTAMP``, ``datetime('now')`` …: see
``build.time_dependence``) freezes those values at build time, while the reference rebuilds for every episode.
Such a template *expires* once it is older than ``max_age`` seconds (default 300, ``AWM_TEMPLATE_MAX_AGE``;
``0`` rebuilds for every use, ``inf`` never) and ``get`` builds it again before handing it out; a template
without time dependence never expires. A new template is written beside the old one and renamed over it, so a
reader sees the old file or the new one, never half of one. Ages are measured on ``clock`` (injectable).
"""
from __future__ import annotations

import json
import math
import os
import stat
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping

from awm_engine.data.catalog import Scenario
from awm_engine.data.paths import cache_dir
from awm_engine.db.build import BuildReport, build_database_sandboxed, time_dependence
from awm_engine.db.diff import copy_database

MAX_AGE_ENV = "AWM_TEMPLATE_MAX_AGE"
DEFAULT_MAX_AGE = 300.0

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


def _read_regular(path: Path) -> str:
    """The text of ``path``, a regular file: a FIFO put there never blocks the reader (the warm service resolves a
    server's template in a cache the server names), anything else that is not a file is an OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return fh.read().decode()


def max_age_from_env(default: float = DEFAULT_MAX_AGE, environ: Mapping[str, str] | None = None) -> float:
    """``AWM_TEMPLATE_MAX_AGE`` in seconds (``inf``: never expire); ``default`` when unset or not a number >= 0.
    ``environ``: another process's variables (default: this one's)."""
    raw = str((os.environ if environ is None else environ).get(MAX_AGE_ENV, "")).strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value >= 0 else default  # NaN compares False too


def template_facts(report: BuildReport, built_at: float | None = None) -> dict[str, Any]:
    """What a run records about the template its databases were copied from."""
    when = report.built_at if built_at is None else built_at
    return {"built_at": when, "built": _utc_text(when), "time_dependent": list(report.time_dependent or [])}


def _utc_text(when: Any) -> str | None:
    """``when`` (seconds since the epoch) as a UTC time, or None when it is no time ``gmtime`` can show: the time
    comes from the worker, whose code is the environment's (1e20, a 400-digit integer raised in the parent)."""
    if not isinstance(when, (int, float)) or isinstance(when, bool):
        return None
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)) if math.isfinite(when) else None
    except (OverflowError, OSError, ValueError):
        return None


class TemplateCache:
    """``get(scenario)`` returns the path of a built template and its build report (safe to call from many
    threads and processes at once: one build per template per process, atomic renames across processes)."""

    def __init__(self, root: Path | str | None = None, max_age: float | None = None,
                 clock: Callable[[], float] | None = None):
        self.root = Path(root) if root else cache_dir() / "templates"
        self.max_age = max_age_from_env() if max_age is None else float(max_age)
        self.clock = clock or time.time

    def built_rows(self, scenario: Scenario) -> int | None:
        """Rows of the scenario's template if it was built already (never builds): what the catalog shows."""
        try:
            report = json.loads(self.paths(scenario)[1].read_text())
            counts = report.get("row_counts") if isinstance(report, dict) else None
            return sum(v for v in counts.values() if isinstance(v, int)) if isinstance(counts, dict) else None
        except (OSError, ValueError):
            return None

    def paths(self, scenario: Scenario) -> tuple[Path, Path]:
        stem = f"{scenario.key}-{scenario.content_hash()[:16]}"
        return self.root / f"{stem}.db", self.root / f"{stem}.build.json"

    def age(self, report: BuildReport) -> float:
        return self.clock() - (report.built_at or 0.0)

    def expired(self, report: BuildReport) -> bool:
        """A time-dependent template older than ``max_age``: build it again before using it."""
        return bool(report.time_dependent) and self.age(report) > self.max_age

    def due(self, report: BuildReport) -> bool:
        """A time-dependent template past half its ``max_age``: time to build the next one in the background."""
        return bool(report.time_dependent) and self.age(report) > self.max_age / 2

    def get(self, scenario: Scenario, rebuild: bool = False,
            newer_than: float | None = None) -> tuple[Path, BuildReport]:
        """The template, built now when there is none, it expired, ``rebuild`` is set, or it was built no later
        than ``newer_than`` (a background refresh: a newer one built meanwhile elsewhere is used as it is)."""
        db_path, report_path = self.paths(scenario)
        with _lock_for(db_path):
            if not rebuild:
                cached = self._cached(db_path, report_path)
                if cached is not None:
                    report = cached[1]
                    if report.time_dependent is None:  # written before awm recorded it
                        report.time_dependent = time_dependence(scenario.db_schema, scenario.sample_data)
                    fresh = newer_than is None or (report.built_at or 0.0) > newer_than
                    if fresh and not self.expired(report):
                        return cached
            self.root.mkdir(parents=True, exist_ok=True)
            tag = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
            tmp = db_path.with_name(f"{db_path.stem}.{tag}.tmp.db")
            built_at = self.clock()
            report = build_database_sandboxed(scenario.key, scenario.db_schema, scenario.sample_data, tmp)
            report.path = str(db_path)
            report.built_at = built_at
            tmp_report = report_path.with_name(f"{report_path.name}.{tag}.tmp")
            tmp_report.write_text(json.dumps(report.to_dict(), indent=2))
            tmp.replace(db_path)
            tmp_report.replace(report_path)
            return db_path, report

    @staticmethod
    def _cached(db_path: Path, report_path: Path) -> tuple[Path, BuildReport] | None:
        if db_path.exists() and report_path.exists():
            try:
                report = BuildReport.from_dict(json.loads(_read_regular(report_path)))
                if not isinstance(report.built_at, (int, float)):  # written before awm recorded it
                    report.built_at = db_path.stat().st_mtime
                if not (isinstance(report.time_dependent, list)
                        and all(isinstance(f, str) for f in report.time_dependent)):
                    report.time_dependent = None  # scanned again by get
                return db_path, report
            except (ValueError, TypeError, AttributeError, OSError):
                return None
        return None

    def episode_db(self, scenario: Scenario, dest: Path | str) -> Path:
        """A fresh working database for one episode: a file copy of the template."""
        template, _ = self.get(scenario)
        return copy_database(template, dest)
