"""Verification of a finished episode: verifiers in a sandboxed subprocess, the judge, the reward.

``run_verifier`` executes one verifier's code in a child process with a scrubbed environment, a
wall-clock timeout, a memory limit and read-only copies of the databases; the function is chosen and
called as the reference does (first ``def verify_`` line; keyword names; positional fallback).
``verify_run`` reads a run directory and writes ``verify.<mode>.json`` (the reference's shape) and
``verify.json`` (label, reward and everything that led to them).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.agent.endpoints import Endpoint
from awm_engine.data.catalog import Catalog
from awm_engine.data.records import Verifier
from awm_engine.data.run_formats import TRAJECTORY
from awm_engine.sandbox.environment import scrubbed_env
from awm_engine.verify.rewards import RewardConfig

DEFAULT_TIMEOUT = 30.0
DEFAULT_MEMORY_MB = 1024
ROOT = str(Path(__file__).resolve().parents[2])


class HostError(Exception):
    pass


class VerifierHost:
    """The parent's handle on ``verifier_host`` (one per process, shared by threads; restarted if it dies)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.waiters: dict[str, list] = {}

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "awm_engine.verify.host"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                     env=scrubbed_env({"PYTHONPATH": ROOT}), cwd=tempfile.gettempdir())
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            answer = json.loads(line)
            waiter = self.waiters.get(answer["id"])
            if waiter is not None:
                waiter[1] = answer
                waiter[0].set()
        for waiter in list(self.waiters.values()):  # the host is gone: nobody else will answer
            if not waiter[0].is_set():
                waiter[1] = {"status": "host_died", "code": None}
                waiter[0].set()

    def run(self, request: Path, result: Path, timeout: float) -> dict:
        rid = uuid.uuid4().hex
        waiter = [threading.Event(), None]
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            self.waiters[rid] = waiter
            try:
                self.proc.stdin.write((json.dumps({"id": rid, "request": str(request), "result": str(result),
                                                   "timeout": timeout}) + "\n").encode())
                self.proc.stdin.flush()
            except OSError as exc:
                self.waiters.pop(rid, None)
                raise HostError(str(exc)) from None
        try:
            if not waiter[0].wait(timeout + 10):
                raise HostError("the verifier host did not answer")
        finally:
            self.waiters.pop(rid, None)
        if waiter[1]["status"] == "host_died":
            raise HostError("the verifier host exited")
        return waiter[1]


_host: VerifierHost | None = None
_host_guard = threading.Lock()


def verifier_host() -> VerifierHost | None:
    """The shared host, or None when ``AWM_VERIFIER_HOST=0`` asks for one fresh process per verifier."""
    global _host
    if os.environ.get("AWM_VERIFIER_HOST", "1") == "0":
        return None
    with _host_guard:
        if _host is None:
            _host = VerifierHost()
        return _host


def _spawn(request: Path, out: Path, timeout: float, cwd: str) -> tuple[str, int | None, str]:
    """One fresh interpreter for this verifier (the fallback)."""
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.verify.child", str(request), str(out)],
                            cwd=cwd, env=scrubbed_env({"PYTHONPATH": ROOT}), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return "timeout", None, ""
    return "exited", proc.returncode, (stderr or b"").decode(errors="replace")[-500:]


@dataclass
class VerifierOutcome:
    """``label``: code mode complete / others / judge_error; sql mode incomplete (placeholder) / judge_error."""

    mode: str
    label: str
    result: Any  # the verifier's return value, or an error dict
    error_kind: str | None = None  # no_code | syntax_error | function_not_found | exception | timeout | memory |
    #                                bad_return | db_missing | crashed
    error: str | None = None
    function: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_verifier(verifier: Verifier | None, initial_db: Path | str, final_db: Path | str, final_answer: str = "",
                 timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB,
                 mode: str | None = None) -> VerifierOutcome:
    mode = mode or (verifier.mode if verifier else "code")
    started = time.perf_counter()

    def fail(kind: str, error: str, function: str | None = None) -> VerifierOutcome:
        result = {"execution_status": "error", "error_message": error}
        if mode == "code":
            result["result"] = "others"
        return VerifierOutcome(mode, "judge_error", result, kind, error, function, time.perf_counter() - started)

    if verifier is None or not verifier.has_code:
        return fail("no_code", "No valid verifier code found")
    for path in (initial_db, final_db):
        if not Path(path).is_file():
            return fail("db_missing", f"database not found: {path}")
    function = verifier.function_name
    with tempfile.TemporaryDirectory(prefix="awm_verify_") as tmp:
        work = Path(tmp)
        initial_copy, final_copy = work / "initial.db", work / "final.db"
        shutil.copyfile(initial_db, initial_copy)
        shutil.copyfile(final_db, final_copy)
        for p in (initial_copy, final_copy):
            p.chmod(0o444)
        request = work / "request.json"
        request.write_text(json.dumps({"code": verifier.code, "function": function, "mode": mode,
                                       "initial_db": str(initial_copy), "final_db": str(final_copy),
                                       "final_answer": final_answer or "", "memory_mb": memory_mb}))
        out = work / "result.json"
        host = verifier_host()
        status = None
        if host is not None:
            try:
                answer = host.run(request, out, timeout)
                status, code, tail = answer["status"], answer.get("code"), ""
            except HostError:
                status = None
        if status is None:
            status, code, tail = _spawn(request, out, timeout, tmp)
        if status == "timeout":
            return fail("timeout", f"verifier timed out after {timeout:.0f}s", function)
        if not out.is_file():
            kind = "memory" if "MemoryError" in tail else "crashed"
            return fail(kind, f"verifier process exited with {code}: {tail}", function)
        data = json.loads(out.read_text())
    if data["status"] != "ok":
        return fail(data.get("error_kind", "exception"), "Execution error: " + data.get("error", ""), function)
    value = data["value"]
    elapsed = time.perf_counter() - started
    if mode == "code":
        if not isinstance(value, dict) or "result" not in value:
            return fail("bad_return", f"verifier returned {type(value).__name__} without a 'result' key", function)
        label = value["result"] if value["result"] in ("complete", "others") else "others"
        return VerifierOutcome(mode, label, {"result": label, "execution_status": "success", "raw_result": value},
                               None, None, function, elapsed)
    if isinstance(value, dict) and value.get("execution_status") == "error":
        return VerifierOutcome(mode, "judge_error", value, "exception", str(value.get("error_message")), function,
                               elapsed)
    return VerifierOutcome(mode, "incomplete", value, None, None, function, elapsed)


