"""`awm env serve` against the AWM reference's server design, in one run, interleaved.

    .venv/bin/python benchmarks/serve_mcp.py --baseline-venv /tmp/fmcp_venv [--scenario KEY] [--rounds N] [--calls N]

The reference design: the environment's own code as the reference rewrites it (``envcode.rewrite_code``: its
FastAPI app, ``fastapi_mcp.FastApiMCP(app).mount_http()``, uvicorn), run unsandboxed by the baseline venv's Python
on a copy of the scenario's database. The baseline venv holds fastapi-mcp from PyPI, never awm's own .venv:

    python3 -m venv /tmp/fmcp_venv && /tmp/fmcp_venv/bin/pip install fastapi-mcp==0.4.0 mcp==1.26.0 uvicorn sqlalchemy

For each round, each server in turn (the order alternates between rounds) is started, timed to its first answered
``list_tools`` (cold start: a fresh client retrying until one answers), then one persistent session of the real
``mcp`` client lists the tools and makes ``--calls`` calls, taking the scenario's argument-free read tools in turn
(``--tool`` to choose; after a few warm-up calls of each); each start and
each series of calls begins once the machine is quiet (``wait_quiet``: CPUs less than 25% busy over half a
second — after an awm server starts, its warm service spends about 2 s of CPU preparing the next spare); the served
process tree's RSS (the server and all its descendants, the sandboxed worker included) is read after the calls.
Prints median and p95 per-call latency over all calls, median cold start and RSS per design, and the three ratios
awm/reference; then each tool's latency on both sides (the smallest answers are where the ``mcp`` client's own
time, the same for both, weighs most).

Each awm round first starts (and stops) a server of another scenario (``--other``, default the catalog's second):
the measured server's scenario is never the one served last, so its module is not in a spare bound to it ahead
(``bind_next``) but loaded while it starts (``prepare``) — the harder case. awm's modules are compiled to bytecode
first, as an installed package's are (a checkout run with ``PYTHONDONTWRITEBYTECODE`` would compile them at every
start).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.runtime.envcode import rewrite_code  # noqa: E402
from awm_engine.runtime.ports import free_port  # noqa: E402

WARMUP = 5


async def _list_once(url: str) -> list:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return (await session.list_tools()).tools


def cold_start(url: str, proc: subprocess.Popen, started: float, deadline: float = 120.0) -> tuple[float, list]:
    """Seconds from ``started`` to the first answered ``list_tools``, and the tools."""
    while time.perf_counter() - started < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            tools = asyncio.run(_list_once(url))
            return time.perf_counter() - started, tools
        except Exception:  # noqa: BLE001 - not listening yet
            time.sleep(0.01)
    raise RuntimeError(f"no answer at {url} within {deadline} s")


async def session_calls(url: str, tools: list[str], n: int) -> list[tuple[str, float]]:
    """``n`` calls on one session, the tools taken in turn (each with no arguments): (tool, seconds) per call."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out = []
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()  # as an agent does first (the client keeps the tools' output schemas)
            for i in range(n + WARMUP * len(tools)):
                tool = tools[i % len(tools)]
                t = time.perf_counter()
                result = await session.call_tool(tool, {})
                if i >= WARMUP * len(tools):
                    out.append((tool, time.perf_counter() - t))
                if getattr(result, "is_error", None) or getattr(result, "isError", None):
                    raise RuntimeError(f"{tool} failed: {result.content}")
    return out


def read_tools(tools: list) -> list[str]:
    """The argument-free read tools (fastapi-mcp names them after the route's function: get_, list_, search_)."""
    return [t.name for t in tools if not (getattr(t, "input_schema", None) or t.inputSchema).get("required")
            and t.name.split("_", 1)[0] in ("get", "list", "search")]


