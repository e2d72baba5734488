"""A generation run's output directory: the AWM files (``gen_*.jsonl``), the built databases, and the run's own
records under ``.awm-gen/`` (config, one event per attempt and per finished stage).

Rows are appended as each scenario finishes a stage (one write per line, flushed and synced), so a killed run
keeps everything finished; a line cut off by the kill is dropped when the run resumes. What is in the files is
what is done: resuming redoes only what has no row.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from awm_engine.data.catalog import FILES
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.names import normalize_scenario_name
from awm_engine.gen.records import GEN_FORMAT_VERSION, GenConfig

STAGE_FILES = {"scenario": FILES["scenario"], "task": FILES["tasks"], "db": FILES["db"], "sample": FILES["sample"],
               "spec": FILES["spec"], "env": FILES["envs"], "verifier_sql": FILES["verifier_sql"],
               "verifier_code": FILES["verifier_code"]}


class GenStoreError(Exception):
    pass


class GenStore:
    def __init__(self, out: Path | str):
        self.out = Path(out).resolve()  # sandboxed checks run elsewhere: every path handed on is absolute
        self.meta = self.out / META
        self._lock = threading.Lock()
        self._index: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self.unreadable_events = 0  # lines of events.jsonl that the last ``events()`` could not use

    # -- set-up ---------------------------------------------------------------------------------------------
    def prepare(self, config: GenConfig, resume: bool) -> GenConfig:
        """Create the directory (``resume``: reuse it and its config, mending lines cut off by a kill)."""
        self.out.mkdir(parents=True, exist_ok=True)
        self.meta.mkdir(exist_ok=True)
        (self.out / "databases").mkdir(exist_ok=True)
        config_path = self.meta / "config.json"
        if config_path.is_file():
            try:
                saved = json.loads(config_path.read_text())
            except ValueError as exc:
                raise GenStoreError(f"{config_path} is not valid JSON ({exc}); remove it to start over") from None
            if int(saved.get("format_version", 1)) > GEN_FORMAT_VERSION:
                raise GenStoreError(f"{self.out} was written by a newer awm (generation format "
                                    f"{saved.get('format_version')}; this awm reads up to {GEN_FORMAT_VERSION})")
            if not resume and self.has_rows():
                raise GenStoreError(f"{self.out} already holds a generation run; pass --resume to continue it, "
                                    "or choose another --out")
        for name in [*STAGE_FILES.values(), "events.jsonl"]:
            path = self.meta / name if name == "events.jsonl" else self.out / name
            mend(path)
        config_path.write_text(json.dumps(config.to_dict(), indent=2))
        self._index.clear()
        return config

    def has_rows(self) -> bool:
        return any((self.out / f).is_file() and (self.out / f).stat().st_size for f in STAGE_FILES.values())

    # -- rows -----------------------------------------------------------------------------------------------
    def rows(self, stage: str) -> list[dict[str, Any]]:
        path = self.out / STAGE_FILES[stage]
        found = []
        if not path.is_file():
            return found
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                found.append(row)
        return found

    def _indexed(self, stage: str) -> dict[str, list[dict[str, Any]]]:
        """The stage's rows by normalized scenario name (file order), read once and kept up to date by
        ``append``: a run over a thousand scenarios must not re-read gen_envs.jsonl for each of them."""
        if stage not in self._index:
            field = "name" if stage == "scenario" else "scenario"
            index: dict[str, list[dict[str, Any]]] = {}
            for row in self.rows(stage):
                index.setdefault(normalize_scenario_name(str(row.get(field, ""))), []).append(row)
            self._index[stage] = index
        return self._index[stage]

    def row(self, stage: str, scenario: str) -> dict[str, Any] | None:
        """The scenario's first row of ``stage`` (first wins, as the reference's lookups), or None."""
        found = self._indexed(stage).get(normalize_scenario_name(scenario))
        return found[0] if found else None

    def task_indices(self, stage: str, scenario: str) -> set[Any]:
        """The ``task_idx`` values of the scenario's verifier rows in ``stage`` (verifier_sql / verifier_code)."""
        return {r.get("task_idx") for r in self._indexed(stage).get(normalize_scenario_name(scenario), [])}

    def export_scenario(self, scenario: str, dest: Path) -> None:
        """The scenario's rows of every stage into ``dest`` as an AWM directory of its own (so checking one
        scenario does not index the whole, growing output)."""
        dest.mkdir(parents=True, exist_ok=True)
        key = normalize_scenario_name(scenario)
        for stage, name in STAGE_FILES.items():
            rows = self._indexed(stage).get(key)
            if rows:
                (dest / name).write_text("".join(dumps_text(r) + "\n" for r in rows), encoding="utf-8")

    def append(self, stage: str, row: dict[str, Any]) -> None:
        self._append(self.out / STAGE_FILES[stage], row)
        if stage in self._index:
            field = "name" if stage == "scenario" else "scenario"
            self._index[stage].setdefault(normalize_scenario_name(str(row.get(field, ""))), []).append(row)

    def event(self, record: dict[str, Any]) -> None:
        self._append(self.meta / "events.jsonl", record)

    def events(self) -> list[dict[str, Any]]:
        path = self.meta / "events.jsonl"
        if not path.is_file():
            return []
        found, self.unreadable_events = [], 0
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                self.unreadable_events += int(bool(line.strip()))
        self.unreadable_events += sum(1 for e in found if not isinstance(e, dict))
        return [e for e in found if isinstance(e, dict)]

    def _append(self, path: Path, row: dict[str, Any]) -> None:
        data = (dumps_text(row) + "\n").encode("utf-8")  # a lone surrogate in a reply: escaped, never an error
        with self._lock:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def database(self, scenario: str) -> Path:
        return self.out / "databases" / f"{normalize_scenario_name(scenario)}.db"

    def db_path_field(self, scenario: str) -> str:
        """The ``db_path`` written into ``gen_db.jsonl`` and ``gen_envs.jsonl``: relative, as AgentWorldModel-1K's
        ``./outputs/databases/<norm>.db`` — the reference runs from the folder holding its ``outputs/``, so the path
        is ``./<this folder's name>/databases/<norm>.db`` (exactly AWM-1K's when the folder is named ``outputs``)
        and stays true when the folder moves. awm itself never reads it (the spec: recompute, do not trust)."""
        return f"./{self.out.name}/databases/{normalize_scenario_name(scenario)}.db"