@dataclass
class VerifyReport:
    scenario: str
    task_id: int
    task: str
    mode: str  # the mode asked for
    label: str  # the final label
    reward: float
    has_verdict: bool
    stop_reason: str | None
    code: VerifierOutcome | None = None
    sql: VerifierOutcome | None = None
    judge: dict[str, Any] | None = None
    note: str | None = None
    rewards: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def final_answer_of(trajectory: dict[str, Any]) -> str:
    """The content of the last assistant message (the reference's ``final_answer``)."""
    for message in reversed(trajectory.get("messages", [])):
        if message.get("role") == "assistant":
            return message.get("content") or ""
    return ""


def _reference_record(report: VerifyReport, outcome: VerifierOutcome, mode: str) -> dict[str, Any]:
    record = {"scenario": report.scenario, "task_id": report.task_id, "task": report.task, "mode": mode,
              "reward_type": outcome.label, "verify_result": outcome.result}
    if mode == "sql" and report.judge is not None and outcome.label != "judge_error":
        record["llm_judge"] = {"classification": report.judge["classification"],
                               "judge_result": report.judge["judge_result"]}
    return record


async def verify_run(run_dir: Path | str, mode: str = "sql", catalog: Catalog | None = None,
                     judge: Endpoint | None = None, rewards: RewardConfig | None = None,
                     timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB) -> VerifyReport:
    """Verify a run directory (trajectory.json, initial.db, final.db) and write verify files into it."""
    from awm_engine.verify.judge import run_judge

    run_dir = Path(run_dir)
    rewards = rewards or RewardConfig()
    trajectory = TRAJECTORY.read(run_dir / TRAJECTORY.file)
    if trajectory.get("scenario") is None or trajectory.get("task_id") is None:
        raise ValueError(f"{run_dir}/trajectory.json has no scenario or task_id: cannot pick a verifier")
    if catalog is None:
        catalog = Catalog.load((trajectory.get("awm") or {}).get("data_dirs") or None)
    scenario = catalog.get(trajectory["scenario"])
    task_id = int(trajectory["task_id"])
    stop_reason = (trajectory.get("awm") or {}).get("stop_reason")
    answer = final_answer_of(trajectory)
    initial, final = run_dir / "initial.db", run_dir / "final.db"
    report = VerifyReport(scenario.key, task_id, trajectory.get("task", ""), mode, "judge_error", 0.0, False,
                          stop_reason, rewards=rewards.to_dict())
    if mode == "code" or judge is None:
        if mode == "sql":
            sql_verifier = scenario.verifier(task_id, "sql")
            if sql_verifier is not None:
                report.sql = await asyncio.to_thread(run_verifier, sql_verifier, initial, final, answer, timeout,
                                                     memory_mb, "sql")
            report.note = "no judge endpoint configured: the label comes from the code-mode verifier"
        report.code = await asyncio.to_thread(run_verifier, scenario.verifier(task_id, "code"), initial, final,
                                              answer, timeout, memory_mb, "code")
        report.label = report.code.label
        if mode == "sql" and report.code.error_kind == "no_code":
            report.note = "no judge endpoint configured and no code-mode verifier: no verdict"
    else:
        verifier = scenario.verifier(task_id, "sql")
        report.sql = await asyncio.to_thread(run_verifier, verifier, initial, final, answer, timeout, memory_mb, "sql")
        if report.sql.label == "judge_error":
            report.label = "judge_error"
        else:
            verdict = await run_judge(judge, report.task, trajectory.get("trajectory", []), report.sql.result,
                                      verifier.meta if verifier else None)
            report.judge = verdict.to_dict()
            report.label = verdict.classification
    report.has_verdict = report.label != "judge_error"
    report.reward = rewards.reward(report.label, stop_reason)
    outcome = report.code if (mode == "code" or judge is None) else report.sql
    if outcome is not None:
        (run_dir / f"verify.{'code' if outcome is report.code else 'sql'}.json").write_text(
            json.dumps(_reference_record(report, outcome, outcome.mode), indent=4, ensure_ascii=False, default=str))
    (run_dir / "verify.json").write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str))
    return report


async def verify_both(run_dir: Path | str, catalog: Catalog | None = None, judge: Endpoint | None = None,
                      rewards: RewardConfig | None = None) -> VerifyReport:
    """Code mode always, and sql mode with the judge when one is configured, merged into one report (the
    judge's label decides; the code verifier's outcome is kept beside it) written to ``verify.json``."""
    report = await verify_run(run_dir, "code", catalog, None, rewards)
    if judge is not None:
        code_outcome = report.code
        report = await verify_run(run_dir, "sql", catalog, judge, rewards)
        report.code = code_outcome
        (Path(run_dir) / "verify.json").write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False,
                                                              default=str))
    return report
