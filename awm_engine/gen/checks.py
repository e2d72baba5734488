"""Running what a stage generated, always in the engine's sandbox: the schema and inserts are built by a
sandboxed build, the environment is loaded by a sandboxed pool worker and every tool is called, verifiers run in
the sandboxed verifier host on the initial database."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.data.catalog import FILES, Catalog
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.records import Verifier
from awm_engine.data.schema_examples import example_arguments
from awm_engine.db.build import BuildReport, build_database_sandboxed
from awm_engine.runtime.episode import EnvLoadError

# a tool call's traceback that shows the code itself is wrong, not that the example arguments found nothing
DEFECTS = re.compile(
    r"\b(NameError|ImportError|ModuleNotFoundError|SyntaxError|IndentationError|UnboundLocalError|"
    r"ResponseValidationError|PydanticUserError|PydanticSchemaGenerationError|InvalidRequestError|"
    r"ArgumentError|NoReferencedTableError|CompileError)\b"
    r"|no such table|no such column|has no column named|unexpected keyword argument|"
    r"missing \d+ required positional argument|'(?!NoneType')[\w.]+' object has no attribute")


def build_schema(scenario: str, db_schema: dict[str, Any], path: Path) -> BuildReport:
    return build_database_sandboxed(scenario, db_schema, {"tables": []}, path, timeout=120)


def build_sample(scenario: str, db_schema: dict[str, Any], sample_data: dict[str, Any], path: Path) -> BuildReport:
    return build_database_sandboxed(scenario, db_schema, sample_data, path, timeout=300)


@dataclass
class EnvCheck:
    loads: bool
    tools: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # defects: each one makes the attempt fail
    notes: list[str] = field(default_factory=list)  # calls that failed without a defect (e.g. nothing found)
    calls: int = 0


def scratch_dir(base: Path, name: str) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))


def write_rows(directory: Path, rows: dict[str, dict[str, Any]]) -> None:
    """One scenario's AWM rows into ``directory`` (keys of ``data.catalog.FILES``)."""
    for kind, row in rows.items():
        (directory / FILES[kind]).write_text(dumps_text(row) + "\n", encoding="utf-8")


async def check_environment(pool, rows: dict[str, dict[str, Any]], scratch: Path, call_timeout: float = 20.0) -> EnvCheck:
    """Load the environment in a pool worker (sandboxed), list its tools and call every one with example
    arguments from its input schema; tracebacks that show a code defect are errors."""
    work = scratch_dir(scratch, "env")
    try:
        write_rows(work, rows)
        catalog = Catalog.load([work])
        name = rows["scenario"]["name"]
        try:
            scenario = catalog.get(name)
        except KeyError as exc:
            return EnvCheck(False, errors=[f"the generated rows do not load: {exc}"])
        try:
            episode = await pool.open_episode(scenario)
        except EnvLoadError as exc:
            return EnvCheck(False, errors=[f"the server does not start: {exc}"])
        check = EnvCheck(True)
        try:
            tools = episode.list_tools()
            check.tools = [str(t.get("name")) for t in tools]
            if not tools:
                check.errors.append("the server starts but exposes no tools (no routes with an operation_id)")
            for tool in tools:
                args = example_arguments(tool.get("inputSchema"))
                try:
                    result = await asyncio.wait_for(episode.call_tool(tool["name"], args), call_timeout + 5)
                except asyncio.TimeoutError:
                    check.errors.append(f"tool {tool['name']}: no answer within {call_timeout:.0f}s")
                    continue
                check.calls += 1
                if not result.is_error:
                    continue
                evidence = f"{result.traceback or ''}\n{result.text}"
                summary = f"tool {tool['name']} called with {json.dumps(args)[:200]}: {result.error_kind}: " \
                          f"{(result.traceback or result.text).strip()[-1500:]}"
                if result.error_kind == "timeout" or DEFECTS.search(evidence):
                    check.errors.append(summary)
                else:
                    check.notes.append(summary)
        finally:
            await episode.close()
        return check
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_verifier_on_initial(scenario: str, task: int, mode: str, code: str, db: Path, timeout: float = 30.0):
    """The generated verifier called on the initial database as both states (the reference's validation), in
    the sandboxed verifier host; returns ``verify.verification.VerifierOutcome``."""
    from awm_engine.verify.verification import run_verifier

    verifier = Verifier(scenario, task, mode, code, None)
    return run_verifier(verifier, db, db, final_answer="EMPTY RESPONSE FOR TESTING", timeout=timeout, mode=mode)
