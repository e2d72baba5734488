"""Verification of a finished episode: verifiers in a sandboxed subprocess, the judge, the reward.

``run_verifier`` executes one verifier's code in a sandbox of its own (``sandbox.launcher``: its own pid, mount,
network and IPC namespaces, no view of any other verification or of the host's processes), with a wall-clock
timeout, a CPU-time and a memory limit and read-only copies of the databases; the function is chosen and
called as the reference does (first ``def verify_`` line; keyword names; positional fallback).
``verify_run`` reads a run directory and writes ``verify.<mode>.json`` (the reference's shape) and
``verify.json`` (label, reward and everything that led to them).
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.agent.endpoints import Endpoint
from awm_engine.data.catalog import Catalog, Scenario
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.records import VERIFIER_MODES, Verifier
from awm_engine.data.run_formats import TRAJECTORY
from awm_engine.sandbox import limits, safe_fs
from awm_engine.sandbox.launcher import (
    Sandbox,
    SandboxPolicy,
    kill_tree,
    private_dir,
    remove_dir,
    sandbox_ids,
)
from awm_engine.verify import shared_host
from awm_engine.verify.judge import DEFAULT_PROFILE, check_profile, run_judge
from awm_engine.verify.rewards import RewardConfig

DEFAULT_TIMEOUT = 30.0
DEFAULT_MEMORY_MB = 1024
ROOT = str(Path(__file__).resolve().parents[2])


_executor = None


async def _in_verifier_thread(fn, *args):
    """Verifications wait on their own threads: a slow verifier never holds up the default executor (which
    writes results and trajectories)."""
    global _executor
    if _executor is None:
        from concurrent.futures import ThreadPoolExecutor

        _executor = ThreadPoolExecutor(max_workers=64, thread_name_prefix="awm-verify")
    return await asyncio.get_running_loop().run_in_executor(_executor, fn, *args)


RESULT_LIMIT = 16 * 1024 * 1024  # a verifier's result file is read up to this size


STDERR_TAIL = 4096


def _spawn(work: Path, timeout: float, memory_mb: int | None, cpu_seconds: int) -> tuple[str, int | None, str]:
    """One verification in a sandbox of its own: it sees only its own directory (its request and read-only copies
    of the two databases) and writes only its result there; no other verifier, and no host process, is visible to
    it, so its answer is the only one its task reads."""
    sandbox = Sandbox(SandboxPolicy(writable=[str(work)], memory_mb=memory_mb, max_procs=64, cpu_seconds=cpu_seconds),
                      "verifier")
    tail = bytearray()  # only the end of what it writes to stderr is kept: it may write gigabytes

    def drain(stream) -> None:
        for chunk in iter(lambda: stream.read(1 << 16), b""):
            tail.extend(chunk)
            del tail[:-STDERR_TAIL]

    try:
        proc = sandbox.popen([sys.executable, "-m", "awm_engine.verify.child", str(work / "request.json"),
                              str(work / "result.json")], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        reader = threading.Thread(target=drain, args=(proc.stderr,), daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            proc.wait()
            return "timeout", None, ""
        finally:
            reader.join(timeout=5)  # everything it started is gone with it (its own session, killed as a tree)
            proc.stderr.close()
    finally:
        sandbox.cleanup()
    return "exited", code, bytes(tail).decode(errors="replace")[-500:]


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
    runner: str | None = None  # host (a fresh process of its scenario's verifier host) | sandbox (one of its own)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_verifier(verifier: Verifier | None, initial_db: Path | str, final_db: Path | str, final_answer: str = "",
                 timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB,
                 mode: str | None = None, scenario: str | None = None) -> VerifierOutcome:
    """Run one verifier on copies of the two databases. With ``scenario``, in a fresh process of that scenario's
    verifier host where hosts are usable (``shared_host``), else in a sandbox of its own."""
    mode = mode or (verifier.mode if verifier else "code")
    started = time.perf_counter()
    runner = "sandbox"

    def fail(kind: str, error: str, function: str | None = None) -> VerifierOutcome:
        result = {"execution_status": "error", "error_message": error}
        if mode == "code":
            result["result"] = "others"
        return VerifierOutcome(mode, "judge_error", result, kind, error, function, time.perf_counter() - started,
                               runner)

    if verifier is None or not verifier.has_code:
        return fail("no_code", "No valid verifier code found")
    for path in (initial_db, final_db):
        if not Path(path).is_file():
            return fail("db_missing", f"database not found: {path}")
    function = verifier.function_name
    request = {"code": verifier.code, "function": function, "mode": mode, "final_answer": final_answer or "",
               "memory_mb": memory_mb, "cpu_seconds": max(1, int(timeout) + 1)}
    data = None
    if scenario is not None and not shared_host.needs_own_sandbox(verifier.code) and shared_host.usable()[0]:
        try:
            answer = shared_host.host_for(scenario, memory_mb).run(request, Path(initial_db), Path(final_db), timeout)
        except (shared_host.HostGone, OSError):
            answer = None  # the host ended under it (or could not start): it runs again, in a sandbox of its own
        if answer is not None:
            kind = answer.get("kind") if answer.get("status") == "host" else None
            if kind in ("timeout", "db_missing", "too_long"):
                runner = "host"
                if kind == "timeout":
                    return fail("timeout", f"verifier timed out after {timeout:.0f}s", function)
                if kind == "too_long":
                    return fail("bad_return", str(answer.get("error")), function)
                return fail("db_missing", str(answer.get("error")), function)
            data = answer.get("result") if answer.get("status") != "host" else None
            if _confirm_in_own_sandbox(data):
                data = None  # the verdict is the one of a sandbox of its own
            else:
                runner = "host"
    if data is None and runner == "sandbox":
        outcome = _run_in_own_sandbox(request, initial_db, final_db, timeout, memory_mb)
        if isinstance(outcome, tuple):
            return fail(*outcome, function)
        data = outcome
    if not isinstance(data, dict) or data.get("status") not in ("ok", "error"):
        return fail("bad_return", "the verifier's result has no status", function)
    if data["status"] != "ok":
        kind, error = data.get("error_kind"), data.get("error")
        return fail(kind if isinstance(kind, str) and kind.isidentifier() else "exception",
                    "Execution error: " + (error if isinstance(error, str) else repr(error)), function)
    if "value" not in data:
        return fail("bad_return", "the verifier's result has no value", function)
    value = data["value"]
    elapsed = time.perf_counter() - started
    if mode == "code":
        if not isinstance(value, dict) or "result" not in value:
            return fail("bad_return", f"verifier returned {type(value).__name__} without a 'result' key", function)
        label = value["result"] if value["result"] in ("complete", "others") else "others"
        return VerifierOutcome(mode, label, {"result": label, "execution_status": "success", "raw_result": value},
                               None, None, function, elapsed, runner)
    if isinstance(value, dict) and value.get("execution_status") == "error":
        return VerifierOutcome(mode, "judge_error", value, "exception", str(value.get("error_message")), function,
                               elapsed, runner)
    return VerifierOutcome(mode, "incomplete", value, None, None, function, elapsed, runner)


CONFIRMED_ERRORS = ("exception", "memory")


def _confirm_in_own_sandbox(data: Any) -> bool:
    """Whether a host's answer is an error a sandbox of its own may not give: the child ended without an answer
    (``crashed``: a library that aborts without threads, memory pressure from a sibling) or the verifier raised
    (it wrote a file, a WAL database could not be opened read-only, a thread it started) or hit its memory limit
    (the host's child starts with more mapped). Those verifications run again in a sandbox of their own, so a
    verdict is never an error only because it ran in a host; what the verifier itself decides (a result, a syntax
    error, no function, a timeout) stands."""
    if not isinstance(data, dict):
        return True
    return data.get("status") == "error" and data.get("error_kind") in CONFIRMED_ERRORS


def _run_in_own_sandbox(request: dict[str, Any], initial_db: Path | str, final_db: Path | str, timeout: float,
                        memory_mb: int) -> Any:
    """The verifier's result (what it gave, unchecked) from a sandbox of its own, or (error kind, error)."""
    work = private_dir("awm_verify_")
    # its quota, as a worker's (a tmpfs where the host can mount one; else the sandbox's file-size limit only)
    quota = limits.mount_quota(work, limits.DISK_MB, *sandbox_ids())
    try:
        try:
            for src, name in ((initial_db, "initial.db"), (final_db, "final.db")):
                safe_fs.copy_out(Path(src), work / name)  # refuses a symlink, hard link or special file
                (work / name).chmod(0o444)
        except safe_fs.UnsafeEntry as exc:
            return "db_missing", f"database refused: {exc}"
        except OSError as exc:  # e.g. larger than the quota
            return "db_missing", f"database could not be copied for the verifier: {exc}"
        file = work / "request.json"
        file.write_text(json.dumps({**request, "initial_db": str(work / "initial.db"),
                                    "final_db": str(work / "final.db")}))
        file.chmod(0o444)
        status, code, tail = _spawn(work, timeout, memory_mb + 512 if memory_mb else None, max(1, int(timeout) + 1))
        if status == "timeout":
            return "timeout", f"verifier timed out after {timeout:.0f}s"
        try:
            raw = safe_fs.read_file(work, "result.json", RESULT_LIMIT + 1)
        except FileNotFoundError:
            kind = "memory" if "MemoryError" in tail else "crashed"
            return kind, f"verifier process exited with {code}: {tail}"
        except OSError as exc:
            return "bad_return", f"the verifier's result could not be read: {exc}"
        if len(raw) > RESULT_LIMIT:
            return "bad_return", f"the verifier's result is over {RESULT_LIMIT} bytes"
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:  # the verifier may write this file itself: anything at all
            return "bad_return", f"the verifier's result is not JSON: {type(exc).__name__}"
    finally:
        if quota:
            limits.unmount_quota(work)
        remove_dir(work)


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
    profile: str = DEFAULT_PROFILE  # the verification profile: reference | robust (verify.judge.PROFILES)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def final_answer_of(trajectory: dict[str, Any]) -> str:
    """The content of the last assistant message (the reference's ``final_answer``)."""
    messages = trajectory.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _reference_record(report: VerifyReport, outcome: VerifierOutcome, mode: str) -> dict[str, Any]:
    record = {"scenario": report.scenario, "task_id": report.task_id, "task": report.task, "mode": mode,
              "reward_type": outcome.label, "verify_result": outcome.result}
    if mode == "sql" and report.judge is not None and outcome.label != "judge_error":
        record["llm_judge"] = {"classification": report.judge["classification"],
                               "judge_result": report.judge["judge_result"]}
    return record


def _open_run(run_dir: Path, catalog: Catalog | None) -> tuple[dict[str, Any], Catalog, Scenario, int]:
    """trajectory.json, the catalog (the run's own data directories when none is given), the scenario, the task."""
    trajectory = TRAJECTORY.read(run_dir / TRAJECTORY.file)
    if not isinstance(trajectory, dict) or trajectory.get("scenario") is None or trajectory.get("task_id") is None:
        raise ValueError(f"{run_dir}/trajectory.json has no scenario or task_id: cannot pick a verifier")
    try:
        task_id = int(trajectory["task_id"])
    except (TypeError, ValueError):
        raise ValueError(f"{run_dir}/trajectory.json: task_id {trajectory['task_id']!r} is not a number") from None
    if catalog is None:
        awm = trajectory.get("awm") if isinstance(trajectory.get("awm"), dict) else {}
        dirs = awm.get("data_dirs")
        catalog = Catalog.load([str(d) for d in dirs] if isinstance(dirs, list) and dirs else None)
    return trajectory, catalog, catalog.get(str(trajectory["scenario"])), task_id


NO_JUDGE = "no judge endpoint configured: the label comes from the code-mode verifier"
NO_SQL_VERIFIER = ("this task has no sql-mode verifier (verify_task): the label comes from the code-mode verifier; "
                   "the judge is not asked")


async def verify_run(run_dir: Path | str, mode: str = "sql", catalog: Catalog | None = None,
                     judge: Endpoint | None = None, rewards: RewardConfig | None = None,
                     timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB,
                     profile: str = DEFAULT_PROFILE) -> VerifyReport:
    """Verify a run directory (trajectory.json, initial.db, final.db) and write verify files into it.

    ``code``: the task's code-mode verifier decides. ``sql``: its sql-mode verifier and the judge; with no judge,
    or no sql-mode verifier for the task, the code-mode verifier decides (and ``note`` says so). Verifiers are
    picked by the mode their code defines, whichever file they are in. ``profile`` (reference | robust) is how
    the judge is asked and read (``verify.judge``)."""
    check_profile(profile)
    if mode not in VERIFIER_MODES:
        raise ValueError(f"unknown verification mode {mode!r} (choose from {', '.join(VERIFIER_MODES)})")
    run_dir = Path(run_dir)
    rewards = rewards or RewardConfig()
    trajectory, catalog, scenario, task_id = _open_run(run_dir, catalog)
    awm = trajectory.get("awm") if isinstance(trajectory.get("awm"), dict) else {}
    stop_reason = awm.get("stop_reason")
    answer = final_answer_of(trajectory)
    initial, final = run_dir / "initial.db", run_dir / "final.db"
    task = trajectory.get("task") if isinstance(trajectory.get("task"), str) else ""
    report = VerifyReport(scenario.key, task_id, task, mode, "judge_error", 0.0, False, stop_reason,
                          rewards=rewards.to_dict(), profile=profile)
    sql_verifier = scenario.verifier(task_id, "sql") if mode == "sql" else None
    # a verifier that does not compile counts as missing (the catalog's verifier_has_code), and is named in the note
    compile_errors = getattr(scenario, "verifier_errors", {})
    sql_usable = sql_verifier is not None and sql_verifier.has_code and not compile_errors.get("sql", {}).get(task_id)
    use_judge = judge is not None and sql_usable
    if mode == "code" or not use_judge:
        if mode == "sql":
            if judge is None and sql_verifier is not None:
                report.sql = await _in_verifier_thread(run_verifier, sql_verifier, initial, final, answer, timeout,
                                                     memory_mb, "sql", scenario.key)
            report.note = NO_JUDGE if judge is None else NO_SQL_VERIFIER
        report.code = await _in_verifier_thread(run_verifier, scenario.verifier(task_id, "code"), initial, final,
                                              answer, timeout, memory_mb, "code", scenario.key)
        report.label = report.code.label
        if report.code.error_kind == "no_code":
            has_sql = bool(scenario.verifier_has_code["sql"].get(task_id))
            report.note = ("no code-mode verifier for this task: no verdict"
                           + ("; it has an sql-mode verifier: configure a judge and verify in sql mode"
                              if has_sql and judge is None else ""))
    else:
        report.sql = await _in_verifier_thread(run_verifier, sql_verifier, initial, final, answer, timeout, memory_mb,
                                             "sql", scenario.key)
        if report.sql.label == "judge_error":
            report.label = "judge_error"
        else:
            verdict = await run_judge(judge, report.task, trajectory.get("trajectory"), report.sql.result,
                                      sql_verifier.meta, profile=profile)
            report.judge = verdict.to_dict()
            report.label = verdict.classification
    broken = [f"the {m}-mode verifier does not compile ({error})" for m in VERIFIER_MODES
              if (m == mode or mode == "sql") and (error := compile_errors.get(m, {}).get(task_id))]
    if broken:
        report.note = "; ".join(([report.note] if report.note else []) + broken)
    report.has_verdict = report.label != "judge_error"
    report.reward = rewards.reward(report.label, stop_reason)
    outcome = report.sql if (mode == "sql" and use_judge) else report.code
    if outcome is not None:
        (run_dir / f"verify.{outcome.mode}.json").write_text(
            dumps_text(_reference_record(report, outcome, outcome.mode), indent=4, default=str), encoding="utf-8")
    _write_report(run_dir, report)
    return report


def _write_report(run_dir: Path, report: VerifyReport) -> None:
    (run_dir / "verify.json").write_text(dumps_text(report.to_dict(), indent=2, default=str), encoding="utf-8")


async def verify_both(run_dir: Path | str, catalog: Catalog | None = None, judge: Endpoint | None = None,
                      rewards: RewardConfig | None = None, profile: str = DEFAULT_PROFILE) -> VerifyReport:
    """Code mode always, and sql mode with the judge when one is configured and the task has an sql-mode
    verifier, merged into one report (the judge's label decides; the code verifier's outcome is kept beside it)
    written to ``verify.json``."""
    run_dir = Path(run_dir)
    _, catalog, scenario, task_id = _open_run(run_dir, catalog)
    report = await verify_run(run_dir, "code", catalog, None, rewards, profile=profile)
    if judge is None:
        return report
    if not scenario.verifier_has_code["sql"].get(task_id):
        report.note = report.note or NO_SQL_VERIFIER
        _write_report(run_dir, report)
        return report
    code_outcome = report.code
    report = await verify_run(run_dir, "sql", catalog, judge, rewards, profile=profile)
    report.code = code_outcome
    _write_report(run_dir, report)
    return report
