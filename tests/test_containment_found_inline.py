"""What attacking today's served-call path found (handlers run on the worker's event-loop thread, runtime/inline_call.py;
spares the warm service binds to the next server of a scenario, runtime/warm.py), one regression test each.

Every test waits on a condition (an answer, a file, a process's end), never on a pause; in-process cases run in a
fresh Python (the inline path needs the main thread and SIGALRM of its own)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from awm_engine.runtime import warm
from tests.test_inline_call import LOAD_TINY, SLOW, own_tmp
from tests.test_warm import service_dir  # noqa: F401 - the fixture
from tests.tinyenv import make_env_dir

LEFTOVERS = SLOW + '''
import asyncio as _asyncio
import threading as _threading

_release = _threading.Event()  # never set: the work below waits for ever unless its worker ends

@app.post("/api/slow_write", summary="Slow write", description="A def route that writes late.", tags=["bad"], operation_id="slow_write", response_model=NoteList)
def slow_write(req: NoteIn):
    _release.wait(600)
    session = SessionLocal()
    session.add(Note(text=req.text))
    session.commit()
    session.close()
    return NoteList(notes=[])

async def _late_write(text):
    await _asyncio.sleep(600)
    session = SessionLocal()
    session.add(Note(text=text))
    session.commit()
    session.close()

@app.post("/api/waits_for", summary="Waits for", description="Waits for a task with wait_for.", tags=["bad"], operation_id="waits_for", response_model=NoteList)
async def waits_for(req: NoteIn):
    await _asyncio.wait_for(_late_write(req.text), 900)
    return NoteList(notes=[])

async def _spins():
    await _asyncio.sleep(0)
    while True:
        pass

@app.get("/api/waits_for_spin", summary="Waits for a spin", description="Waits for a task that holds the loop.", tags=["bad"], operation_id="waits_for_spin", response_model=NoteList)
async def waits_for_spin():
    await _asyncio.wait_for(_spins(), 900)
    return NoteList(notes=[])
'''

LEFT_BEHIND = SLOW + '''
import asyncio as _asyncio

async def _spins_later():
    while True:
        pass

@app.get("/api/fire_and_forget", summary="Fire and forget", description="Leaves a task behind.", tags=["bad"], operation_id="fire_and_forget", response_model=NoteList)
async def fire_and_forget():
    _asyncio.get_running_loop().create_task(_spins_later())
    return NoteList(notes=[])
'''

WAITS = LOAD_TINY + r'''
async def main():
    episode = Episode(env, run_dir=work / "run")
    result = await episode.call_tool_inline("fire_and_forget", {}, 0.3)
    print("answered", result.is_error, flush=True)
    await asyncio.sleep(3600)  # a worker waiting for its next request

asyncio.run(main())
'''


SCRIPT = LOAD_TINY + r'''
calls = json.loads(sys.argv[2])

async def main():
    out = []
    for way, tool, args, timeout in calls:
        episode = Episode(env, run_dir=work / f"run{len(out)}")
        call = episode.call_tool_inline if way == "inline" else \
            (lambda *a: episode.call_tool(*a, None, "interrupt"))
        result = await call(tool, args, timeout)
        out.append({"text": result.text, "kind": result.error_kind, "stuck": episode.stuck})
    print(json.dumps(out), flush=True)

asyncio.run(main())
os._exit(0)
'''


def run_calls(tmp_path: Path, calls: list) -> subprocess.CompletedProcess:
    data = make_env_dir(tmp_path / "d", {"Tiny": LEFTOVERS})
    return subprocess.run([sys.executable, "-c", SCRIPT, str(data), json.dumps(calls)], capture_output=True,
                          text=True, timeout=180, cwd=Path(__file__).resolve().parents[1], env=own_tmp(tmp_path))


def test_work_a_timed_out_handler_leaves_running_makes_the_episode_stuck(tmp_path):
    """A ``def`` route runs in Starlette's thread pool, and ``asyncio.wait_for`` cancels the task it waits on only on
    ``CancelledError``: stopping the handler at its await left that work going on, free to write after the timeout's
    answer (the worker was never replaced). As on the call-thread path, such work marks the episode stuck (the server
    then replaces the worker)."""
    calls = [[way, tool, {"text": "late"}, 0.3] for tool in ("slow_write", "waits_for") for way in ("thread", "inline")]
    proc = run_calls(tmp_path, calls)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for (way, tool, _, _), got in zip(calls, out):
        assert got == {"text": f"Error calling {tool}: timed out after 0.3s", "kind": "timeout", "stuck": True}, \
            (way, tool, got)


def test_a_handler_waiting_on_a_task_that_holds_the_loop_ends_the_worker(tmp_path):
    """The handler waits (suspended, so the signal is not for it) on a task that spins on the loop: neither the
    asyncio timer nor the watchdog (which looked only at handlers running their own code) ever fired, and the worker
    hung for ever. The watchdog now ends a worker whose call is not over ``STUCK_AFTER`` past its deadline."""
    proc = run_calls(tmp_path, [["inline", "waits_for_spin", {}, 0.3]])
    assert proc.returncode == 3, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "did not stop after its timeout" in proc.stderr


def stuck_call_replaces_the_worker(url: str, out) -> None:
    """A served ``slow_write`` past its 0.3 s timeout: the answer says the worker was restarted, a new worker serves
    the episode from its databases (the late write never made)."""
    from tests.test_containment_found_serve import initialized, rpc
    from tests.test_serve_containment import INIT
    from tests.test_warm import H, until

    with httpx.Client(timeout=60) as client:
        session = client.post(url, json=INIT, headers=H).headers["mcp-session-id"]
        answer = rpc(client, url, session, 2, "slow_write", {"text": "late"}).json()["result"]
    assert answer["isError"] and answer["content"][0]["text"] == \
        "Error calling slow_write: timed out after 0.3s (the environment worker was restarted)", answer
    until(lambda: json.loads((out / "session.json").read_text()).get("worker_restarts") == 1, "a new worker")
    session = initialized(url)
    with httpx.Client(timeout=60) as client:
        listed = json.loads(rpc(client, url, session, 3, "list_notes", {}).json()["result"]["content"][0]["text"])
    assert [n["text"] for n in listed["notes"]] == ["first", "second"]


def test_a_served_def_route_past_its_timeout_gets_its_worker_replaced(tmp_path):
    """End to end: the answer says the worker was restarted, and the server serves the episode from a new worker
    (the old one, with the route's thread in it, is gone before the route could write)."""
    from tests.test_containment_found_serve import notes, serve, stop

    proc, port, out = serve(tmp_path, LEFTOVERS, "--timeout", "0.3", env={"AWM_WARM": "0"})
    try:
        stuck_call_replaces_the_worker(f"http://127.0.0.1:{port}/mcp", out)
    finally:
        stop(proc)
    assert notes(out / "final.db") == ["first", "second"]


YIELDS = SLOW + '''
import asyncio as _asyncio
import sys as _sys

@app.get("/api/yields", summary="Yields", description="Yields to the loop all the time.", tags=["bad"], operation_id="yields", response_model=NoteList)
async def yields():
    try:
        while True:
            await _asyncio.sleep(0)
    except BaseException as exc:
        _sys.stdout.write("stopped by " + type(exc).__name__ + "\\n")
        raise
'''

DRIVER = LOAD_TINY + r'''
# the signal handled in the driver's own frame (as when it lands right after the handler yielded): never raised there
assert inline_call.ready()
slot = inline_call._current = inline_call.Slot(time.monotonic() - 1)
slot.inside = True
driver = inline_call._drive(iter(()), slot)
inline_call._on_alarm(signal.SIGALRM, driver.gi_frame)  # raises here if it would raise in the driver
inline_call._disarm()
inline_call._current = None
driver.close()


async def main():
    episode = Episode(env, run_dir=work / "run")
    texts = collections.Counter()
    for _ in range(int(sys.argv[2])):
        texts[(await episode.call_tool_inline("yields", {}, 0.01)).text] += 1
    import gc
    gc.collect()
    print(json.dumps(texts), flush=True)

asyncio.run(main())
os._exit(0)
'''


def test_a_timeout_never_leaves_the_handler_suspended_outside_its_clock(tmp_path):
    """A handler that yields to the loop all the time: the signal was sometimes handled in the driver itself, just
    after the handler yielded (about 1 in 150 timeouts here), and raised there — the call answered while the handler
    stayed suspended, to be closed later (``GeneratorExit``) outside its clock and after the timeout's answer said
    what it had changed. Every stop now reaches the handler as ``ToolCallTimeout``."""
    data = make_env_dir(tmp_path / "d", {"Tiny": YIELDS})
    calls = 600
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(data), str(calls)], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[1], env=own_tmp(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"Error calling yields: timed out after 0.0s": calls}
    stops = [line for line in lines[:-1] if line.startswith("stopped by ")]
    assert set(stops) <= {"stopped by ToolCallTimeout"}, sorted(set(stops))


