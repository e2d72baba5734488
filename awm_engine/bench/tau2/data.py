"""Loading a τ²-bench data directory (``--tau2-data DIR``, laid out as τ²-bench's ``data/tau2``): per domain its
policy, tasks, splits, databases and the task version; the user-simulator guidelines.

``DIR`` holds ``domains/{airline,retail,telecom}/`` and ``user_simulator/`` (``DIR/domains`` itself is accepted
too). Every file may be missing or malformed: what is wrong is reported as a problem (``LoadIssue``) and the rest
still loads — a task that does not fit the schema is left out, a split naming tasks that are not in the files is
unusable. The airline ``db.json`` is often absent (it is large): pass ``airline_db`` (``--airline-db FILE``).

Task versions (spec §0, §2) are told apart by the task file's fingerprint (size and SHA-256), else by content:
``original`` (v0.1.0), ``verified`` (amazon-agi/tau2-bench-verified) and ``tau3`` (v1.0.x, every task with a
``reward_basis``). Telecom's tasks are the same in every version; its ``tasks.json`` holds either the 114 base
tasks (the v0.1.0 file) or the full generated set.
"""
from __future__ import annotations

import hashlib
import json
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from awm_engine.bench.tau2.models import (
    FlightDB,
    RetailDB,
    TelecomDB,
    TelecomUserDB,
)
from awm_engine.bench.tau2.tasks import Task
from awm_engine.data.jsonl import read_bounded
from awm_engine.data.paths import not_a_directory
from awm_engine.data.records import LoadIssue

DOMAINS = ("airline", "retail", "telecom")
DEFAULT_SPLIT = "base"
SCENARIO_PREFIX = "tau2_"  # the catalog key of a domain: tau2_airline, tau2_retail, tau2_telecom

# (domain, size in bytes, first 8 hex digits of the SHA-256 or None) -> version
FINGERPRINTS: dict[tuple[str, int], tuple[str | None, str]] = {
    ("airline", 149096): (None, "original"),
    ("airline", 150905): ("202f0cdb", "verified"),
    ("airline", 155528): ("ccd8ba73", "tau3"),
    ("retail", 328166): (None, "original"),
    ("retail", 329895): ("04cef2fd", "verified"),
    ("retail", 345982): ("8e03ebce", "tau3"),
}
VERSION_NAMES = {"original": "original τ²-bench tasks (v0.1.0)",
                 "verified": "τ²-Bench-Verified tasks (amazon-agi/tau2-bench-verified)",
                 "tau3": "τ³ tasks (v1.0.x: explicit reward_basis, retail judged by NL assertions)",
                 "telecom-base": "telecom's 114 base tasks (the v0.1.0 tasks.json; the same in every version)",
                 "telecom-full": "telecom's full generated task set (the same in every version)",
                 "unknown": "tasks of an unknown version"}


def domain_key(domain: str) -> str:
    return SCENARIO_PREFIX + domain


def domain_of_key(key: str) -> str | None:
    """``tau2_retail`` -> ``retail`` (None for a key that names no τ² domain)."""
    if isinstance(key, str) and key.startswith(SCENARIO_PREFIX) and key[len(SCENARIO_PREFIX):] in DOMAINS:
        return key[len(SCENARIO_PREFIX):]
    return None


def domains_dir(root: Path) -> Path:
    """``root/domains`` when it exists, else ``root`` itself when it holds domain directories."""
    if (root / "domains").is_dir():
        return root / "domains"
    return root


@dataclass
class TaskVersion:
    name: str  # original | verified | tau3 | unknown | telecom-base | telecom-full
    how: str  # fingerprint | content

    def describe(self) -> str:
        return f"{VERSION_NAMES.get(self.name, self.name)} (by {self.how})"


def _read_json(path: Path, issues: list[LoadIssue], scenario: str) -> Any:
    try:
        return json.loads(read_bounded(path))
    except OSError as exc:
        issues.append(LoadIssue("error", f"cannot read: {exc}", scenario, str(path)))
    except ValueError as exc:
        issues.append(LoadIssue("error", f"not valid JSON: {exc}", scenario, str(path)))
    return None