def _proc_kb(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_memory_mb(pid: int) -> tuple[float, float]:
    """RSS and PSS of ``pid`` and every descendant (from /proc; a sandbox's processes are descendants too). RSS
    counts a shared library's pages once per process that maps it; PSS divides them among those processes."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    rss = pss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        rss += _proc_kb(f"/proc/{p}/status", "VmRSS:")
        pss += _proc_kb(f"/proc/{p}/smaps_rollup", "Pss:")
    return rss / 1024, pss / 1024


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_reference(python: Path, scenario, db: Path, work: Path, port: int) -> subprocess.Popen:
    copy = work / f"ref_{port}.db"
    shutil.copyfile(db, copy)
    server = work / f"ref_{port}.py"
    server.write_text(rewrite_code(scenario.code, str(copy), "127.0.0.1", port))
    return subprocess.Popen([str(python), str(server)], cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PORT": str(port)})


def start_awm(scenario, data: list[str], work: Path, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "awm_engine.cli", "env", "serve", "--scenario", scenario.key, "--port", str(port),
           "--out", str(work / f"awm_{port}")]
    for d in data:
        cmd += ["--data", d]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def wait_quiet(busy_below: float = 0.25, window: float = 0.5, longest: float = 30.0) -> float:
    """Wait until the machine's CPUs were busy less than ``busy_below`` over one ``window`` (at most ``longest``
    seconds): both designs' rounds start, and their calls are measured, on a machine that is not still starting
    something (awm's warm service prepares its next spare sandbox for about 2 s of CPU after a server starts).
    Seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < longest:
        busy0, total0 = _cpu_times()
        time.sleep(window)
        busy1, total1 = _cpu_times()
        if total1 > total0 and (busy1 - busy0) / (total1 - total0) < busy_below:
            break
    return time.monotonic() - started


def one(kind: str, args, scenario, db: Path, work: Path, tools: list[str] | None) -> dict:
    if kind == "awm" and args.other is not None:  # served last: the measured scenario is not
        wait_quiet()
        port = free_port()
        proc = start_awm(args.other, args.data, work, port)
        try:
            cold_start(f"http://127.0.0.1:{port}/mcp", proc, time.perf_counter())
        finally:
            stop(proc)
    wait_quiet()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    t = time.perf_counter()
    proc = (start_reference(args.python, scenario, db, work, port) if kind == "reference"
            else start_awm(scenario, args.data, work, port))
    try:
        cold, listed = cold_start(url, proc, t)
        measured = tools if tools else read_tools(listed)
        wait_quiet()  # steady state: calls measured once the start's background work (if any) is done
        calls = asyncio.run(session_calls(url, measured, args.calls))
        rss, pss = tree_memory_mb(proc.pid)
        warm = False
        if kind == "awm":  # a worker taken from the warm service is that service's child: counted here all the same
            session = json.loads(next(work.glob(f"awm_{port}/session.json")).read_text())
            warm = session.get("worker") == "warm"
            if warm:
                more = tree_memory_mb(session["worker_pid"])
                rss, pss = rss + more[0], pss + more[1]
    finally:
        stop(proc)
    return {"cold": cold, "calls": calls, "rss": rss, "pss": pss, "tools": measured, "warm": warm}


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-venv", required=True, type=Path,
                        help="a venv with fastapi-mcp==0.4.0, uvicorn and sqlalchemy (not awm's .venv)")
    parser.add_argument("--data", action="append", default=[], help="AWM data directory (default: sample_envs/)")
    parser.add_argument("--scenario", default=None, help="scenario key (default: the catalog's first)")
    parser.add_argument("--other", default=None,
                        help="scenario served before each awm round (default: the catalog's second; 'none': none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tool", action="append", default=[],
                        help="tool called with no arguments (repeatable; the calls take them in turn; default: every "
                             "argument-free get/list/search tool of the scenario)")
    args = parser.parse_args()
    args.python = args.baseline_venv / "bin" / "python"
    probe = subprocess.run([str(args.python), "-c", "import fastapi_mcp, uvicorn, sqlalchemy"], capture_output=True) \
        if args.python.exists() else None
    if probe is None or probe.returncode:
        print(f"{args.baseline_venv} is not a baseline venv (python with fastapi_mcp, uvicorn, sqlalchemy). Create it:\n"
              f"  python3 -m venv {args.baseline_venv} && {args.baseline_venv}/bin/pip install fastapi-mcp==0.4.0 "
              "mcp==1.26.0 uvicorn sqlalchemy", file=sys.stderr)
        return 2
    # the warm service (runtime.warm) of this run only: started by the first awm server, stopped at the end
    warm_dir = tempfile.mkdtemp(prefix="serve_bench_warm_")
    os.environ["AWM_WARM_DIR"] = warm_dir
    os.environ.pop("AWM_WARM", None)
    try:
        return run(args)
    finally:
        from awm_engine.runtime import warm

        warm.stop_service()
        shutil.rmtree(warm_dir, ignore_errors=True)