def mend(path: Path) -> None:
    """Drop a last line cut off by a kill (no trailing newline, or not JSON)."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    try:
        json.loads(tail)
        path.write_bytes(data + b"\n")
    except ValueError:
        path.write_bytes(data[:cut])


META = ".awm-gen"


def is_gen_run(path: Path | str) -> bool:
    """Whether ``path`` is a generation run's output directory."""
    return (Path(path) / META / "config.json").is_file()


def find_gen_runs(root: Path | str) -> list[Path]:
    """Generation runs (``awm gen … --out DIR``) directly under ``root`` or one level down, newest first."""
    root = Path(root)
    found = {p.parent.parent for pattern in (f"*/{META}/config.json", f"*/*/{META}/config.json")
             for p in root.glob(pattern)}

    def changed(run: Path) -> float:
        try:
            return (run / META / "events.jsonl").stat().st_mtime
        except OSError:
            return 0.0
    return sorted(found, key=lambda run: (-changed(run), str(run)))


def run_signature(out: Path | str) -> tuple:
    """What changes when a run writes anything its status shows: each file's mtime and size (or None) — so a
    viewer re-reads only when this changed."""
    out = Path(out)
    paths = [out / META / "config.json", out / META / "events.jsonl", *(out / name for name in STAGE_FILES.values())]
    signature: list[Any] = []
    for path in paths:
        try:
            stat = path.stat()
            signature.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            signature.append(None)
    return (out.is_dir(), *signature)
