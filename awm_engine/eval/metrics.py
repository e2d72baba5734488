"""Aggregates of an evaluation: mean reward, completion, pass@k and pass^k, and an error taxonomy.

pass@k uses the unbiased estimator 1 - C(n-c, k)/C(n, k) and pass^k the τ-bench estimator
C(c, k)/C(n, k), averaged over tasks, for k = 1, 2, 4, … ≤ n (tasks with fewer than k scored samples
are left out of that k). A sample succeeds when its reward is at least ``threshold`` (default 0.5,
i.e. a ``complete`` label with the default rewards).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from math import comb
from typing import Any, Iterable

from awm_engine.data.error_text import error_title

ERROR_CLASSES = ("agent_error", "environment_error", "judge_error", "format_error", "timeout", "llm_error",
                 "internal_error")


def pass_at_k(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    return comb(c, k) / comb(n, k) if c >= k else 0.0


def powers_of_two(n: int) -> list[int]:
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    return ks


def error_class(r: dict[str, Any]) -> str | None:
    """Why a rollout did not complete (None when it did)."""
    if r.get("status") == "error":
        return r.get("error_kind") if r.get("error_kind") in ERROR_CLASSES else "environment_error"
    stop, label = r.get("stop_reason"), r.get("label")
    if stop == "timeout":
        return "timeout"
    if stop == "format_error":
        return "format_error"
    if stop == "llm_error":
        return "llm_error"
    if stop == "environment_error" or label == "server_error":
        return "environment_error"
    if label == "complete":
        return None
    if label == "judge_error":
        return "judge_error"
    return "agent_error"


def failure_summary(r: dict[str, Any]) -> str:
    """Why a rollout did not complete, with its cause's first line: ``environment_error · create_vehicle:
    IntegrityError: UNIQUE constraint failed: …`` (the first environment error), or the error of an errored
    rollout; '' when it completed."""
    cause = error_class(r)
    if cause is None:
        return ""
    detail = r.get("env_error") or (error_title(r.get("error")) if r.get("status") == "error" else "")
    return f"{cause} · {detail}" if detail else cause


def summarize(records: Iterable[dict[str, Any]], threshold: float = 0.5) -> dict[str, Any]:
    """Overall and per-scenario aggregates of a list of rollout records (or summaries)."""
    records = list(records)
    by_scenario: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_scenario[r["scenario"]].append(r)
    return {"overall": _aggregate(records, threshold),
            "scenarios": {s: _aggregate(rs, threshold) for s, rs in sorted(by_scenario.items())},
            "threshold": threshold}


def _aggregate(records: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    scored = [r for r in records if r.get("status") == "ok" and r.get("has_verdict", True)]
    rewards = [float(r.get("reward") or 0.0) for r in scored]
    tasks: dict[tuple, list[bool]] = defaultdict(list)
    for r in scored:
        tasks[(r["scenario"], r["task_id"])].append(float(r.get("reward") or 0.0) >= threshold)
    n_max = max((len(v) for v in tasks.values()), default=0)
    pass_k, pass_hat = {}, {}
    for k in powers_of_two(n_max):
        eligible = [v for v in tasks.values() if len(v) >= k]
        if eligible:
            pass_k[str(k)] = sum(pass_at_k(len(v), sum(v), k) for v in eligible) / len(eligible)
            pass_hat[str(k)] = sum(pass_hat_k(len(v), sum(v), k) for v in eligible) / len(eligible)
    errors = Counter(c for c in (error_class(r) for r in records) if c)
    return {
        "rollouts": len(records), "scored": len(scored), "tasks": len(tasks),
        "errored": sum(1 for r in records if r.get("status") == "error"),
        "no_verdict": sum(1 for r in records if r.get("status") == "ok" and not r.get("has_verdict", True)),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "completion_rate": (sum(1 for r in scored if r.get("label") == "complete") / len(scored)) if scored else None,
        "pass_at_k": pass_k, "pass_hat_k": pass_hat,
        "errors": {c: errors.get(c, 0) for c in ERROR_CLASSES},
        "labels": dict(Counter(r.get("label") for r in scored)),
    }
