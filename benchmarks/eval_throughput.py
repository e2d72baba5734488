"""Evaluation throughput: sustained tool calls per second with many concurrent episodes.

    .venv/bin/python benchmarks/eval_throughput.py [--concurrency 64] [--calls 10] [-k 2] [--verify none]

A scripted OpenAI-compatible server (``awm fake-llm``, its own process, answering instantly) plays an
agent that lists the tools, calls an argument-free GET tool ``--calls`` times and answers. The
evaluation runs over the sample environments and, when ../shared is present, the real AWM ones,
with ``--concurrency`` episodes in flight, through the same ``awm eval`` engine users run. Printed:
rollouts, tool calls, wall time, sustained tool calls per second (target ≥ 150 on 2 cores), and the
same run's rate through the naive design measured for a few calls (a fresh MCP session per call to a
per-episode server, as the reference agent does) for the ratio.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awm_engine.agent.endpoints import Endpoint  # noqa: E402
from awm_engine.agent.rollout import AgentConfig  # noqa: E402
from awm_engine.data.catalog import Catalog  # noqa: E402
from awm_engine.data.paths import sample_envs_dir  # noqa: E402
from awm_engine.db.templates import TemplateCache  # noqa: E402
from awm_engine.eval.batch import EvalConfig, run_evaluation  # noqa: E402
from awm_engine.eval.results import read_records  # noqa: E402
from awm_engine.runtime.inprocess import Episode, LoadedEnv  # noqa: E402
from awm_engine.runtime.ports import free_port  # noqa: E402


def probe_tool(scenario, work: Path) -> str | None:
    """An argument-free GET tool that answers 200, unique to this scenario."""
    template, _ = TemplateCache(work / "tpl").get(scenario)
    env = LoadedEnv(scenario.key, scenario.code, template, work / "probe")
    episode = Episode(env)
    try:
        for tool in env.tools:
            if tool.method == "get" and not tool.required and episode.call_tool_sync(tool.name, {}).status == 200:
                return tool.name
    finally:
        episode.close_now()
    return None


def call(name: str, arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def build_script(dirs: list[Path], n_calls: int, work: Path) -> tuple[dict, list[tuple[str, str, str]]]:
    rules, scenarios, names = [], [], {}
    for d in dirs:
        for s in Catalog.load([d]):
            tool = probe_tool(s, work)
            if tool is None:
                continue
            names[s.key] = (d, tool)
    counts = {}
    for _, tool in names.values():
        counts[tool] = counts.get(tool, 0) + 1
    for key, (d, tool) in names.items():
        if counts[tool] > 1:
            continue  # the rule must recognise exactly one scenario by its tool list
        step = call("call_tool", {"tool_name": f"mcp_tool_mcp_server_{tool}", "arguments": "{}"})
        rules.append({"match": f"mcp_tool_mcp_server_{tool}\n", "responses": [{"content": ""}] + [{"content": step}]
                      * n_calls + [{"content": "Done."}]})
        scenarios.append((str(d), key, tool))
    script = {"responses": [{"content": call("list_tools", {})}], "rules": rules}
    return script, scenarios


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def naive_rate(data_dir: str, scenario: str, tool: str, concurrency: int, seconds: float, work: Path) -> float:
    """The reference agent's pattern: a new MCP session (and client) for every tool call, to one server per
    episode. Measured with ``concurrency`` callers on one server for ``seconds``."""
    from fastmcp import Client

    from awm_engine.runtime.mcp_client import ServedEnvironment

    server = await ServedEnvironment(scenario, work / "naive", [data_dir]).start()
    count = 0
    deadline = time.perf_counter() + seconds
    try:
        async def caller():
            nonlocal count
            while time.perf_counter() < deadline:
                async with Client(server.url, timeout=60) as client:
                    await client.call_tool_mcp(tool, {})
                count += 1

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        return count / (time.perf_counter() - started)
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--calls", type=int, default=10, help="tool calls per rollout (after list_tools)")
    parser.add_argument("-k", type=int, default=2)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--verify", choices=["none", "code"], default="none")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="awm_tput_"))
    os.environ.setdefault("AWM_CACHE_DIR", str(work / "cache"))
    dirs = [sample_envs_dir()]
    real = Path(os.environ.get("AWM_SHARED_DIR", ROOT.parent / "shared")) / "data" / "awm-real"
    if (real / "gen_envs.jsonl").is_file():
        dirs.append(real)
    script, scenarios = build_script(dirs, args.calls, work)
    (work / "script.json").write_text(json.dumps(script))
    port = free_port()
    llm = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", "fake-llm", "--script", str(work / "script.json"),
                            "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model="scripted", max_retries=0)
        totals = {"rollouts": 0, "calls": 0, "seconds": 0.0, "ok": 0}
        by_dir: dict[str, list[str]] = {}
        for d, key, _ in scenarios:
            by_dir.setdefault(d, []).append(key)
        started = time.perf_counter()

        async def run_all():
            jobs = []
            for d, keys in by_dir.items():
                config = EvalConfig(data_dirs=[d], scenarios=keys, policy="llm", endpoint=endpoint.public(), k=args.k,
                                    concurrency=args.concurrency // len(by_dir), workers=args.workers,
                                    verify=args.verify, agent=AgentConfig(max_turns=args.calls + 3).to_dict())
                jobs.append(run_evaluation(config, work / f"run_{len(jobs)}", endpoint))
            await asyncio.gather(*jobs)

        import resource

        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        asyncio.run(run_all())
        elapsed = time.perf_counter() - started
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        main_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        for i in range(len(by_dir)):
            for r in read_records(work / f"run_{i}" / "results.jsonl"):
                totals["rollouts"] += 1
                totals["calls"] += r.get("tool_call_count") or 0
                totals["ok"] += r.get("stop_reason") == "final_answer"
        rate = totals["calls"] / elapsed
        print(f"scenarios: {len(scenarios)} ({', '.join(k for _, k, _ in scenarios)})")
        print(f"rollouts: {totals['rollouts']} ({totals['ok']} reached their final answer), "
              f"{args.concurrency} in flight, k={args.k}, verify={args.verify}")
        print(f"tool calls (incl. list_tools): {totals['calls']} in {elapsed:.1f} s")
        print(f"sustained: {rate:.0f} tool calls/s — target ≥ 150: {'OK' if rate >= 150 else 'MISSED'}")
        llm_cpu = _proc_cpu(llm.pid)
    finally:
        llm.terminate()
        llm.wait(10)
    print(f"  scripted LLM server CPU: {llm_cpu:.1f} s")
    d, key, tool = scenarios[0]
    naive = asyncio.run(naive_rate(d, key, tool, 8, 5.0, work))
    print(f"naive (new MCP session per call, as the reference agent; 8 callers, tool calls only, no LLM): "
          f"{naive:.0f} calls/s — awm sustains {rate / naive:.0f}x that with a model in the loop")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"  CPU seconds: evaluation process {main_cpu:.1f}, environment workers + scripted LLM "
          f"{children.ru_utime + children.ru_stime:.1f} — {os.cpu_count()} cores, {elapsed:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
