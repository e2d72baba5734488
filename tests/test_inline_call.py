"""Served calls run on the worker's event-loop thread (runtime/inline_call.py): same results as the call-thread
path, and every way a handler can overrun its timeout is stopped, with the loop's own code never interrupted.

Each case runs in a fresh Python (the inline path needs the main thread and SIGALRM of its own)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.test_serve_containment import INIT
from tests.tinyenv import make_env_dir

SLOW = '''
import time as _time

@app.get("/api/sleepy", summary="Sleep", description="Sleeps in C.", tags=["bad"], operation_id="sleepy", response_model=NoteList)
async def sleepy():
    _time.sleep(30)
    return NoteList(notes=[])

@app.get("/api/spin", summary="Spin", description="Loops in Python.", tags=["bad"], operation_id="spin", response_model=NoteList)
async def spin():
    while True:
        pass

@app.get("/api/sync_sleepy", summary="Sync sleep", description="A def route.", tags=["bad"], operation_id="sync_sleepy", response_model=NoteList)
def sync_sleepy():
    _time.sleep(3)
    return NoteList(notes=[])

@app.get("/api/awaits", summary="Awaits", description="Awaits a sleep.", tags=["bad"], operation_id="awaits", response_model=NoteList)
async def awaits():
    import asyncio
    await asyncio.sleep(30)
    return NoteList(notes=[])

@app.get("/api/stubborn", summary="Stubborn", description="Swallows every interruption.", tags=["bad"], operation_id="stubborn", response_model=NoteList)
async def stubborn():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass

@app.post("/api/write_then_spin", summary="Write, then spin", description="Commits, then loops.", tags=["bad"], operation_id="write_then_spin", response_model=NoteList)
async def write_then_spin(req: NoteIn):
    session = SessionLocal()
    session.add(Note(text=req.text))
    session.commit()
    session.close()
    while True:
        pass
'''

LOAD_TINY = r'''
import asyncio, collections, json, os, signal, sys, tempfile, time
from pathlib import Path
from awm_engine.data.catalog import Catalog
from awm_engine.db.templates import TemplateCache
from awm_engine.runtime import inline_call
from awm_engine.runtime.inprocess import Episode, LoadedEnv

scenario = Catalog.load([sys.argv[1]]).get("tiny")
work = Path(tempfile.mkdtemp())
template, _ = TemplateCache(work / "tpl").get(scenario)
env = LoadedEnv(scenario.key, scenario.code, template, work / "w")
'''  # the start of a child script: the tiny scenario (data directory: argv[1]) loaded in a fresh Python


SCRIPT = LOAD_TINY + r'''
calls = json.loads(sys.argv[2])

async def main():
    out = []
    for way, tool, args, timeout in calls:
        episode = Episode(env, run_dir=work / f"run{len(out)}")
        call = episode.call_tool_inline if way == "inline" else \
            (lambda *a: episode.call_tool(*a, None, "interrupt"))
        ticks = 0
        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1
        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        result = await call(tool, args, timeout)
        took = time.monotonic() - started
        ticker.cancel()
        out.append({"text": result.text, "is_error": result.is_error, "kind": result.error_kind, "took": took,
                    "ticks": ticks, "inline_ready": inline_call.ready(), "calls": episode.calls})
        episode.close_now()
    print(json.dumps(out), flush=True)

asyncio.run(main())
os._exit(0)  # as the worker: handlers the call-thread path could not stop (a C sleep) are not waited for
'''


def own_tmp(tmp_path: Path) -> dict[str, str]:
    """The child's temporary directory: it ends with ``os._exit`` (as the worker does), so what it made there
    (the sandbox's views) is not removed by it."""
    (tmp_path / "t").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "t")}


def run_calls(tmp_path: Path, calls: list, timeout: float = 120) -> subprocess.CompletedProcess:
    data = make_env_dir(tmp_path / "d", {"Tiny": SLOW})
    return subprocess.run([sys.executable, "-c", SCRIPT, str(data), json.dumps(calls)], capture_output=True,
                          text=True, timeout=timeout, cwd=Path(__file__).resolve().parents[1], env=own_tmp(tmp_path))