def detect_version(domain: str, path: Path, raw: bytes, tasks: list[Any]) -> TaskVersion:
    if domain == "telecom":
        return TaskVersion("telecom-base" if len(tasks) <= 200 else "telecom-full", "content")
    known = FINGERPRINTS.get((domain, len(raw)))
    if known is not None:
        prefix, name = known
        if prefix is None or hashlib.sha256(raw).hexdigest().startswith(prefix):
            return TaskVersion(name, "fingerprint")
    dicts = [t for t in tasks if isinstance(t, dict)]
    criteria = [t.get("evaluation_criteria") for t in dicts if isinstance(t.get("evaluation_criteria"), dict)]
    if criteria and all("reward_basis" in c for c in criteria):
        return TaskVersion("tau3", "content")
    if domain == "retail" and any(isinstance(a, dict) and a.get("name") == "get_item_details"
                                  for c in criteria for a in (c.get("actions") or []) if isinstance(c, dict)):
        return TaskVersion("verified", "content")  # the verified fork added get_item_details; v0.1.0 had none
    return TaskVersion("unknown", "content")


class DomainData:
    """One domain of a τ² data directory, read on first use."""

    def __init__(self, name: str, root: Path, airline_db: Path | None = None):
        self.name = name
        self.key = domain_key(name)
        self.root = Path(root)
        self.dir = domains_dir(self.root) / name
        self.airline_db = Path(airline_db) if airline_db else None
        self.issues: list[LoadIssue] = []
        self._tasks: dict[str, Task] | None = None
        self._rejected: set[str] = set()  # ids of tasks in the files left out for not fitting the schema
        self._splits: dict[str, list[str]] | None = None
        self._version: TaskVersion | None = None
        self._raw_db: bytes | dict | None = None
        self._raw_user_db: dict | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"DomainData({self.name!r}, {self.dir})"

    # -- text ---------------------------------------------------------------------------------------------
    def _text(self, name: str) -> str | None:
        path = self.dir / name
        try:
            return read_bounded(path).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.issues.append(LoadIssue("error", f"cannot read {name}: {exc}", self.key, str(path)))
            return None

    @property
    def policy(self) -> str | None:
        """The agent's policy: ``policy.md``; telecom's main policy and tech-support manual in their tags."""
        if "policy" not in self._cache:
            self._cache["policy"] = self._policy()
        return self._cache["policy"]

    def _policy(self) -> str | None:
        if self.name != "telecom":
            return self._text("policy.md")
        main, manual = self._text("main_policy.md"), self._text("tech_support_manual.md")
        if main is None or manual is None:
            return None
        return (f"<main_policy>\n{main}\n</main_policy>\n<tech_support_policy>\n{manual}\n"
                "</tech_support_policy>")

    def guidelines(self) -> str | None:
        """The user-simulator guidelines: the tools variant when the user has tools (telecom)."""
        if "guidelines" not in self._cache:
            self._cache["guidelines"] = self._guidelines()
        return self._cache["guidelines"]

    def _guidelines(self) -> str | None:
        name = "simulation_guidelines_tools.md" if self.name == "telecom" else "simulation_guidelines.md"
        path = self.root / "user_simulator" / name
        if not path.is_file():
            path = domains_dir(self.root).parent / "user_simulator" / name
        try:
            return read_bounded(path).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.issues.append(LoadIssue("error", f"cannot read the user-simulator guidelines: {exc}", self.key,
                                         str(path)))
            return None

    # -- tasks and splits ---------------------------------------------------------------------------------
    @property
    def tasks(self) -> dict[str, Task]:
        with self._lock:
            if self._tasks is None:
                self._tasks = self._load_tasks()
            return self._tasks

    def _load_tasks(self) -> dict[str, Task]:
        tasks: dict[str, Task] = {}
        files = ["tasks.json"] + (["tasks_small.json"] if self.name == "telecom" else [])
        for fname in files:
            path = self.dir / fname
            if not path.is_file():
                if fname == "tasks.json":
                    self.issues.append(LoadIssue("error", "no tasks.json", self.key, str(path)))
                continue
            try:
                raw = read_bounded(path)
                data = json.loads(raw)
            except (OSError, ValueError) as exc:
                self.issues.append(LoadIssue("error", f"cannot read the tasks: {exc}", self.key, str(path)))
                continue
            if isinstance(data, dict) and isinstance(data.get("tasks"), list):
                data = data["tasks"]
            if not isinstance(data, list):
                self.issues.append(LoadIssue("error", f"the tasks are a {type(data).__name__}, not a list",
                                             self.key, str(path)))
                continue
            if fname == "tasks.json":
                self._version = detect_version(self.name, path, raw, data)
            for i, item in enumerate(data):
                try:
                    task = Task.model_validate(item)
                except ValidationError as exc:
                    first = exc.errors()[0] if exc.errors() else {}
                    where = ".".join(str(p) for p in first.get("loc", ())) or "task"
                    ident = item.get("id") if isinstance(item, dict) else None
                    if isinstance(ident, (str, int)) and not isinstance(ident, bool):
                        self._rejected.add(str(ident))
                    self.issues.append(LoadIssue("error", f"task #{i} (id {ident!r}) does not fit the schema: "
                                                 f"{where}: {first.get('msg', exc)}; left out", self.key, str(path)))
                    continue
                if task.id in tasks:
                    self.issues.append(LoadIssue("warning", f"duplicate task id {task.id!r} (task #{i}); keeping "
                                                 "the first", self.key, str(path)))
                    continue
                tasks[task.id] = task
        return tasks

    @property
    def splits(self) -> dict[str, list[str]]:
        """Every split whose tasks are all in the task files (``base`` = every task of tasks.json when there is
        no split file). A split naming missing tasks is reported and left out."""
        with self._lock:
            if self._splits is not None:
                return self._splits
        tasks = self.tasks
        splits: dict[str, list[str]] = {}
        path = self.dir / "split_tasks.json"
        data = _read_json(path, self.issues, self.key) if path.is_file() else None
        if data is not None and not isinstance(data, dict):
            self.issues.append(LoadIssue("error", "split_tasks.json is not an object", self.key, str(path)))
            data = None
        for name, ids in (data or {}).items():
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                self.issues.append(LoadIssue("error", f"split {name!r} is not a list of task ids", self.key,
                                             str(path)))
                continue
            missing = [i for i in ids if i not in tasks]
            absent = [i for i in missing if i not in self._rejected]
            if absent:
                self.issues.append(LoadIssue("warning", f"split {name!r}: {len(absent)} of {len(ids)} task ids have "
                                             "no task in these files; the split cannot be used", self.key,
                                             str(path)))
                continue
            if missing:  # in the files but malformed (reported above): the split runs without them
                self.issues.append(LoadIssue("warning", f"split {name!r}: {len(missing)} of {len(ids)} tasks are left "
                                             f"out (they do not fit the schema: {', '.join(missing[:5])}"
                                             f"{' …' if len(missing) > 5 else ''}); the rest is used", self.key,
                                             str(path)))
            splits[name] = [i for i in dict.fromkeys(ids) if i in tasks]
        if DEFAULT_SPLIT not in splits and data is None and tasks:
            splits[DEFAULT_SPLIT] = list(tasks)
        with self._lock:
            self._splits = splits
        return splits

    def split_tasks(self, split: str = DEFAULT_SPLIT, task_ids: list[str] | None = None) -> list[Task]:
        """The tasks of ``split`` (optionally only ``task_ids``, in split order); KeyError with a reason."""
        splits = self.splits
        if split not in splits:
            known = ", ".join(sorted(splits)) or "none"
            raise KeyError(f"{self.name}: no usable split {split!r} (usable: {known})")
        ids = splits[split]
        if task_ids:
            unknown = [t for t in task_ids if t not in ids]
            if unknown:
                raise KeyError(f"{self.name}: task ids not in split {split!r}: {', '.join(map(repr, unknown[:5]))}")
            wanted = set(task_ids)
            ids = [i for i in ids if i in wanted]
        return [self.tasks[i] for i in ids]

    @property
    def version(self) -> TaskVersion | None:
        """Which task version ``tasks.json`` is (None when it could not be read)."""
        _ = self.tasks
        return self._version

    def task(self, task_id: str) -> Task:
        try:
            return self.tasks[task_id]
        except (KeyError, TypeError):
            raise KeyError(f"{self.name}: no task {task_id!r}") from None

    # -- databases ----------------------------------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        if self.name == "telecom":
            return self.dir / "db.toml"
        if self.name == "airline" and self.airline_db is not None:
            return self.airline_db
        return self.dir / "db.json"

    @property
    def user_db_path(self) -> Path | None:
        return self.dir / "user_db.toml" if self.name == "telecom" else None

    def db_problem(self) -> str | None:
        """Why the domain's database cannot be loaded (None when it can)."""
        try:
            self.fresh_db()
            if self.name == "telecom":
                self.fresh_user_db()
        except DatabaseMissing as exc:
            return str(exc)
        return None

    def _raw(self) -> bytes | dict:
        with self._lock:
            if self._raw_db is None:
                path = self.db_path
                if not path.is_file():
                    hint = " (it is not in every copy of the data: pass --airline-db FILE)" if self.name == "airline" \
                        else ""
                    raise DatabaseMissing(f"{self.name}: no database at {path}{hint}")
                try:
                    raw = read_bounded(path)
                    self._raw_db = tomllib.loads(raw.decode()) if path.suffix == ".toml" else raw
                except (OSError, ValueError) as exc:
                    raise DatabaseMissing(f"{self.name}: cannot read the database {path}: {exc}") from None
            return self._raw_db

    def fresh_db(self) -> BaseModel:
        """A new, unshared copy of the domain's database (``DatabaseMissing`` when it cannot be loaded); the file is
        read once and validated for every copy."""
        raw = self._raw()
        model = {"airline": FlightDB, "retail": RetailDB, "telecom": TelecomDB}[self.name]
        try:
            return model.model_validate_json(raw) if isinstance(raw, bytes) else model.model_validate(raw)
        except ValidationError as exc:
            if any(e.get("type") == "json_invalid" for e in exc.errors()):
                raise DatabaseMissing(f"{self.name}: cannot read the database {self.db_path}: not valid JSON: "
                                      f"{exc.errors()[0].get('msg')}") from None
            raise DatabaseMissing(f"{self.name}: the database {self.db_path} does not fit the schema: "
                                  f"{_first_error(exc)}") from None

    def fresh_user_db(self) -> BaseModel | None:
        if self.name != "telecom":
            return None
        with self._lock:
            if self._raw_user_db is None:
                path = self.user_db_path
                try:
                    self._raw_user_db = tomllib.loads(read_bounded(path).decode()) if path.is_file() else {}
                except (OSError, ValueError) as exc:
                    raise DatabaseMissing(f"telecom: cannot read the user database {path}: {exc}") from None
            raw = self._raw_user_db
        try:
            return TelecomUserDB.model_validate(raw)
        except ValidationError as exc:
            raise DatabaseMissing(f"telecom: the user database does not fit the schema: {_first_error(exc)}") from None


