"""The worker is where an environment's code runs, so its answers are the environment's to forge: the code can
replace the worker's own functions (``protocol.ok_reply``) or write to its socket. The parent trusted them
(found by attacking it as a hostile environment author would; each test fails while its gap is open):

- a call's traceback is cut to 20,000 characters by the worker, and nowhere else: a forged 15 MB traceback on
  every call went whole into the run's ``events.jsonl`` (and ``calls.jsonl`` under ``awm env serve``) — a few
  hundred calls fill the host's disk under every other run of the same ``awm eval run``;
- a call's fields were used as they came: a text that is not a string (a list of a million lists: 16 MB on the
  wire, hundreds of MB in the parent) went into the ``ToolResult`` and on to whatever read it;
- a ``load`` answer is kept for the scenario's whole life in the pool: a tool whose schema holds millions of empty
  lists (12 MB on the wire, 200 MB in the parent) per scenario added up to gigabytes over an evaluation;
- lines that answer no request were parsed and dropped, as many as the code wrote (20 lines of a million brackets
  kept the parent's event loop, shared by every scenario of an evaluation, busy for seconds).
"""
from __future__ import annotations

import asyncio

from tinyenv import call_once, forged_answers, make_env_dir

from awm_engine.agent.policies import OraclePolicy
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import run_episode
from awm_engine.runtime.pool import EnvPool

MB = 1 << 20

def test_a_forged_traceback_does_not_reach_the_runs_files_whole(tmp_path):
    code = forged_answers('"traceback": "Traceback (most recent call last):\\n" + "T" * 15_000_000, "is_error": True, '
                   '"error_kind": "http_5xx" * 1000, "status": 500')
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Forger": code})])
    solution = {"calls": [{"tool": "list_notes", "arguments": {}}] * 3, "final_answer": "done"}
    outcome = asyncio.run(run_episode(catalog, catalog.get("forger"), 0, OraclePolicy(solution),
                                      run_dir=tmp_path / "run", verify_mode=None))
    assert outcome.rollout is not None and outcome.failure is None, outcome.failure
    events = (tmp_path / "run" / "events.jsonl").stat().st_size
    assert events < 2 * MB, f"three forged answers put {events / MB:.0f} MB into events.jsonl"
    trajectory = (tmp_path / "run" / "trajectory.json").stat().st_size
    assert trajectory < 2 * MB, f"three forged answers put {trajectory / MB:.0f} MB into trajectory.json"


def test_a_forged_answer_of_the_wrong_shape_is_an_error_and_the_worker_is_replaced(tmp_path):
    code = forged_answers('"text": [[] for _ in range(1_000_000)]')
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Forger": code})]).get("forger")
    result, replaced = call_once(scenario, tmp_path / "run")
    assert isinstance(result.text, str), f"the parent kept a forged {type(result.text).__name__} as the result's text"
    assert result.is_error and result.error_kind == "internal" and "malformed" in result.text, result.text[:300]
    assert replaced  # a worker that broke the protocol is not trusted with another call


FORGE_TOOLS = '''
import awm_engine.runtime.protocol as _protocol
_encode = _protocol.encode

def _forged(message):  # the load's own answer is encoded after this import: ok_reply looks encode up then
    result = message.get("result")
    if isinstance(result, dict) and "tools" in result:
        junk = {"name": "junk", "description": "", "inputSchema": {"type": "object", "x": [[] for _ in range(3_000_000)]}}
        message = {**message, "result": {**result, "tools": result["tools"] + [junk]}}
    return _encode(message)

_protocol.encode = _forged
'''

OPEN_ALL = '''
import asyncio, json, sys
from awm_engine.data.catalog import Catalog
from awm_engine.runtime.episode import EnvLoadError
from awm_engine.runtime.pool import EnvPool
catalog = Catalog.load([sys.argv[1]])

async def go():
    opened, refused, episodes = [], [], []
    async with EnvPool(workers=1, spares=0) as pool:
        for scenario in catalog:
            try:
                episodes.append(await pool.open_episode(scenario))
                opened.append(scenario.key)
            except EnvLoadError as exc:
                refused.append(str(exc)[:200])
        import gc
        gc.collect()
        hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:")][0] // 1024
        for episode in episodes:
            await episode.close()
    return opened, refused, hwm

opened, refused, rss = asyncio.run(go())
OUT = {"opened": opened, "refused": refused, "rss_mb": rss}
'''


def test_a_forged_list_of_tools_is_not_kept_by_the_parent(tmp_path):
    """A ``load`` answer is kept for as long as the scenario is loaded (every episode of it holds its tools): three
    scenarios whose code adds a tool with three million empty lists in its schema (12 MB on the wire each) held
    over 600 MB in the parent for the whole run, and an evaluation of many such scenarios holds gigabytes."""
    data = make_env_dir(tmp_path / "d", {f"Forger{i}": FORGE_TOOLS for i in range(3)})
    from test_sandbox_attacks_found import peak_rss_mb

    out = peak_rss_mb(OPEN_ALL, str(data))
    assert out["rss_mb"] < 400, f"the parent kept {out['rss_mb']} MB after loading three forging scenarios: {out}"
    assert out["opened"] == [] and len(out["refused"]) == 3, out
    assert all("malformed answer" in why for why in out["refused"]), out


FLOOD = '''
@app.post("/api/flood", summary="Flood", description="Writes to the worker's channel.", tags=["x"], operation_id="flood")
def flood():
    import json as _json, os as _os, sys as _sys
    fd = int(_sys.argv[_sys.argv.index("--fd") + 1])
    import select as _select
    line = (_json.dumps({"id": 10 ** 9, "ok": True, "result": {"pad": [[] for _ in range(200_000)]}}) + "\\n").encode()
    for _ in range(20):
        view = memoryview(line)
        while view:  # the channel is non-blocking: whole lines, written as the parent reads
            _select.select([], [fd], [])
            try:
                view = view[_os.write(fd, view):]
            except BlockingIOError:
                pass
    return {"flooded": 20}
'''


def test_answers_to_no_request_get_the_worker_replaced(tmp_path):
    """Environment code writes lines to its worker's channel itself: answers to requests never made. The parent
    parsed and dropped each one — up to 16 MiB of JSON each, as fast as the code could write them, on the event loop
    every other scenario's rollouts share. The first such line now gets the worker replaced."""
    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Flooder": FLOOD})]).get("flooder")

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=tmp_path / "run")
            pid = episode.worker.proc.pid
            result = await episode.call_tool("flood", {}, timeout=120)
            replaced = episode.worker.proc.pid != pid
            after = await episode.call_tool("list_notes", {})
            await episode.close()
            return result, replaced, after

    result, replaced, after = asyncio.run(go())
    assert replaced, f"the worker that wrote answers to no request kept serving: {result.text[:200]}"
    assert result.is_error and "answer to no request" in result.text, result.text[:300]
    assert not after.is_error, after.text  # the episode goes on in the new worker, on its database
