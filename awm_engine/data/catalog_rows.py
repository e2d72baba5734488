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
    tools: int | None  # routes in the code; None: the code row is missing or unreadable
    tasks: int
    sample_rows: int | None  # INSERT statements in the sample data
    sql_verifiers: int  # tasks with a usable sql-mode verifier (the mode its code defines, from either file)
    code_verifiers: int  # tasks with a usable code-mode verifier (idem)
    reference_solutions: int
    data_dir: str
    issues: tuple[str, ...] = ()
    mcp_tools: int | None = None  # what an MCP client lists (routes sharing a method and path count once)
    built_rows: int | None = None  # rows of the built database, when a build is known (statements can fail)

    @classmethod
    def from_scenario(cls, s: Scenario, built_rows: int | None = None) -> CatalogRow:
        return cls(s.key, s.name, s.table_count, s.tool_count, len(s.tasks), s.insert_count,
                   s.verifier_coverage("sql"), s.verifier_coverage("code"), len(s.solution_refs), str(s.data_dir),
                   tuple(str(i) for i in s.issues), s.mcp_tool_count, built_rows)

    def tools_cell(self) -> str:
        """MCP tools, with the routes where they differ: ``10 (11 routes)``."""
        if self.mcp_tools is None:
            return "-"
        return f"{self.mcp_tools}" + (f" ({self.tools} routes)" if self.tools not in (None, self.mcp_tools) else "")

    def rows_cell(self) -> str:
        """Built rows, with the INSERT statements where they differ (``61 (83 stmts)``); before any build,
        the statement count (``83 stmts``)."""
        if self.built_rows is None:
            return f"{self.sample_rows} stmts" if self.sample_rows else "-"
        return f"{self.built_rows}" + (f" ({self.sample_rows} stmts)" if self.sample_rows not in (None, self.built_rows)
                                       else "")

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
                "issues": list(self.issues), "mcp_tools": self.mcp_tools, "built_rows": self.built_rows}
