"""Typed records the catalog hands out: tasks, tables, tools, verifiers, load issues."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

VERIFIER_MODES = ("sql", "code")
DEFAULT_VERIFIER_FUNCTION = {"sql": "verify_task", "code": "verify_task_completion"}
MODE_OF_FUNCTION = {name: mode for mode, name in DEFAULT_VERIFIER_FUNCTION.items()}


def verifier_function(code: Any) -> str | None:
    """The function a verifier's code defines, as the reference finds it (spec §6.2): the first line that, after
    stripping, starts with ``def verify_`` and contains '('; None when there is none (or ``code`` is no string)."""
    if not isinstance(code, str):
        return None
    for line in code.split("\n"):
        line = line.strip()
        if line.startswith("def verify_") and "(" in line:
            return line.split("(")[0].replace("def ", "").strip()
    return None


def verifier_mode(code: Any, default: str) -> str:
    """A verifier row's mode comes from its code, not from the file it is in (spec §2.8, §9.1): a first
    ``def verify_`` line defining ``verify_task_completion`` is code mode, ``verify_task`` sql mode; anything else
    (no such line, another name, no code at all) keeps ``default``, the mode of the file's name."""
    return MODE_OF_FUNCTION.get(verifier_function(code) or "", default)


@dataclass
class RowRef:
    """Where one JSONL row lives, so it can be read on demand."""

    path: str
    line: int
    offset: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class LoadIssue:
    """Something wrong with the data. ``level`` is "error" or "warning"."""

    level: str
    message: str
    scenario: str | None = None
    path: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}: " if self.path and self.line else (f"{self.path}: " if self.path else "")
        who = f"[{self.scenario}] " if self.scenario else ""
        return f"{self.level}: {where}{who}{self.message}"


@dataclass
class Task:
    scenario: str  # normalized key
    index: int  # 0-based, as task_id / task_idx
    text: str


@dataclass
class Column:
    name: str
    type: str
    notnull: bool
    default: Any
    primary_key: bool


@dataclass
class ForeignKey:
    column: str
    other_table: str
    other_column: str | None


@dataclass
class Table:
    name: str
    ddl: str
    indexes: list[str]
    columns: list[Column] = field(default_factory=list)
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    error: str | None = None  # the DDL did not run

    @property
    def primary_key(self) -> list[str]:
        return [c.name for c in self.columns if c.primary_key]


@dataclass
class ToolParam:
    name: str
    location: str  # path | query | body
    type: str
    required: bool
    description: str = ""


@dataclass
class Tool:
    """A route of the generated server, read statically from its source (no code is run)."""

    name: str  # operation_id (or FastAPI's generated id)
    method: str
    path: str
    summary: str = ""
    description: str = ""
    params: list[ToolParam] = field(default_factory=list)
    handler: str = ""
    lineno: int = 0
    shadowed_by: str | None = None  # a later route with the same method and path replaces this one over MCP


@dataclass
class Verifier:
    scenario: str
    task_idx: int
    mode: str  # "sql" or "code": the row's mode, classified by its code (``verifier_mode``)
    code: Any  # python source; anything else (None, a number…) is "no valid code", as in the reference
    raw_response: Any
    source: RowRef | None = None

    @property
    def has_code(self) -> bool:
        return isinstance(self.code, str) and len(self.code.strip()) >= 10

    @property
    def function_name(self) -> str:
        """The first line that starts with ``def verify_`` and has '(' names the function (spec §6.2)."""
        return verifier_function(self.code) or DEFAULT_VERIFIER_FUNCTION.get(self.mode, "verify_task")

    @property
    def meta(self) -> dict[str, Any]:
        """``raw_response`` parsed (reasoning, criteria, key checks); {} when absent or unparseable."""
        if isinstance(self.raw_response, dict):
            return self.raw_response
        if not isinstance(self.raw_response, str) or not self.raw_response:
            return {}
        try:
            data = json.loads(self.raw_response)
        except ValueError:
            try:
                import json_repair

                data = json_repair.loads(self.raw_response)
            except Exception:
                return {}
        return data if isinstance(data, dict) else {}
