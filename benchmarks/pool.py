"""Many concurrent isolated episodes on one machine, with the sandbox on (the RL step's workload).

    .venv/bin/python benchmarks/pool.py [--episodes 1024] [--workers 2] [--calls 10] [--naive 8]

Each episode opens (its own copy of the database), makes ``--calls`` tool calls — the first a write that adds
a row carrying the episode's id, the rest reads — and checks that it sees its own write and no other
episode's. Scenarios: every sample environment (and, with ../shared, the real AWM ones), so at least 8.
Printed: peak total RSS of the awm process and every worker (sandboxes included); the cold start kept apart
from steady-state opens — the first load of each scenario's module on each worker (``EnvPool.warm``, before
any episode), then episode-open latency p50/p99 with modules loaded: one at a time, 64 at once, and handed
out from a prefetched batch (the RL step's case, the figure the target applies to); sustained tool calls
per second, failures (calls that errored), cross-episode leaks, calls that changed the database while
reported as failures, and how episodes spread over workers; then the naive design — one server subprocess
per episode, as the reference runs it, so every open is a cold start — measured in the same run on
``--naive`` episodes, with ratios and the extrapolation to the full count labelled as such.

A reduced run (e.g. ``--episodes 128 --naive 2``) checks that it works in under a minute.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.data.paths import sample_envs_dir  # noqa: E402
from awm_engine.db.diff import diff_databases  # noqa: E402
from awm_engine.db.templates import TemplateCache  # noqa: E402
from awm_engine.runtime.mcp_client import McpEpisode  # noqa: E402
from awm_engine.runtime.pool import EnvPool  # noqa: E402
from awm_engine.sandbox import host  # noqa: E402


def rss_total_mb(root_pid: int) -> float:
    """Resident memory of ``root_pid`` and all its descendants (sandboxes, workers, reapers)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            children.setdefault(int(fields[1]), []).append(pid)
            rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 2**20


def candidate_writes(scenario):
    """Write calls to try: those of the reference solutions, then POSTs whose required parameters are strings."""
    for i in range(len(scenario.tasks)):
        solution = scenario.solution(i) or {}
        for call in solution.get("calls") or []:
            if not str(call.get("tool", "")).startswith(("list_", "get_", "search_")):
                yield call["tool"], call.get("arguments") or {}
    placeholders = {"str": "awm-bench", "int": 1, "float": 1.0, "bool": True, "list": [], "dict": {}}
    for tool in scenario.tools():
        required = [p for p in tool.params if p.required]
        if tool.method in ("POST", "PUT", "PATCH"):
            yield tool.name, {p.name: placeholders.get(str(p.type).split("[")[0], "awm-bench") for p in required}


def read_call(scenario) -> str | None:
    for tool in scenario.tools():
        if tool.method == "GET" and not any(p.required for p in tool.params):
            return tool.name
    return None


def signature_of(run_dir: Path) -> tuple:
    """What an episode changed (its databases, once closed): per table, rows inserted, deleted, updated."""
    diff = diff_databases(run_dir / "initial.db", run_dir / "final.db")
    return tuple(sorted((t.table, len(t.inserted), len(t.deleted), len(t.updated)) for t in diff.tables))


async def choose_write(pool: EnvPool, scenario):
    """The first candidate write that succeeds alone, with what it changes (the baseline every episode of the
    benchmark must reproduce exactly: more is another episode's write leaking in, less is a lost write)."""
    import tempfile

    for name, args in candidate_writes(scenario):
        with tempfile.TemporaryDirectory() as tmp:
            episode = await pool.open_episode(scenario, run_dir=Path(tmp))
            result = await episode.call_tool(name, args)
            await episode.close()
            if not result.is_error and (sig := signature_of(Path(tmp))):
                return name, args, sig
    return None