def run(args) -> int:
    import compileall

    compileall.compile_dir(str(ROOT / "awm_engine"), quiet=1)
    catalog = Catalog.load(args.data or None)
    scenario = catalog.get(args.scenario) if args.scenario else next(iter(catalog))
    others = [s for s in catalog if s.key != scenario.key]
    args.other = None if args.other == "none" or not others else \
        (catalog.get(args.other) if args.other else others[0])
    results: dict[str, list[dict]] = {"reference": [], "awm": []}
    with tempfile.TemporaryDirectory(prefix="serve_bench_") as tmp:
        work = Path(tmp)
        # the scenario's database, as awm builds it for an episode (the reference server opens a copy of it)
        other, args.other = args.other, None
        warm = one("awm", args, scenario, Path(), work, args.tool)  # also: the machine has served an environment
        db = next(work.glob("awm_*/initial.db"))
        tools = warm["tools"]
        if other is not None:  # its template built (the prepare of a server of it loads only a built one)
            port = free_port()
            proc = start_awm(other, args.data, work, port)
            try:
                cold_start(f"http://127.0.0.1:{port}/mcp", proc, time.perf_counter())
            finally:
                stop(proc)
        args.other = other
        print(f"{scenario.key}: {len(tools)} tool(s) taken in turn ({', '.join(tools)}); {args.rounds} rounds x "
              f"{args.calls} calls, interleaved", flush=True)
        print(f"  first awm start of this run (no warm worker yet): cold {warm['cold'] * 1000:7.0f} ms", flush=True)
        if args.other is not None:
            print(f"  before each awm round: a server of {args.other.key} (the measured scenario is never the "
                  "one served last)", flush=True)
        for r in range(args.rounds):
            for kind in (("reference", "awm") if r % 2 == 0 else ("awm", "reference")):
                res = one(kind, args, scenario, db, work, tools)
                results[kind].append(res)
                print(f"  round {r + 1} {kind:9}: cold {res['cold'] * 1000:7.0f} ms  call median "
                      f"{statistics.median(c for _, c in res['calls']) * 1000:6.2f} ms  "
                      f"p95 {p95([c for _, c in res['calls']]) * 1000:6.2f} ms  "
                      f"rss {res['rss']:6.1f} MB  pss {res['pss']:6.1f} MB{'  (warm worker)' if res['warm'] else ''}", flush=True)
    summary = {}
    for kind, rs in results.items():
        calls = [c for r in rs for _, c in r["calls"]]
        summary[kind] = {"median": statistics.median(calls) * 1000, "p95": p95(calls) * 1000,
                         "cold": statistics.median(r["cold"] for r in rs) * 1000,
                         "rss": statistics.median(r["rss"] for r in rs),
                         "pss": statistics.median(r["pss"] for r in rs)}
    print(f"\n{'':10} {'call median':>12} {'call p95':>10} {'cold start':>11} {'tree RSS':>9} {'tree PSS':>9}")
    for kind, s in summary.items():
        print(f"{kind:10} {s['median']:9.2f} ms {s['p95']:7.2f} ms {s['cold']:8.0f} ms {s['rss']:6.1f} MB {s['pss']:6.1f} MB")
    a, b = summary["awm"], summary["reference"]
    print(f"{'awm/ref':10} {a['median'] / b['median']:12.2f} {a['p95'] / b['p95']:10.2f} {a['cold'] / b['cold']:11.2f} "
          f"{a['rss'] / b['rss']:9.2f} {a['pss'] / b['pss']:9.2f}")
    if len(tools) > 1:  # each tool on its own: the smallest answers are where the client's own time weighs most
        print(f"\n{'per tool':28} {'reference':>17} {'awm':>17} {'awm/ref':>13}")
        print(f"{'':28} {'median':>8} {'p95':>8} {'median':>8} {'p95':>8} {'median':>6} {'p95':>6}")
        for tool in tools:
            row = {kind: [c for r in rs for name, c in r["calls"] if name == tool] for kind, rs in results.items()}
            ref, ours = row["reference"], row["awm"]
            if len(ref) < 2 or len(ours) < 2:
                continue
            rm, rp, am, ap = (statistics.median(ref) * 1000, p95(ref) * 1000, statistics.median(ours) * 1000,
                              p95(ours) * 1000)
            print(f"{tool[:28]:28} {rm:8.2f} {rp:8.2f} {am:8.2f} {ap:8.2f} {am / rm:6.2f} {ap / rp:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
