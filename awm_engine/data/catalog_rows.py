"""One row of the catalog: a scenario's counts, as ``awm catalog list`` prints them and the TUI lists them.

Only what the data says (read at load time, never parsing code). The TUI's health column comes from
``awm env test`` (a higher layer), so it is not part of the row: the TUI adds it next to the row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from awm_engine.data.catalog import Scenario


@dataclass(frozen=True)
class CatalogRow:
    scenario: str  # the normalized key
    name: str
    tables: int | None  # None: the schema row is missing or unreadable
    tools: int | None  # None: the code row is missing or unreadable
    tasks: int
    sample_rows: int | None
    sql_verifiers: int  # tasks with a usable sql-mode verifier (the mode its code defines, from either file)
    code_verifiers: int  # tasks with a usable code-mode verifier (idem)
    reference_solutions: int
    data_dir: str
    issues: tuple[str, ...] = ()

    @classmethod
    def from_scenario(cls, s: Scenario) -> CatalogRow:
        return cls(s.key, s.name, s.table_count, s.tool_count, len(s.tasks), s.insert_count,
                   s.verifier_coverage("sql"), s.verifier_coverage("code"), len(s.solution_refs), str(s.data_dir),
                   tuple(str(i) for i in s.issues))

    def coverage(self, mode: str) -> str:
        """``covered/tasks`` for verifier ``mode`` (sql | code), e.g. ``10/10``."""
        covered = self.sql_verifiers if mode == "sql" else self.code_verifiers
        return f"{covered}/{self.tasks}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``awm catalog list --json``."""
        return {"scenario": self.scenario, "name": self.name, "tables": self.tables, "tools": self.tools,
                "tasks": self.tasks, "sample_rows": self.sample_rows,
                "verifiers": {"sql": self.sql_verifiers, "code": self.code_verifiers},
                "reference_solutions": self.reference_solutions, "data_dir": self.data_dir,
                "issues": list(self.issues)}
