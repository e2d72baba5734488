"""Verification throughput: verifier hosts against a sandbox per verifier (the baseline design), in one run.

    .venv/bin/python benchmarks/verify_hosts.py [--rounds 3] [--concurrency 8]

The workload is every code- and sql-mode verifier of the first three tasks of each sample environment (30
verifications), on the scenario's initial database, run ``--concurrency`` at a time (as a batch evaluation
verifies its rollouts). Each round runs both designs in turn (the order alternates): the baseline with
``AWM_VERIFIER_HOST=0`` — a bubblewrap sandbox and a Python per verifier, as before —, then verifier hosts (one
sandbox per scenario, a fresh forked process per verifier; the hosts' start is counted, as the first verification
of each scenario pays it). Printed: wall time per design and round, the median per-verification wall time, and
the ratio host/baseline; the verdicts of the two designs are compared and any difference is reported.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.db.templates import TemplateCache  # noqa: E402
from awm_engine.verify import shared_host  # noqa: E402
from awm_engine.verify.verification import run_verifier  # noqa: E402


def workload(cache: Path) -> list[tuple]:
    catalog = Catalog.load()
    jobs = []
    for key in list(catalog.scenarios):
        scenario = catalog.get(key)
        template, _ = TemplateCache(cache).get(scenario)
        for task in range(min(3, len(scenario.tasks))):
            for mode in ("code", "sql"):
                verifier = scenario.verifier(task, mode)
                if verifier is not None:
                    jobs.append((key, task, mode, verifier, template))
    return jobs


def run_all(jobs: list[tuple], concurrency: int, hosts: bool) -> tuple[float, dict, list[float]]:
    os.environ[shared_host.ENV_SWITCH] = "1" if hosts else "0"
    shared_host.close_all()
    times: list[float] = []

    def one(job):
        key, task, mode, verifier, template = job
        start = time.perf_counter()
        outcome = run_verifier(verifier, template, template, "done", mode=mode, scenario=key)
        times.append(time.perf_counter() - start)
        expected = "host" if hosts else "sandbox"
        if outcome.runner != expected:
            raise SystemExit(f"{key}/{task}/{mode} ran in a {outcome.runner}, not a {expected}")
        return (key, task, mode), (outcome.label, outcome.result, outcome.error_kind)

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        verdicts = dict(pool.map(one, jobs))
    wall = time.perf_counter() - start
    shared_host.close_all()
    return wall, verdicts, times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    usable, why = shared_host.usable()
    if not usable:
        print(f"verifier hosts are not usable here: {why}")
        return 1
    jobs = workload(Path(tempfile.mkdtemp(prefix="awm-bench-")))
    print(f"{len(jobs)} verifications, {args.concurrency} at a time, {args.rounds} rounds, interleaved")
    walls = {"baseline": [], "hosts": []}
    per = {"baseline": [], "hosts": []}
    differ = 0
    for r in range(args.rounds):
        order = [False, True] if r % 2 == 0 else [True, False]
        verdicts = {}
        for hosts in order:
            name = "hosts" if hosts else "baseline"
            wall, verdicts[name], times = run_all(jobs, args.concurrency, hosts)
            walls[name].append(wall)
            per[name].extend(times)
            print(f"  round {r + 1} {name:8}: {wall:6.2f} s  ({len(jobs) / wall:6.1f} verifications/s)")
        differ += sum(verdicts["hosts"][k] != verdicts["baseline"][k] for k in verdicts["baseline"])
    print()
    print(f"{'':10} {'wall (median)':>14} {'per verification (median)':>27}")
    for name in ("baseline", "hosts"):
        print(f"{name:10} {statistics.median(walls[name]):12.2f} s {statistics.median(per[name]) * 1000:24.1f} ms")
    print(f"{'hosts/base':10} {statistics.median(walls['hosts']) / statistics.median(walls['baseline']):14.2f} "
          f"{statistics.median(per['hosts']) / statistics.median(per['baseline']):27.2f}")
    print(f"verdicts that differ between the designs: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
