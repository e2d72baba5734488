"""τ²-bench's metrics (spec §6), per domain, from simulation records (``reward``, ``task_id``, ``status``,
``has_verdict``, ``termination_reason`` / ``stop_reason``, ``db_match``).

- Simulations that errored (τ²'s ``INFRASTRUCTURE_ERROR``) are left out first and counted; so are those without a
  verdict (an NL component with no judge).
- success ⇔ |reward − 1| ≤ 1e-6; ``avg_reward`` is the mean reward over what remains.
- pass^k (τ-bench): per task with n trials and c successes C(c, k)/C(n, k), averaged over tasks, for k = 1 … the
  smallest n over tasks (a note when tasks have different n).
- pass@k (Chen et al.): per task 1 − C(n−c, k)/C(n, k), averaged over tasks; τ² never computes it, the AWM paper's
  "Pass@k" may mean it — ``paper_columns`` gives both readings.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from math import comb
from typing import Any, Iterable

SUCCESS_TOLERANCE = 1e-6
PASS_THRESHOLD = 1.0 - SUCCESS_TOLERANCE  # for awm's generic summaries: a sample passes at reward >= this


def is_success(reward: Any) -> bool:
    return isinstance(reward, (int, float)) and abs(float(reward) - 1.0) <= SUCCESS_TOLERANCE


def pass_hat_k(n: int, c: int, k: int) -> float:
    return comb(c, k) / comb(n, k) if n >= k else 0.0


def pass_at_k(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def domain_metrics(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The metrics of one domain's simulations."""
    records = list(records)
    errored = [r for r in records if r.get("status") == "error"]
    unscored = [r for r in records if r.get("status") != "error" and r.get("reward") is None]
    scored = [r for r in records if r.get("status") != "error" and r.get("reward") is not None]
    by_task: dict[str, list[bool]] = defaultdict(list)
    for r in scored:
        by_task[str(r.get("task_id"))].append(is_success(r.get("reward")))
    counts = sorted({len(v) for v in by_task.values()})
    k_max = counts[0] if counts else 0
    pass_hat = {str(k): sum(pass_hat_k(len(v), sum(v), k) for v in by_task.values()) / len(by_task)
                for k in range(1, k_max + 1)} if by_task else {}
    pass_at = {str(k): sum(pass_at_k(len(v), sum(v), k) for v in by_task.values()) / len(by_task)
               for k in range(1, k_max + 1)} if by_task else {}
    rewards = [float(r["reward"]) for r in scored]
    reasons = Counter(str(r.get("termination_reason") or r.get("stop_reason")) for r in records)
    db = [r.get("db_match") for r in scored if isinstance(r.get("db_match"), bool)]
    notes = []
    if len(counts) > 1:
        notes.append(f"tasks have different numbers of trials ({', '.join(map(str, counts))}): pass^k and pass@k "
                     f"go up to k = {k_max}")
    return {"simulations": len(records), "scored": len(scored), "errored": len(errored), "no_verdict": len(unscored),
            "tasks": len(by_task), "trials": k_max,
            "avg_reward": sum(rewards) / len(rewards) if rewards else None,
            "successes": sum(1 for r in scored if is_success(r.get("reward"))),
            "pass_hat_k": pass_hat, "pass_at_k": pass_at,
            "db_match_rate": sum(db) / len(db) if db else None,
            "termination_reasons": dict(sorted(reasons.items())), "notes": notes}


def metrics_by_domain(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        grouped[str(r.get("domain") or r.get("scenario") or "?")].append(r)
    return {domain: domain_metrics(rs) for domain, rs in sorted(grouped.items())}


def paper_columns(metrics: dict[str, Any], k: int = 4) -> dict[str, Any]:
    """The AWM paper's per-domain columns: Pass@1 (= τ²'s pass^1 = avg_reward when every task has the same number
    of trials) and Pass@k under both readings — τ²'s pass^k ("all k succeed") and Chen's pass@k ("any of k")."""
    k = min(k, metrics.get("trials") or 0) or None
    return {"pass@1": (metrics.get("pass_hat_k") or {}).get("1"),
            f"pass^{k}": (metrics.get("pass_hat_k") or {}).get(str(k)) if k else None,
            f"pass@{k}": (metrics.get("pass_at_k") or {}).get(str(k)) if k else None, "k": k}