def outcomes(proc: subprocess.CompletedProcess) -> list[dict]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


CASES = [
    ("list_notes", {}, 10.0),
    ("get_note", {"note_id": 1}, 10.0),
    ("get_note", {"note_id": 99}, 10.0),  # the handler raises: 500
    ("get_note", {"note_id": "x"}, 10.0),  # invalid arguments
    ("add_note", {"text": "hé \u2603"}, 10.0),
    ("no_such_tool", {}, 10.0),
    ("sleepy", {}, 0.5),
    ("spin", {}, 0.5),
    ("sync_sleepy", {}, 0.5),
    ("awaits", {}, 0.5),
]


def test_inline_results_equal_the_call_thread_path(tmp_path):
    """Every kind of answer — results, HTTP errors, validation, unknown tools, each way of overrunning the
    timeout — is the same text, error flag and kind on both paths."""
    calls = [[way, *case] for case in CASES for way in ("thread", "inline")]
    out = outcomes(run_calls(tmp_path, calls))
    for i in range(0, len(out), 2):
        thread, inline = out[i], out[i + 1]
        assert inline["inline_ready"]
        assert (inline["text"], inline["is_error"], inline["kind"]) == \
            (thread["text"], thread["is_error"], thread["kind"]), CASES[i // 2]
    by_tool = {case[0]: out[2 * i + 1] for i, case in enumerate(CASES)}
    for tool in ("sleepy", "spin", "sync_sleepy", "awaits"):
        assert by_tool[tool]["kind"] == "timeout", by_tool[tool]
        assert by_tool[tool]["text"] == f"Error calling {tool}: timed out after 0.5s"
        assert by_tool[tool]["took"] < 5, by_tool[tool]  # stopped, not waited for (sleepy sleeps 30 s)
    assert by_tool["awaits"]["ticks"] > 0  # a handler that awaits lets the loop run meanwhile
    assert not by_tool["list_notes"]["is_error"] and by_tool["list_notes"]["calls"] == 1


def test_a_write_before_the_timeout_is_said(tmp_path):
    out = outcomes(run_calls(tmp_path, [["inline", "write_then_spin", {"text": "x"}, 0.5]]))
    assert out[0]["text"] == "Error calling write_then_spin: timed out after 0.5s; it had already changed the database"


def test_the_loop_goes_on_after_many_timeouts(tmp_path):
    """Stopped handlers leave nothing behind on the loop's thread: the next calls are answered normally."""
    calls = [["inline", "spin", {}, 0.2], ["inline", "sleepy", {}, 0.2]] * 3 + [["inline", "list_notes", {}, 5.0]]
    out = outcomes(run_calls(tmp_path, calls))
    assert [o["kind"] for o in out[:-1]] == ["timeout"] * 6
    assert not out[-1]["is_error"] and json.loads(out[-1]["text"])["notes"][0]["text"] == "first"


def test_a_handler_that_will_not_stop_ends_the_worker(tmp_path):
    """One that swallows every interruption is given up on: the process ends (exit 3, a line in its log), so that
    the server replaces it — never a worker whose loop is held for ever."""
    proc = run_calls(tmp_path, [["inline", "stubborn", {}, 0.3]])
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "did not stop after its timeout" in proc.stderr


@pytest.mark.parametrize("where", ["thread", "sigalrm"])
def test_falls_back_to_the_call_thread_where_inline_cannot_run(tmp_path, where):
    """Not on the main thread, or SIGALRM taken by someone else: the call-thread path, same answer."""
    data = make_env_dir(tmp_path / "d", {"Tiny": SLOW})
    script = textwrap.dedent(f'''
        import asyncio, json, signal, sys, tempfile, threading
        from pathlib import Path
        from awm_engine.data.catalog import Catalog
        from awm_engine.db.templates import TemplateCache
        from awm_engine.runtime.inprocess import Episode, LoadedEnv
        from awm_engine.runtime import inline_call
        scenario = Catalog.load([{str(data)!r}]).get("tiny")
        work = Path(tempfile.mkdtemp())
        template, _ = TemplateCache(work / "tpl").get(scenario)
        env = LoadedEnv(scenario.key, scenario.code, template, work / "w")
        episode = Episode(env, run_dir=work / "run")
        out = {{}}
        async def main():
            r = await episode.call_tool_inline("spin", {{}}, 0.3)
            out["spin"] = r.text
            r = await episode.call_tool_inline("list_notes", {{}}, 5)
            out["list"] = r.is_error
            out["ready"] = inline_call.ready()
        if {where!r} == "sigalrm":
            signal.signal(signal.SIGALRM, lambda *a: None)
            asyncio.run(main())
        else:
            t = threading.Thread(target=lambda: asyncio.run(main()))
            t.start(); t.join()
        print(json.dumps(out), flush=True)
        import os; os._exit(0)
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1], env=own_tmp(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"spin": "Error calling spin: timed out after 0.3s", "list": False, "ready": False}


def test_served_calls_overrunning_their_timeout(tmp_path):
    """End to end through ``awm env serve --timeout``: a handler spinning in Python and one sleeping in C are
    stopped and answered with the timeout's text; one that will not stop gets its worker replaced (the client's
    request ends unanswered, the server goes on with a new worker on the same databases)."""
    from tests.test_containment_found_serve import initialized, rpc, serve, stop
    from tests.test_warm import H, until

    proc, port, out = serve(tmp_path, SLOW, "--timeout", "0.5", env={"AWM_WARM": "0"})
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with httpx.Client(timeout=60) as client:
            session = client.post(url, json=INIT, headers=H).headers["mcp-session-id"]
            # (a def route past its timeout gets its worker replaced: test_containment_found_inline.py)
            for rid, tool in enumerate(("spin", "sleepy", "awaits"), 2):
                answer = rpc(client, url, session, rid, tool, {}).json()["result"]
                assert answer["isError"] and answer["content"][0]["text"] == \
                    f"Error calling {tool}: timed out after 0.5s", answer
            assert not rpc(client, url, session, 9, "add_note", {"text": "kept"}).json()["result"]["isError"]
            try:
                rpc(client, url, session, 10, "stubborn", {})
            except httpx.HTTPError:
                pass
        until(lambda: json.loads((out / "session.json").read_text()).get("worker_restarts") == 1, "a new worker")
        session = initialized(url)
        with httpx.Client(timeout=60) as client:
            listed = json.loads(rpc(client, url, session, 11, "list_notes", {}).json()["result"]["content"][0]["text"])
        assert [n["text"] for n in listed["notes"]] == ["first", "second", "kept"]
    finally:
        err = stop(proc)
    assert "did not stop after its timeout" in (out / "server.log").read_text()
    assert "starting a new one" in err


def test_a_cancelled_call_is_cancelled_not_timed_out(tmp_path):
    """A task cancelled while its handler awaits (the client went, the server stops) gets its cancellation, not a
    timeout result; the next call runs inline again."""
    data = make_env_dir(tmp_path / "d", {"Tiny": SLOW})
    script = textwrap.dedent(f'''
        import asyncio, json, tempfile
        from pathlib import Path
        from awm_engine.data.catalog import Catalog
        from awm_engine.db.templates import TemplateCache
        from awm_engine.runtime.inprocess import Episode, LoadedEnv
        from awm_engine.runtime import inline_call
        scenario = Catalog.load([{str(data)!r}]).get("tiny")
        work = Path(tempfile.mkdtemp())
        template, _ = TemplateCache(work / "tpl").get(scenario)
        episode = Episode(LoadedEnv(scenario.key, scenario.code, template, work / "w"), run_dir=work / "run")
        out = {{}}
        async def main():
            task = asyncio.create_task(episode.call_tool_inline("awaits", {{}}, 10.0))
            while not inline_call.running():
                await asyncio.sleep(0.01)
            task.cancel()
            try:
                await task
                out["got"] = "a result"
            except asyncio.CancelledError:
                out["got"] = "cancelled"
            out["after"] = (await episode.call_tool_inline("list_notes", {{}}, 5)).is_error
            out["running"] = inline_call.running()
        asyncio.run(main())
        print(json.dumps(out), flush=True)
        import os; os._exit(0)
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1], env=own_tmp(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"got": "cancelled", "after": False, "running": False}
