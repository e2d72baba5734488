"""Finding run directories: evaluation runs (``config.json`` + results) and rollout runs (``trajectory.json``).

One set of walk rules for the CLI (``awm eval list``) and the TUI (the evaluation dashboard, the
palette's recent runs): a run directory is a directory holding its marker file; evaluation runs are
looked for directly under the root or one level down (never inside a run's ``rollouts/``), rollout
runs anywhere below ``agents/``, ``play/`` and ``eval/`` of the outputs directory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from awm_engine.data.run_formats import CONFIG, METADATA, RESULTS, TRAJECTORY, EvalConfig

ROLLOUT_ROOTS = ("agents", "play", "eval")  # where the CLI, the TUI and evaluations write rollout runs


class NotAnEvalRun(ValueError):
    def __init__(self, run_dir: Path | str, why: str = "no config.json"):
        super().__init__(f"{run_dir} is not an evaluation run ({why})")


def _holding(markers: list[Path]) -> list[Path]:
    return [m.parent for m in sorted(markers)]


def _newest_first(runs: list[Path]) -> list[Path]:
    return sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True)


def is_eval_run(path: Path) -> bool:
    return (path / CONFIG.file).is_file() and ((path / RESULTS.file).exists() or (path / METADATA.file).exists())


def find_eval_runs(root: Path | str, newest_first: bool = False) -> list[Path]:
    """Evaluation runs directly under ``root`` or one level down, by path (or newest first)."""
    root = Path(root)
    runs = [p for p in _holding([*root.glob(f"*/{CONFIG.file}"), *root.glob(f"*/*/{CONFIG.file}")]) if is_eval_run(p)]
    return _newest_first(runs) if newest_first else runs


def find_rollout_runs(root: Path | str, limit: int | None = 50) -> list[Path]:
    """Rollout run directories (agent runs, play sessions, evaluation rollouts) under ``root``, newest first."""
    root = Path(root)
    runs = _newest_first(_holding([p for sub in ROLLOUT_ROOTS for p in (root / sub).glob(f"**/{TRAJECTORY.file}")]))
    return runs if limit is None else runs[:limit]


def load_eval_config(run_dir: Path | str) -> EvalConfig:
    """The run's configuration (``NotAnEvalRun`` without one; ``NewerFormatError`` from a newer awm)."""
    if not (Path(run_dir) / CONFIG.file).is_file():
        raise NotAnEvalRun(run_dir)
    benchmark = CONFIG.read(Path(run_dir) / CONFIG.file).get("benchmark")
    if benchmark:  # a benchmark's run (awm bench bfcl …): its own report
        raise NotAnEvalRun(run_dir, f"a {benchmark} run: see awm bench {benchmark} report {run_dir}")
    return EvalConfig.load(run_dir)


def read_metadata(run_dir: Path | str) -> dict[str, Any] | None:
    """The run's ``metadata.json`` (version-checked), or None when it has none yet."""
    path = Path(run_dir) / METADATA.file
    return METADATA.read(path) if path.is_file() else None


def benchmark_run_summary(run_dir: Path | str) -> dict[str, Any] | None:
    """One line about a benchmark's run (``config.json`` names a ``benchmark``: ``awm bench …``); None otherwise."""
    data = CONFIG.read(Path(run_dir) / CONFIG.file)
    if not isinstance(data, dict) or not data.get("benchmark"):
        return None
    meta = read_metadata(run_dir) or {}
    return {"run_dir": str(run_dir), "model": (data.get("endpoint") or {}).get("model") or data.get("policy") or "?",
            "k": data.get("k", 1), "created": data.get("created"),
            "rollouts": meta.get("results", meta.get("rollouts", 0)), "running": meta.get("running"),
            "mean_reward": _mean_reward(meta),  # τ² runs have awm's aggregates
            "benchmark": data["benchmark"]}


def _mean_reward(meta: Any) -> float | None:
    overall = meta.get("overall") if isinstance(meta, dict) else None
    value = overall.get("mean_reward") if isinstance(overall, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_summary(run_dir: Path | str) -> dict[str, Any]:
    """One line about an evaluation run: what ``awm eval list`` prints and the dashboard lists."""
    benchmark = benchmark_run_summary(run_dir)
    if benchmark is not None:  # a benchmark's run among the evaluations (awm bench bfcl | mcp-universe …)
        return benchmark
    config = load_eval_config(run_dir)
    meta = read_metadata(run_dir) or {}
    return {"run_dir": str(run_dir), "model": config.model, "k": config.k, "created": config.created,
            "rollouts": meta.get("rollouts", 0), "running": meta.get("running"),
            "mean_reward": (meta.get("overall") or {}).get("mean_reward")}


def list_eval_runs(root: Path | str) -> list[dict[str, Any]]:
    return [run_summary(run) for run in find_eval_runs(root)]
