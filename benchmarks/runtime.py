"""Environment runtime latency: awm's fast path against MCP over HTTP and the naive design, in one run.

    .venv/bin/python benchmarks/runtime.py [--episodes N] [--calls N] [--naive N]

For a real AWM environment (../shared/data/awm-real, when present) and a sample environment, prints
the median latency of episode open (warm), reset, list_tools and call_tool for
  (a)  the in-process fast path (module loaded once, contextvar-routed sessions, template copy),
  (a') the same behind the worker pool (what front ends and evaluations use),
  (b)  MCP over streamable HTTP to `awm env serve` (one persistent session),
  (c)  the naive design: per episode a fresh server process that rebuilds the DB and serves MCP,
       with a new MCP session per call (as the reference agent does),
and the handler's own time (awaiting the route coroutine directly) to show the call overhead.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.data.paths import sample_envs_dir  # noqa: E402
from awm_engine.db.templates import TemplateCache  # noqa: E402
from awm_engine.runtime.inprocess import Episode, LoadedEnv, _thread_loop, current_episode  # noqa: E402
from awm_engine.runtime.pool import EnvPool  # noqa: E402
from awm_engine.runtime.ports import free_port  # noqa: E402

console = Console(width=130)
PY = sys.executable


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def pick_tool(env: LoadedEnv) -> str:
    """A GET tool without required arguments that answers 200 (the handler-overhead probe)."""
    episode = Episode(env)
    try:
        for tool in env.tools:
            if tool.method == "get" and not tool.required and episode.call_tool_sync(tool.name, {}).status == 200:
                return tool.name
    finally:
        episode.close_now()
    raise SystemExit(f"{env.key}: no argument-free GET tool answers 200")


def bench_in_process(env: LoadedEnv, tool: str, n_episodes: int, n_calls: int) -> dict[str, float]:
    opens, resets, lists, calls, asyncs, handler = [], [], [], [], [], []
    for _ in range(n_episodes):
        t = time.perf_counter()
        ep = Episode(env)
        opens.append(time.perf_counter() - t)
        ep.close_now()
    ep = Episode(env)
    for _ in range(n_episodes):
        t = time.perf_counter()
        ep.reset_now()
        resets.append(time.perf_counter() - t)
    for _ in range(n_calls):
        t = time.perf_counter()
        ep.list_tools()
        lists.append(time.perf_counter() - t)
    route = next(r for r in env.app.routes if getattr(r, "operation_id", None) == tool or getattr(r, "name", "") == tool)
    loop = _thread_loop()
    for _ in range(n_calls):
        token = current_episode.set(ep)
        t = time.perf_counter()
        loop.run_until_complete(route.endpoint())
        handler.append(time.perf_counter() - t)
        current_episode.reset(token)
        t = time.perf_counter()
        ep.call_tool_sync(tool, {})
        calls.append(time.perf_counter() - t)

    async def threaded():
        for _ in range(n_calls):
            t = time.perf_counter()
            await ep.call_tool(tool, {})
            asyncs.append(time.perf_counter() - t)

    asyncio.run(threaded())
    ep.close_now()
    return {"open": median_ms(opens), "reset": median_ms(resets), "list_tools": median_ms(lists),
            "call_tool": median_ms(calls), "call_tool (thread, timeout-guarded)": median_ms(asyncs),
            "handler alone": median_ms(handler)}


async def bench_pool(scenario, tool: str, n_episodes: int, n_calls: int) -> dict[str, float]:
    opens, resets, lists, calls = [], [], [], []
    async with EnvPool(workers=1) as pool:
        warm = await pool.open_episode(scenario)
        for _ in range(n_episodes):
            t = time.perf_counter()
            ep = await pool.open_episode(scenario)
            opens.append(time.perf_counter() - t)
            await ep.close()
        for _ in range(n_episodes):
            t = time.perf_counter()
            await warm.reset()
            resets.append(time.perf_counter() - t)
        for _ in range(n_calls):
            t = time.perf_counter()
            warm.list_tools()
            lists.append(time.perf_counter() - t)
            t = time.perf_counter()
            await warm.call_tool(tool, {})
            calls.append(time.perf_counter() - t)
    return {"open": median_ms(opens), "reset": median_ms(resets), "list_tools": median_ms(lists),
            "call_tool": median_ms(calls)}


async def mcp_session_calls(url: str, tool: str, n_calls: int) -> tuple[list[float], list[float], list[float]]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    lists, calls, opens = [], [], []
    for _ in range(5):  # what a client pays to start talking to the (already running) episode server
        t = time.perf_counter()
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                opens.append(time.perf_counter() - t)
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(n_calls):
                t = time.perf_counter()
                await session.list_tools()
                lists.append(time.perf_counter() - t)
                t = time.perf_counter()
                await session.call_tool(tool, {})
                calls.append(time.perf_counter() - t)
    return lists, calls, opens


async def one_shot_call(url: str, tool: str | None) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            if tool is None:
                await session.list_tools()
            else:
                await session.call_tool(tool, {})


def wait_ready(url: str, proc: subprocess.Popen, deadline: float = 90.0) -> None:
    start = time.time()
    while time.time() - start < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            asyncio.run(one_shot_call(url, None))
            return
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.05)
    raise RuntimeError("server never became ready")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def bench_mcp_http(data_dir: Path, scenario: str, tool: str, n_calls: int, work: Path) -> dict[str, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    t = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "awm_engine.cli", "env", "serve", "--data", str(data_dir), "--scenario",
                             scenario, "--port", str(port), "--out", str(work / f"serve_{scenario}")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(url, proc)
        started = time.perf_counter() - t
        lists, calls, opens = asyncio.run(mcp_session_calls(url, tool, n_calls))
    finally:
        stop(proc)
    return {"server start": started * 1000, "open": median_ms(opens), "list_tools": median_ms(lists),
            "call_tool": median_ms(calls)}


def bench_naive(data_dir: Path, scenario: str, tool: str, n_episodes: int, n_calls: int, work: Path) -> dict:
    opens, calls, lists = [], [], []
    for i in range(n_episodes):
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        t = time.perf_counter()
        proc = subprocess.Popen([PY, str(ROOT / "benchmarks" / "_naive_server.py"), str(data_dir), scenario,
                                 str(work / f"naive_{scenario}_{i}"), str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(url, proc)
            opens.append(time.perf_counter() - t)
            if i == 0:
                for _ in range(max(3, n_calls // 10)):
                    t = time.perf_counter()
                    asyncio.run(one_shot_call(url, None))
                    lists.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    asyncio.run(one_shot_call(url, tool))
                    calls.append(time.perf_counter() - t)
        finally:
            stop(proc)
    # reset = a new episode in this design
    return {"open": median_ms(opens), "reset": median_ms(opens), "list_tools": median_ms(lists),
            "call_tool": median_ms(calls)}


def run_one(label: str, data_dir: Path, scenario_key: str, args, work: Path) -> None:
    scenario = Catalog.load([data_dir]).get(scenario_key)
    template, _ = TemplateCache(work / "templates").get(scenario)
    env = LoadedEnv(scenario.key, scenario.code, template, work / "inproc")
    tool = pick_tool(env)
    console.print(f"[bold]{label}[/bold]: {scenario.key} ({len(env.tools)} tools, "
                  f"{'shared module' if env.shared else 'isolated'}), probe tool {tool}")
    a = bench_in_process(env, tool, args.episodes, args.calls)
    a2 = asyncio.run(bench_pool(scenario, tool, args.episodes, args.calls))
    b = bench_mcp_http(data_dir, scenario.key, tool, args.calls, work)
    c = bench_naive(data_dir, scenario.key, tool, args.naive, args.calls, work)
    table = Table(title=f"{label}: median ms")
    for col in ("step", "(a) in-process", "(a') worker pool", "(b) MCP HTTP", "(c) naive", "(b)/(a)", "(c)/(a)",
                "(c)/(a')"):
        table.add_column(col, justify="right" if col != "step" else "left")

    def cell(d, k):
        return f"{d[k]:.3f}" if k in d else "—"

    def ratio(x, y, k):
        return f"{x[k] / y[k]:,.0f}×" if k in x and k in y and y[k] > 0 else "—"

    for key in ("open", "reset", "list_tools", "call_tool"):
        table.add_row(key, cell(a, key), cell(a2, key), cell(b, key), cell(c, key), ratio(b, a, key), ratio(c, a, key),
                      ratio(c, a2, key))
    table.add_row("server start", "—", "—", f"{b['server start']:.0f}", "—", "", "", "")
    console.print(table)
    console.print("  (b) open = a new MCP session on the running `awm env serve` (initialize); reset is not offered over "
                  "MCP: a fresh episode is a new server ('server start'). (c) reset = a new episode = a new server.")
    overhead = a["call_tool"] - a["handler alone"]
    console.print(f"  handler alone {a['handler alone']:.3f} ms; in-process call_tool {a['call_tool']:.3f} ms "
                  f"(overhead {overhead:.3f} ms, target ≤ 1 ms: {'OK' if overhead <= 1 else 'MISSED'}); "
                  f"with thread hop + timeout guard {a['call_tool (thread, timeout-guarded)']:.3f} ms")
    console.print(f"  warm open {a['open']:.3f} ms (target ≤ 5 ms: {'OK' if a['open'] <= 5 else 'MISSED'}; "
                  f"{c['open'] / a['open']:,.0f}× faster than naive, target ≥ 100×: "
                  f"{'OK' if c['open'] / a['open'] >= 100 else 'MISSED'}); reset {a['reset']:.3f} ms "
                  f"(target ≤ 2 ms: {'OK' if a['reset'] <= 2 else 'MISSED'})\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--naive", type=int, default=3, help="naive episodes (each spawns a server)")
    args = parser.parse_args()
    os.environ.setdefault("AWM_CACHE_DIR", tempfile.mkdtemp(prefix="awm_bench_cache_"))
    work = Path(tempfile.mkdtemp(prefix="awm_bench_"))
    real = Path(os.environ.get("AWM_SHARED_DIR", ROOT.parent / "shared")) / "data" / "awm-real"
    if (real / "gen_envs.jsonl").is_file():
        run_one("real AWM environment", real, "gofundme", args, work)
    else:
        console.print(f"[yellow]{real} not found: skipping the real AWM environment[/yellow]")
    run_one("sample environment", sample_envs_dir(), "maple_library_lending", args, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
