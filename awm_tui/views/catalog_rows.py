"""A catalog row as the TUI lists it: the engine's catalog row, the health cell and the problems cell."""
from __future__ import annotations

from dataclasses import dataclass

from awm_engine.data.catalog import Scenario
from awm_engine.data.catalog_rows import CatalogRow
from awm_engine.runtime.health import cached_health
from awm_engine.verify.doctor import cached_diagnosis


@dataclass(frozen=True, order=True)
class ProblemCount:
    """The problems cell: how many problems the last ``awm env doctor`` found (``—``: never diagnosed, or the
    environment changed since), and how many of them are errors. Sorts by count, then errors."""

    total: int  # -1: never diagnosed
    errors: int = 0

    def __str__(self) -> str:
        if self.total < 0:
            return "—"
        return f"{self.total}" + (f" ({self.errors} err)" if self.errors else "")


def problem_cell(s: Scenario) -> ProblemCount:
    diagnosis = cached_diagnosis(s)
    if diagnosis is None:
        return ProblemCount(-1)
    return ProblemCount(len(diagnosis.problems), diagnosis.counts()["error"])


@dataclass
class Row:
    """A listed environment: the engine's catalog row, the health cell and the problems cell."""

    data: CatalogRow
    health: str
    problems: ProblemCount = ProblemCount(-1)

    @property
    def key(self) -> str:
        return self.data.scenario

    @property
    def name(self) -> str:
        return self.data.name

    def cells(self) -> tuple:
        d = self.data
        return (d.scenario, d.name, d.tables or 0, d.mcp_tools or 0, d.tasks, d.coverage("sql"), d.coverage("code"),
                self.health, self.problems)


def health_cell(s: Scenario) -> str:
    """The last ``awm env test`` of the scenario's code (``—`` when never tested), or ``data errors``."""
    if s.issues:
        return "data errors"
    health = cached_health(s)
    status = health.get("status", "?") if health else "—"
    if health and health.get("loads"):
        status = f"{status} {health.get('calls_ok', 0)}/{health.get('get_tools', 0)}"
    return status
