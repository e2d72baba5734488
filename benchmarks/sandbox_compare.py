"""The bubblewrap sandbox (one scenario per sandbox) side by side with the design it replaced, in one run.

    .venv/bin/python benchmarks/sandbox_compare.py [--episodes 1024] [--naive 0] [--baseline REV]

The baseline is the last commit before the redesign (``--baseline``, default ``9dd87e5``: shared worker processes
under ``unshare``, several scenarios per worker), checked out into a temporary git worktree and run with this same
interpreter; then today's ``benchmarks/pool.py`` runs on the same scenarios and episode count. Both print their
figures (JSON, kept under ``--out``), and the table gives each figure side by side with the ratio new/old.
Everything below measures the real thing: 1,024 concurrent episodes, each opening its own database, writing a row
with its own id and checking it sees that and nothing of the others'.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = [
    ("peak_rss_mb (all processes)", "peak RSS of awm and every sandbox, MB"),
    ("calls_per_s (all episodes calling at once)", "tool calls per second"),
    ("open_p99_ms (prefetched)", "open p99, prefetched (ms)"),
    ("warm_open_p50_ms (one at a time, no prefetch)", "warm open p50, one at a time (ms)"),
    ("warm_open_p99_ms (one at a time, no prefetch)", "warm open p99, one at a time (ms)"),
    ("warm_burst_open_p99_ms (64 at once, no prefetch)", "warm open p99, 64 at once (ms)"),
    ("cold_start_s per scenario (template + load on every worker, p50/max)", "cold start of a scenario (s, p50/max)"),
    ("failures", "failed calls"),
    ("episode_errors", "episode errors"),
    ("cross_episode_leaks_or_lost_writes", "cross-episode leaks or lost writes"),
]


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout[done.stdout.index("{"):])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--naive", type=int, default=0)
    parser.add_argument("--baseline", default="9dd87e5")
    parser.add_argument("--new-workers", type=int, default=1, help="sandboxes per scenario in the new design")
    parser.add_argument("--old-workers", type=int, default=2, help="shared worker processes in the old design")
    parser.add_argument("--out", default=None, help="directory for both JSON reports")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="awm_sandbox_compare_"))
    out.mkdir(parents=True, exist_ok=True)
    common = ["--episodes", str(args.episodes), "--calls", str(args.calls), "--naive", str(args.naive), "--json"]
    with tempfile.TemporaryDirectory(prefix="awm_baseline_") as tmp:
        worktree = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.baseline],
                       check=True, capture_output=True)
        try:
            shared = ROOT.parent / "shared"
            if shared.exists():
                os.symlink(shared, Path(tmp) / "shared")  # the baseline finds the same real scenarios
            env = {**os.environ, "PYTHONPATH": str(worktree)}
            print(f"baseline {args.baseline}: {args.episodes} episodes …", file=sys.stderr)
            old = run([sys.executable, str(worktree / "benchmarks" / "pool.py"), "--workers", str(args.old_workers),
                       *common], worktree, env)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)],
                           capture_output=True)
    print(f"this checkout: {args.episodes} episodes …", file=sys.stderr)
    new = run([sys.executable, str(ROOT / "benchmarks" / "pool.py"), "--workers", str(args.new_workers), *common],
              ROOT, {**os.environ, "PYTHONPATH": str(ROOT)})
    (out / "baseline.json").write_text(json.dumps(old, indent=2))
    (out / "new.json").write_text(json.dumps(new, indent=2))
    print(f"{args.episodes} concurrent episodes × {args.calls} calls, scenarios: {len(new['scenarios'])}")
    print(f"{'figure':44} {'before (' + args.baseline + ')':>22} {'bubblewrap, 1 scenario/sandbox':>32} {'new/old':>8}")
    for key, label in FIGURES:
        a, b = old.get(key), new.get(key)
        if isinstance(a, list):
            ratio = "/".join(f"{y / x:.2f}" if x else "–" for x, y in zip(a, b))
        else:
            ratio = f"{b / a:.2f}" if isinstance(a, (int, float)) and a else "–"
        print(f"{label:44} {str(a):>22} {str(b):>32} {ratio:>8}")
    on = [k for k, v in new["sandbox"].items() if v is True]
    print(f"protections on (new): {len(on)}: {', '.join(on)}")
    print(f"protections off (new): {new['sandbox_off'] or 'none'}; (old): {old['sandbox_off'] or 'none'}")
    print(f"reports: {out}")


if __name__ == "__main__":
    main()