# -- spares bound ahead (runtime/warm.py) ------------------------------------------------------------------------


def test_a_bind_with_a_bad_max_age_is_refused_and_leaves_no_sandbox(tmp_path, service_dir):
    """``max_age`` was read only after the spare had loaded the scenario: a bind whose ``max_age`` is not a number
    failed there, outside the clean-up, and left that sandbox running untracked — and, after the service stopped,
    its directory and its size-capped tmpfs mounted under ``spares/``. Such a bind is refused now."""
    from tests.test_warm import _recipe_and_load, log, until

    recipe, load, template = _recipe_and_load(tmp_path)
    warm.ensure_service()
    until(lambda: "ready" in log(service_dir), "a spare")
    for bad in ("soon", None, True, float("nan"), -1, [600]):
        assert warm.bind_next(recipe, load, template, max_age=bad) is False, bad
    assert warm.bind_next(recipe, load, template, max_age=600)
    until(lambda: "bound to" in log(service_dir), "a bound spare")
    assert "binding spare" not in log(service_dir)
    assert len(list((service_dir / "spares").glob(f"*/w*/{load['scenario']}"))) == 1  # the good bind's only


def test_a_newer_bind_while_the_last_one_finishes_ends_it(tmp_path, monkeypatch):
    """A bind (or the service stopping) cancels the bind before it; cancelled while it removed its copy of the
    template (its last await, the load done), the spare it had loaded was neither kept nor ended: a sandbox alive
    and untracked for the rest of the service's life. It is kept before that await now, so the newer bind ends it."""
    import asyncio
    import threading

    from awm_engine.runtime import pool
    from awm_engine.sandbox import safe_fs
    from tests.test_warm import _recipe_and_load

    recipe, load, template = _recipe_and_load(tmp_path)
    request = {"op": "bind", "recipe": recipe, "load": load, "template": template, "max_age": 600.0}
    discarding, release = threading.Event(), threading.Event()
    real_discard = pool._discard

    def slow_discard(home, name):
        if not discarding.is_set():
            discarding.set()
            release.wait(120)
        real_discard(home, name)

    monkeypatch.setattr(pool, "_discard", slow_discard)
    launched: list = []
    real_launch = warm.Service._launch

    async def launch(self):
        worker = await real_launch(self)
        launched.append(worker)
        return worker

    monkeypatch.setattr(warm.Service, "_launch", launch)

    async def main():
        service = warm.Service(warm._private_dir(tmp_path / "svc"), 600)
        service.home_root = warm._own_dir(service.where / warm.SPARES)
        try:
            service._bind(dict(request))
            first = service.binding
            assert await asyncio.to_thread(discarding.wait, 300), "the first bind never loaded"
            service._bind(dict(request))  # cancels the first where it waits for its template copy's removal
            release.set()
            await asyncio.gather(first, return_exceptions=True)
            await service.binding
            assert len(launched) == 2 and service.bound is not None and service.bound[1] is launched[1]
            assert launched[0].proc.poll() is not None, "the first bind's spare was left running"
        finally:
            release.set()
            if service.binding is not None:
                service.binding.cancel()
                await asyncio.gather(service.binding, return_exceptions=True)
            service._unbind()
            for worker in launched:
                if worker.proc is not None and worker.proc.poll() is None:
                    service._end(worker)
            safe_fs.remove_tree(service.home_root)

    asyncio.run(main())


def test_a_task_a_handler_left_that_holds_the_loop_ends_the_worker(tmp_path):
    """The handler answers, the task it left spins on the loop: no call's clock counts it, and the worker hung for
    ever with its clients waiting (on a call thread such a task ran only within a later call, under its timeout).
    The watchdog now ends a worker whose loop the environment's code holds longer than a call may run."""
    data = make_env_dir(tmp_path / "d", {"Tiny": LEFT_BEHIND})
    try:
        proc = subprocess.run([sys.executable, "-c", WAITS, str(data)], capture_output=True, text=True, timeout=180,
                              cwd=Path(__file__).resolve().parents[1], env=own_tmp(tmp_path))
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("the worker hung with its loop held") from exc
    assert proc.stdout.startswith("answered False"), (proc.stdout, proc.stderr[-2000:])
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "held the event loop outside any tool call" in proc.stderr