class DatabaseMissing(Exception):
    """A domain's database is absent or unusable."""


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    return f"{'.'.join(str(p) for p in first.get('loc', ()))}: {first.get('msg')} ({len(errors)} errors)"


@dataclass
class Tau2Data:
    """A τ² data directory: ``domain(name)`` for each of airline, retail and telecom."""

    root: Path
    airline_db: Path | None = None
    _domains: dict[str, DomainData] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        if self.airline_db is not None:
            self.airline_db = Path(self.airline_db)

    def domain(self, name: str) -> DomainData:
        if name not in DOMAINS:
            raise KeyError(f"unknown τ² domain {name!r} (choose from {', '.join(DOMAINS)})")
        if name not in self._domains:
            self._domains[name] = DomainData(name, self.root, self.airline_db if name == "airline" else None)
        return self._domains[name]

    def problems(self) -> list[LoadIssue]:
        """Everything wrong with the directory, per domain (loads tasks and splits to find out)."""
        out: list[LoadIssue] = []
        why = not_a_directory(self.root)
        if why is not None:
            return [LoadIssue("error", why, path=str(self.root))]
        for name in DOMAINS:
            domain = self.domain(name)
            if not domain.dir.is_dir():
                out.append(LoadIssue("error", "no domain directory", domain.key, str(domain.dir)))
                continue
            _ = domain.splits, domain.policy, domain.guidelines()
            problem = domain.db_problem()
            if problem:
                out.append(LoadIssue("error" if name != "airline" else "warning", problem, domain.key))
            out.extend(domain.issues)
        return out