async def run_pool(scenarios, episodes: int, workers: int, calls: int, executor: str, address: str | None) -> dict:
    """Phase 1: prefetch every episode (what an RL loop does for its next batch while the current one runs);
    phase 2: hand them out — the open latency an agent sees; phase 3: every episode makes its calls at once
    (calls per second); phase 4: check each episode's changes, close. A cold burst of opens without prefetch
    is measured too."""
    stats = {"open": [], "warm_open": [], "burst_open": [], "cold_load": [], "cold_wall": {}, "calls": 0,
             "failures": 0, "failed_but_changed": 0, "leaks": 0, "placement": {}}
    peak = 0.0
    if executor == "ray":
        from awm_engine.runtime.ray_pool import RayEnvPool

        pool_cm = RayEnvPool([str(d) for d in {s.data_dir for s in scenarios}], actors=workers)
    else:
        # templates of this run's own (built in the cold start): an older template in the user's cache could be
        # due for its background refresh in the middle of the measurement
        pool_cm = EnvPool(workers=workers, templates=TemplateCache(tempfile.mkdtemp(prefix="awm_bench_templates_")))
    async with pool_cm as pool:
        for s in scenarios:  # cold start: each scenario's module loaded on every worker (template built first)
            started = time.perf_counter()
            try:
                per_worker = await pool.warm(s)
            except Exception:  # noqa: BLE001 - a scenario that does not load is left out below
                continue
            stats["cold_wall"][s.key] = time.perf_counter() - started
            stats["cold_load"] += list(per_worker.values())
        plans = {}
        for s in scenarios:  # each scenario loaded, its write chosen and measured alone, before the clock starts
            chosen = await choose_write(pool, s)
            if chosen is not None:
                plans[s.key] = (*chosen, read_call(s))
        scenarios = [s for s in scenarios if s.key in plans]
        stats["scenarios"] = [s.key for s in scenarios]
        done = asyncio.Event()

        async def sample_rss():
            nonlocal peak
            while not done.is_set():
                # off the event loop: walking /proc takes milliseconds and would show up as open latency
                peak = max(peak, await asyncio.to_thread(rss_total_mb, os.getpid()))
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample_rss())

        assigned = [scenarios[i % len(scenarios)] for i in range(episodes)]
        # steady state without prefetch (modules loaded): 64 opens one at a time, then 64 at once
        warm = []
        for s in assigned[:64]:
            t = time.perf_counter()
            warm.append(await pool.open_episode(s))
            stats["warm_open"].append(time.perf_counter() - t)


        async def burst_open(s):
            t = time.perf_counter()
            e = await pool.open_episode(s)
            stats["burst_open"].append(time.perf_counter() - t)
            warm.append(e)

        await asyncio.gather(*(burst_open(s) for s in assigned[:64]))
        await asyncio.gather(*(e.close() for e in warm))
        if hasattr(pool, "prefetch"):
            started = time.perf_counter()
            for s in scenarios:
                await pool.prefetch(s, sum(1 for a in assigned if a is s))
            stats["prefetch_s"] = time.perf_counter() - started
        opened = []
        for s in assigned:
            t = time.perf_counter()
            opened.append(await pool.open_episode(s))
            stats["open"].append(time.perf_counter() - t)
        for e in opened:
            index = getattr(getattr(e, "worker", None), "index", getattr(e, "actor_index", 0))
            stats["placement"][index] = stats["placement"].get(index, 0) + 1

        async def act(episode, plan):
            name, args, baseline, reader = plan
            result = await episode.call_tool(name, args)
            stats["calls"] += 1
            stats["failures"] += result.is_error
            for _ in range(calls - 1):
                r = await episode.call_tool(reader, {})
                stats["calls"] += 1
                stats["failures"] += r.is_error
            return result

        started = time.perf_counter()
        results = await asyncio.gather(*(act(e, plans[e.scenario.key]) for e in opened), return_exceptions=True)
        stats["call_wall"] = time.perf_counter() - started
        stats["episode_errors"] = sum(isinstance(r, BaseException) for r in results)
        stats["errors"] = [repr(r) for r in results if isinstance(r, BaseException)][:5]
        done.set()
        await sampler

        async def check(episode, result):
            baseline = plans[episode.scenario.key][2]
            await episode.close()
            sig = await asyncio.to_thread(signature_of, episode.run_dir)
            if isinstance(result, BaseException):
                return
            if result.is_error and sig:
                stats["failed_but_changed"] += 1
            elif not result.is_error and sig != baseline:
                stats["leaks"] += 1

        for i in range(0, len(opened), 64):
            await asyncio.gather(*(check(e, r) for e, r in zip(opened[i:i + 64], results[i:i + 64])))
    stats.update(peak_rss_mb=peak)
    return stats


