"""What the twelfth red-team pass found, one regression test each (each fails while its gap is open).

- numbers a worker sends were converted in the parent without a bound: a call's ``elapsed_ms`` as a 400-digit
  integer (JSON carries it) raised ``OverflowError`` in ``protocol.call_answer``, past every handler of a malformed
  answer — ``awm env test`` over a whole data directory ended in a traceback, a rollout ended with the exception
  instead of an error result; an ``open`` answer's ``template_built_at`` of 1e20 raised in ``template_facts``
  (``time.gmtime``), so ``awm env serve`` crashed before serving.
"""
from __future__ import annotations

import asyncio
import json

from tinyenv import call_once, forged_answers, make_env_dir

from awm_engine.data.catalog import Catalog
from awm_engine.runtime.pool import EnvPool

def test_a_calls_duration_no_float_holds_is_a_malformed_answer_not_a_crash(tmp_path):
    code = forged_answers('"elapsed_ms": 10 ** 400')
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Forger": code})]).get("forger")
    result, replaced = call_once(scenario, tmp_path / "run")
    assert result.is_error and result.error_kind == "internal" and "malformed" in result.text, result.text[:300]
    assert replaced  # a worker that broke the protocol is not trusted with another call


def test_a_template_time_out_of_any_calendar_does_not_stop_the_episodes_open(tmp_path):
    code = forged_answers('"template_built_at": 1e20', when='"template_built_at" in result and "tools" not in result')
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Forger": code})]).get("forger")

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=tmp_path / "run")
            template = episode.template
            await episode.close()
            return template

    template = asyncio.run(go())
    assert template is not None and template["built"] is None


def test_a_benchmark_task_named_like_markup_does_not_end_the_run(tmp_path, capsys):
    """An MCP-Universe task's id (its folder and file name) went into the progress bar's stats as Rich markup: a
    folder ``ws[`` holding ``]x.json`` made ``ws[/]x`` — a closing tag with nothing to close — and the
    ``MarkupError`` ended ``awm bench mcp-universe run`` once its first task was done."""
    from awm_engine.cli import main

    configs = tmp_path / "configs"
    (configs / "ws[").mkdir(parents=True)
    (configs / "ws[" / "]x.json").write_text(json.dumps({
        "question": "What?", "mcp_servers": [{"name": "nosuch"}],
        "evaluators": [{"func": "json", "op": "=", "value": "x"}]}))
    (configs / "web_search.yaml").write_text(
        "kind: llm\nspec:\n  name: llm-1\n  type: openai\n  config:\n    model_name: gpt-4.1\n---\n"
        "kind: agent\nspec:\n  name: ReAct-agent\n  type: react\n  config:\n    llm: llm-1\n    instruction: x\n---\n"
        "kind: benchmark\nspec:\n  description: hostile\n  agent: ReAct-agent\n  tasks:\n    - test/ws[/]x.json\n")
    servers = tmp_path / "mcp.json"
    servers.write_text('{"mcpServers": {}}')
    code = main(["bench", "mcp-universe", "run", "--mcp-universe", str(configs), "--servers", str(servers),
                 "--model", "scripted", "--base-url", "http://127.0.0.1:9/v1", "--simulation",
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code in (0, 1), err[-2000:]  # the task errors (its server has no definition): the run says so, and ends
    assert "ws[/]x" in err  # shown as it is named


LISTEN = """
import socket, sys
out = []
for port in map(int, sys.argv[1:]):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen(1)
        out.append("listens")
    except OSError as exc:
        out.append(f"refused {exc.errno}")
print(" ".join(out), flush=True)
"""


def test_a_server_with_network_cannot_listen_on_a_port_a_host_client_connects_to():
    """A benchmark server's sandbox shares the host's network namespace; Landlock kept its connections to ports 80
    and 443 but not its listeners: it could take any free port of the host's loopback (0.0.0.0 too) — one a local
    model server, a judge or an ``awm env serve --port`` was about to take — and read what the host's client sent
    there (its bearer token, its API key). Now it listens only on its own URL's port, and on one the kernel picks."""
    import subprocess
    import sys

    from awm_engine.bench.mcp_universe.episode import _policy
    from awm_engine.bench.mcp_universe.servers import ServerDef
    from awm_engine.runtime.ports import free_port
    from awm_engine.sandbox import landlock
    from awm_engine.sandbox.launcher import Sandbox

    if landlock.abi_version() < 4:
        import pytest

        pytest.skip("Landlock ABI < 4: no TCP port rules on this kernel")
    victim, own = free_port(), free_port()
    servers = [ServerDef(name="stdio", transport="stdio", command=sys.executable, args=[]),
               ServerDef(name="web", transport="http", command=sys.executable, args=[],
                         url=f"http://127.0.0.1:{own}/mcp")]
    seen = {}
    for server in servers:
        sandbox = Sandbox(_policy(server), "bind-test")
        try:
            done = sandbox.run([sys.executable, "-c", LISTEN, str(victim), str(own), "0"],
                               timeout=60, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        finally:
            sandbox.cleanup()
        seen[server.name] = done.stdout.decode().strip() or done.stderr.decode()[-500:]
    assert seen["stdio"] == "refused 13 refused 13 listens", seen  # a stdio server: only a port the kernel picks
    assert seen["web"] == "refused 13 listens listens", seen  # an HTTP server: its own port too
