"""`awm env serve` answers a real MCP client (the `mcp` package) over streamable HTTP and stdio."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.db.templates import TemplateCache
from awm_engine.runtime.inprocess import Episode, LoadedEnv
from awm_engine.runtime.ports import free_port

AWM = [sys.executable, "-m", "awm_engine.cli"]
SCENARIO = "maple_library_lending"


def listening_addresses(port: int) -> set[str]:
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.rsplit(":", 1)
            if state == "0A" and int(p, 16) == port:
                found.add(addr)
    return found


def wait_for_port(port: int, proc, deadline=60.0):
    start = time.time()
    while time.time() - start < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("server did not start")


def in_process_texts(calls):
    s = Catalog.load().get(SCENARIO)
    import tempfile
    work = Path(tempfile.mkdtemp())
    template, _ = TemplateCache(work / "tpl").get(s)
    episode = Episode(LoadedEnv(s.key, s.code, template, work))
    return [episode.call_tool_sync(name, args).text for name, args in calls]


async def run_calls(session, calls):
    await session.initialize()
    tools = (await session.list_tools()).tools
    results = []
    for name, args in calls:
        r = await session.call_tool(name, args)
        results.append((r.is_error, "\n".join(c.text for c in r.content)))
    return tools, results


CALLS = [("list_my_loans", {"status": "active"}), ("list_branches", {}), ("get_event", {}),
         ("get_event", {"event_id": 99999}), ("no_such_tool", {})]


def start_server(tmp_path, scenario=SCENARIO, data=None):
    port = free_port()
    out = tmp_path / "session"
    extra = ["--data", str(data)] if data else []
    proc = subprocess.Popen(AWM + ["env", "serve", *extra, "--scenario", scenario, "--task", "0", "--port", str(port),
                                   "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache")})
    wait_for_port(port, proc)
    return port, out, proc


def stop_server(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def server(tmp_path):
    port, out, proc = start_server(tmp_path)
    try:
        yield port, out, proc
    finally:
        stop_server(proc)


async def test_real_environments_give_identical_text_over_mcp(awm_real, tmp_path):
    """For each real AWM environment: every argument-free GET tool and a rejected call, MCP vs in-process."""
    for s in Catalog.load([awm_real]):
        # one template for both sides: AWM content depends on build time (datetime('now'))
        template, _ = TemplateCache(tmp_path / s.key / "cache" / "templates").get(s)
        env = LoadedEnv(s.key, s.code, template, tmp_path / "work")
        calls = [(t.name, {}) for t in env.tools if t.method == "get" and not t.required]
        required = next(t for t in env.tools if t.required)
        calls += [(required.name, {}), ("no_such_tool", {})]
        episode = Episode(env)
        expected = [episode.call_tool_sync(name, args).text for name, args in calls]
        port, out, proc = start_server(tmp_path / s.key, s.key, awm_real)
        try:
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    tools, results = await run_calls(session, calls)
        finally:
            stop_server(proc)
        assert sorted(t.name for t in tools) == sorted(t.name for t in env.tools)
        assert [text for _, text in results] == expected, s.key


async def test_http_server_matches_in_process_and_binds_loopback(server):
    port, out, proc = server
    assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
    async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
        async with ClientSession(read, write) as session:
            tools, results = await run_calls(session, CALLS)
            loan = await session.call_tool("renew_loan", {"loan_id": 3}) if any(
                t.name == "renew_loan" for t in tools) else None
    catalog_tools = Catalog.load().get(SCENARIO)
    assert len(tools) == catalog_tools.tool_count
    expected = in_process_texts(CALLS)
    assert [text for _, text in results] == expected
    assert [err for err, _ in results] == [False, False, True, True, True]
    assert expected[2] == "Input validation error: 'event_id' is a required property"
    assert expected[3] == "Error calling get_event. Status code: 500. Response: Internal Server Error"
    session_info = json.loads((out / "session.json").read_text())
    assert session_info["url"] == f"http://127.0.0.1:{port}/mcp" and session_info["task_id"] == 0
    proc.send_signal(signal.SIGINT)
    proc.wait(20)
    assert (out / "initial.db").is_file() and (out / "final.db").is_file() and (out / "server.log").exists()
    assert (out / "server_code.py").read_text().count("create_engine('sqlite:///") == 1
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert [c["tool"] for c in calls][:2] == ["list_my_loans", "list_branches"]
    if loan is not None and not loan.is_error:
        from awm_engine.db.diff import diff_databases
        assert not diff_databases(out / "initial.db", out / "final.db").is_empty


def test_env_check_lists_a_running_servers_tools(server, capsys):
    port, _, _ = server
    assert awm(["env", "check", "--url", f"http://127.0.0.1:{port}/mcp", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["running"] and len(data["tools"]) == Catalog.load().get(SCENARIO).tool_count


def test_env_check_takes_the_url_first_or_the_session_directory(server, tmp_path, capsys):
    port, out, _ = server
    url = f"http://127.0.0.1:{port}/mcp"
    for where in ([url], [str(out)], [str(out), "--url", url]):
        assert awm(["env", "check", *where, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["url"] == url
    assert awm(["env", "check", str(out), "--url", f"http://127.0.0.1:{free_port()}/mcp"]) == 2
    assert "two servers given" in capsys.readouterr().err
    assert awm(["env", "check"]) == 2 and "give the server's URL" in capsys.readouterr().err
    assert awm(["env", "check", str(tmp_path)]) == 2 and "nor a session directory" in capsys.readouterr().err
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    (stopped / "session.json").write_text(json.dumps({"url": url, "stopped": 1796637625.0}))
    assert awm(["env", "check", str(stopped)]) == 1 and "that server stopped" in capsys.readouterr().err


def test_env_check_on_a_dead_url_fails_cleanly(capsys):
    assert awm(["env", "check", "--url", f"http://127.0.0.1:{free_port()}/mcp", "--timeout", "2"]) == 1
    assert "could not list tools" in capsys.readouterr().err


async def test_stdio_server(tmp_path):
    params = StdioServerParameters(command=sys.executable, args=["-m", "awm_engine.cli", "env", "serve", "--scenario",
                                                                 SCENARIO, "--stdio", "--out", str(tmp_path / "s")],
                                   # (AWM_WARM as the test's: a warm service started here would outlive the test, in
                                   # the default directory every checkout of this user shares)
                                   env={"AWM_CACHE_DIR": str(tmp_path / "cache"), "PATH": os.environ["PATH"],
                                        "AWM_WARM": os.environ.get("AWM_WARM", "0")})
    with open(tmp_path / "stderr.txt", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                tools, results = await run_calls(session, CALLS[:2])
    assert len(tools) == Catalog.load().get(SCENARIO).tool_count
    assert [text for _, text in results] == in_process_texts(CALLS[:2])


def test_env_call_cli(capsys, tmp_path):
    assert awm(["env", "call", SCENARIO, "list_branches", "--args", "{}"]) == 0
    assert '"branches"' in capsys.readouterr().out
    assert awm(["env", "call", SCENARIO, "get_event", "--args", "{}", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["error_kind"] == "invalid_arguments"
    assert awm(["env", "call", SCENARIO, "list_branches", "--args", "[1]"]) == 2


def test_env_test_cli(capsys):
    assert awm(["env", "test", "--scenario", SCENARIO, "--json", "--workers", "1"]) == 0
    report = json.loads(capsys.readouterr().out)[0]
    assert report["loads"] and report["tools"] == 23 and report["get_tools"] >= 5
    assert report["calls_ok"] + report["calls_5xx"] + report["calls_4xx"] + report["calls_other_error"] == \
        report["get_tools"]


def test_a_served_environment_exits_with_its_parent(tmp_path):
    """A server started for a live rollout never outlives the process that started it (no orphans)."""
    script = ("import asyncio, os\n"
              "from awm_engine.runtime.mcp_client import ServedEnvironment\n"
              "async def main():\n"
              f"    s = await ServedEnvironment('{SCENARIO}', r'{tmp_path / 'run'}').start()\n"
              "    print(s.proc.pid, flush=True)\n"
              "    os._exit(0)\n"
              "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "AWM_CACHE_DIR": str(tmp_path / "cache")})
    pid = int(out.stdout.strip())
    deadline = time.time() + 15
    while time.time() < deadline and os.path.exists(f"/proc/{pid}") and \
            open(f"/proc/{pid}/stat").read().split()[2] != "Z":
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert (tmp_path / "run" / "final.db").is_file()