async def run_naive(scenario, plan, episodes: int, calls: int, work: Path) -> dict:
    """One `awm env serve` subprocess per episode (the reference's design), a persistent MCP session each."""
    opens, ncalls = [], 0
    started = time.perf_counter()
    peak = 0.0
    for i in range(episodes):
        t = time.perf_counter()
        episode = await McpEpisode.start(scenario.key, work / f"naive{i}")
        opens.append(time.perf_counter() - t)
        peak = max(peak, rss_total_mb(episode.server.proc.pid))  # the episode's own server process tree
        try:
            name, args, _baseline, reader = plan
            await episode.call_tool(name, args)
            ncalls += 1
            for _ in range(calls - 1):
                await episode.call_tool(reader, {})
                ncalls += 1
        finally:
            await episode.close()
    return {"open": opens, "calls": ncalls, "wall": time.perf_counter() - started, "peak_rss_mb": peak}


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--executor", choices=["local", "ray"], default="local")
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--naive", type=int, default=8, help="episodes through the naive design (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dirs = [sample_envs_dir()]
    real = ROOT.parent / "shared" / "data" / "awm-real"
    if (real / "gen_envs.jsonl").is_file():
        dirs.append(real)
    catalog = Catalog.load(dirs)
    scenarios = [s for s in catalog if read_call(s)]
    protections = host.protections()
    pool_stats = asyncio.run(run_pool(scenarios, args.episodes, args.workers, args.calls, args.executor,
                                      args.ray_address))
    naive = None
    if args.naive:
        import tempfile

        first = catalog.get(pool_stats["scenarios"][0])

        async def naive_run(tmp):
            async with EnvPool(workers=1) as probe:
                plan = (*await choose_write(probe, first), read_call(first))
            return await run_naive(first, plan, args.naive, args.calls, Path(tmp))

        with tempfile.TemporaryDirectory() as tmp:
            naive = asyncio.run(naive_run(tmp))
    rate = pool_stats["calls"] / pool_stats["call_wall"]
    report = {
        "episodes": args.episodes, "scenarios": pool_stats["scenarios"], "workers": args.workers,
        "sandbox": {k: v for k, v in protections.to_dict().items() if k != "off"}, "sandbox_off": protections.off,
        "executor": args.executor,
        "peak_rss_mb (all processes)": round(pool_stats["peak_rss_mb"], 1),
        "prefetch_s (opening the whole batch ahead)": round(pool_stats.get("prefetch_s", float("nan")), 2),
        "cold_load_ms per worker and scenario (first module load, p50/p99/max)":
            [round(pct(pool_stats["cold_load"], q), 1) for q in (0.5, 0.99, 1.0)],
        "cold_loads (workers x scenarios)": len(pool_stats["cold_load"]),
        "cold_start_s per scenario (template + load on every worker, p50/max)":
            [round(pct(list(pool_stats["cold_wall"].values()), q) / 1000, 2) for q in (0.5, 1.0)],
        "open_p50_ms (prefetched)": round(pct(pool_stats["open"], 0.5), 3),
        "open_p99_ms (prefetched)": round(pct(pool_stats["open"], 0.99), 3),
        "warm_open_p50_ms (one at a time, no prefetch)": round(pct(pool_stats["warm_open"], 0.5), 1),
        "warm_open_p99_ms (one at a time, no prefetch)": round(pct(pool_stats["warm_open"], 0.99), 1),
        "warm_burst_open_p50_ms (64 at once, no prefetch)": round(pct(pool_stats["burst_open"], 0.5), 1),
        "warm_burst_open_p99_ms (64 at once, no prefetch)": round(pct(pool_stats["burst_open"], 0.99), 1),
        "calls": pool_stats["calls"], "calls_per_s (all episodes calling at once)": round(rate, 1),
        "call_phase_s": round(pool_stats["call_wall"], 2), "failures": pool_stats["failures"],
        "episode_errors": pool_stats["episode_errors"], "errors": pool_stats["errors"],
        "cross_episode_leaks_or_lost_writes": pool_stats["leaks"],
        "failed_but_changed": pool_stats["failed_but_changed"], "placement": pool_stats["placement"],
    }
    if naive:
        naive_rate = naive["calls"] / naive["wall"]
        report["naive"] = {"episodes": args.naive,
                           "open_p50_ms (a server started per episode: every open is a cold start)":
                               round(pct(naive["open"], 0.5), 1),
                           "calls_per_s": round(naive_rate, 2), "peak_rss_mb": round(naive["peak_rss_mb"], 1),
                           "extrapolated_rss_mb_for_all_episodes (one server each, not measured)":
                               round(naive["peak_rss_mb"] * args.episodes, 0),
                           "extrapolated_wall_s_for_all_episodes (sequential, not measured)":
                               round(naive["wall"] / args.naive * args.episodes, 0)}
        report["ratios"] = {"open_p50 naive/pool (prefetched)":
                            round(pct(naive["open"], 0.5) / pct(pool_stats["open"], 0.5), 0),
                            "open_p50 naive/pool (warm, one at a time)":
                            round(pct(naive["open"], 0.5) / pct(pool_stats["warm_open"], 0.5), 1),
                            "open_p50 naive/pool (warm, 64 at once)":
                            round(pct(naive["open"], 0.5) / pct(pool_stats["burst_open"], 0.5), 1),
                            "cold start naive open / pool first load per worker (p50)":
                            round(pct(naive["open"], 0.5) / pct(pool_stats["cold_load"], 0.5), 1),
                            "peak_rss naive extrapolated to all episodes (not measured) / pool":
                            round(naive["peak_rss_mb"] * args.episodes / pool_stats["peak_rss_mb"], 1),
                            "calls_per_s pool/naive": round(rate / naive_rate, 1)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
