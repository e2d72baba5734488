"""One bad scenario never takes down a run: import-time hangs, killed workers, bursts of opens, queued calls,
module-level state, concurrent parsing — each a clean per-scenario or per-call result."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time

from tinyenv import make_env_dir, slow_write

from awm_engine.data import codeinfo
from awm_engine.data.catalog import Catalog
from awm_engine.runtime.episode import EnvLoadError
from awm_engine.runtime.pool import EnvPool

LOOP_AT_IMPORT = '''
import time as _t
while True:
    _t.sleep(0.01)
'''

SHARED_LIST = '''
SEEN = []

class SeenOut(BaseModel):
    seen: list[str]

@app.post("/api/seen", summary="Remember", description="Remember a word.", tags=["x"], operation_id="remember", response_model=SeenOut)
async def remember(req: NoteIn):
    SEEN.append(req.text)
    return SeenOut(seen=SEEN)
'''

SLOWISH = slow_write(0.2)


async def test_import_that_never_finishes_is_broken_fast_and_the_worker_is_replaced(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Loops": LOOP_AT_IMPORT, "Good": ""})])
    async with EnvPool(workers=1, load_timeout=3) as pool:
        first_pid = pool.workers[0].proc.pid
        started = time.monotonic()
        try:
            await pool.open_episode(catalog.get("loops"))
            raise AssertionError("a looping import must not load")
        except EnvLoadError as exc:
            assert "did not finish loading within 3s" in str(exc)
        assert time.monotonic() - started < 30
        assert pool.workers[0].proc.pid != first_pid and pool.workers[0].alive  # killed and replaced
        started = time.monotonic()
        try:
            await pool.open_episode(catalog.get("loops"))
            raise AssertionError("still broken")
        except EnvLoadError:
            assert time.monotonic() - started < 1  # remembered: fails fast
        good = await pool.open_episode(catalog.get("good"))  # the rest of the run goes on
        assert not (await good.call_tool("list_notes", {})).is_error
        await good.close()


async def test_a_killed_worker_never_hangs_reset_or_calls(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Good": ""})])
    async with EnvPool(workers=1) as pool:
        episode = await pool.open_episode(catalog.get("good"))
        await episode.call_tool("add_note", {"text": "kept"})
        os.kill(pool.workers[0].proc.pid, signal.SIGKILL)
        await asyncio.wait_for(episode.reset(), 60)  # re-attached on a new worker, then reset
        # The signal kills the sandbox's outer process; the worker inside dies with it a moment later, so on a busy
        # machine the reset can reach the worker before its death is seen (and a call in flight when it is seen
        # answers an error: it may have run, and is never retried behind the caller's back).
        result = await _settled_call(episode, "list_notes")
        assert [n["text"] for n in json.loads(result.text)["notes"]] == ["first", "second"]
        await episode.close()


async def _settled_call(episode, name):
    """A call right after a kill can be in flight when the death is seen: that one answers an error, the next must
    not."""
    result = await asyncio.wait_for(episode.call_tool(name, {}), 60)
    if result.is_error:
        assert "exited" in result.text and result.error_kind == "internal", result.text
        result = await asyncio.wait_for(episode.call_tool(name, {}), 60)
    assert not result.is_error, result.text
    return result


async def test_a_call_that_must_re_attach_on_a_dying_worker_answers_and_never_raises(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Good": ""})])
    async with EnvPool(workers=1) as pool:
        first = await pool.open_episode(catalog.get("good"))
        second = await pool.open_episode(catalog.get("good"))
        await second.call_tool("add_note", {"text": "mine"})
        os.kill(pool.workers[0].proc.pid, signal.SIGKILL)
        await _settled_call(first, "list_notes")  # the worker is replaced; `first` is opened again there
        # `second` must be re-opened on the new worker at its next call: that worker is killed too, and the re-open
        # is sent before (or as) its death is seen. It used to raise WorkerError out of call_tool.
        os.kill(pool.workers[0].proc.pid, signal.SIGKILL)
        result = await _settled_call(second, "list_notes")
        assert "mine" in [n["text"] for n in json.loads(result.text)["notes"]]
        await first.close()
        await second.close()


async def test_an_episode_opened_after_a_restart_is_not_opened_again_at_its_first_call(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Good": ""})])
    async with EnvPool(workers=1) as pool:
        episode = await pool.open_episode(catalog.get("good"))
        os.kill(pool.workers[0].proc.pid, signal.SIGKILL)
        await _settled_call(episode, "list_notes")
        worker = pool.workers[0]
        later = await pool.open_episode(catalog.get("good"))
        sent = []
        request = worker.request

        async def counting(op, wait=None, **fields):
            sent.append(op)
            return await request(op, wait, **fields)

        worker.request = counting
        assert not (await later.call_tool("list_notes", {})).is_error
        assert sent == ["call"]  # not an "open" to attach it first: it was opened on this very worker
        await later.close()
        await episode.close()


async def test_a_burst_of_opens_spreads_evenly_over_workers(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Good": ""})])
    scenario = catalog.get("good")
    async with EnvPool(workers=2) as pool:
        episodes = await asyncio.gather(*(pool.open_episode(scenario) for _ in range(40)))
        per_worker = [len(w.episodes) for w in pool.workers if w.scenario == scenario.key]
        assert per_worker == [20, 20], per_worker
        await asyncio.gather(*(e.close() for e in episodes))


async def test_time_queued_behind_other_calls_is_not_a_timeout(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Slow": SLOWISH})])
    scenario = catalog.get("slow")
    async with EnvPool(workers=1, call_timeout=1.0) as pool:
        episodes = await asyncio.gather(*(pool.open_episode(scenario) for _ in range(30)))
        # 30 calls of 0.2 s each on one worker: most wait far longer than 1 s in the queue
        results = await asyncio.gather(*(e.call_tool("slow_write", {"text": f"w{i}"}) for i, e in enumerate(episodes)))
        assert [r.error_kind for r in results if r.is_error] == []
        for e in episodes:
            notes = json.loads((await e.call_tool("list_notes", {})).text)["notes"]
            assert len(notes) == 3  # each episode saw exactly its own write
        await asyncio.gather(*(e.close() for e in episodes))


async def test_module_level_state_is_never_shared_between_episodes(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Stateful": SHARED_LIST})])
    scenario = catalog.get("stateful")
    async with EnvPool(workers=1) as pool:
        a = await pool.open_episode(scenario)
        b = await pool.open_episode(scenario)
        assert not a.shared  # detected: run isolated
        await a.call_tool("remember", {"text": "from a"})
        seen_b = json.loads((await b.call_tool("remember", {"text": "from b"})).text)["seen"]
        assert seen_b == ["from b"]
        await a.reset()
        assert json.loads((await a.call_tool("remember", {"text": "again"})).text)["seen"] == ["again"]
        await a.close()
        await b.close()


def test_parsing_is_serialized_across_threads():
    source = "\n".join(f"def f{i}(x):\n    return [y for y in range(x) if y % {i + 1}]" for i in range(200))
    errors = []

    def work():
        try:
            for _ in range(20):
                codeinfo.parse(source)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_second_eval_run_into_the_same_directory_is_refused(tmp_path, capsys):
    from awm_engine.cli import main as awm
    from awm_engine.eval.batch import lock_run_dir

    out = tmp_path / "run"
    out.mkdir()
    holder = lock_run_dir(out)  # as a first `awm eval run` holds it
    try:
        code = awm(["eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--task", "0",
                    "--out", str(out), "--quiet"])
    finally:
        holder.close()
    assert code == 2 and "being written by another awm process" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists() and not (out / "config.json").exists()


def test_an_unknown_scenario_is_a_usage_error_that_writes_nothing(tmp_path, capsys):
    from awm_engine.cli import main as awm

    out = tmp_path / "run"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", "nope", "--out", str(out), "--quiet"]) == 2
    assert "nope" in capsys.readouterr().err and not out.exists()


def test_awms_own_errors_are_internal_errors_with_their_traceback(tmp_path, monkeypatch):
    import awm_engine.eval.batch as batch
    from awm_engine.eval.batch import EvalConfig, run_evaluation
    from awm_engine.data.paths import sample_envs_dir

    real = batch.run_episode

    async def flaky(catalog, scenario, task_idx, *args, **kwargs):
        if task_idx == 1:
            raise RuntimeError("a bug in awm")
        return await real(catalog, scenario, task_idx, *args, **kwargs)

    monkeypatch.setattr(batch, "run_episode", flaky)
    config = EvalConfig(data_dirs=[str(sample_envs_dir())], scenarios=["maple_library_lending"], tasks=[0, 1, 2],
                        policy="oracle", workers=1)
    meta = asyncio.run(run_evaluation(config, tmp_path / "run"))
    records = {json.loads(line)["task_id"]: json.loads(line)
               for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()}
    assert records[1]["error_kind"] == "internal_error" and "RuntimeError: a bug in awm" in records[1]["traceback"]
    assert records[0]["status"] == records[2]["status"] == "ok"
    assert meta["overall"]["errors"]["internal_error"] == 1


def test_a_tampered_template_is_refused_before_any_copy(tmp_path):
    import pytest

    from awm_engine.db.templates import TemplateCache
    from awm_engine.runtime.inprocess import Episode, LoadedEnv, TemplateTampered

    scenario = Catalog.load([make_env_dir(tmp_path / "d", {"Good": ""})]).get("good")
    template, _ = TemplateCache(tmp_path / "tpl").get(scenario)
    env = LoadedEnv(scenario.key, scenario.code, template, tmp_path / "w")
    Episode(env, tmp_path / "e1").close_now()  # pristine: fine
    with open(env.module_db, "ab") as fh:  # what a handler writing to the module's database would do
        fh.write(b"poison")
    with pytest.raises(TemplateTampered, match="changed since the environment was loaded"):
        Episode(env, tmp_path / "e2")
    env.close()


def test_verifiers_run_on_their_own_threads_and_runs_record_the_sandbox(tmp_path, monkeypatch):
    import threading

    import awm_engine.verify.verification as verification
    from awm_engine.data.paths import sample_envs_dir
    from awm_engine.eval.batch import EvalConfig, run_evaluation

    seen = []
    real = verification.run_verifier

    def spy(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(verification, "run_verifier", spy)
    config = EvalConfig(data_dirs=[str(sample_envs_dir())], scenarios=["maple_library_lending"], tasks=[0],
                        policy="oracle", workers=1)
    meta = asyncio.run(run_evaluation(config, tmp_path / "run"))
    assert seen and all(name.startswith("awm-verify") for name in seen)  # never the default executor
    assert meta["sandbox"]["writes_confined"] is not None and "off" in meta["sandbox"]
    trajectory = json.loads((tmp_path / "run" / "rollouts" / "maple_library_lending" / "0_0" /
                             "trajectory.json").read_text())
    assert trajectory["awm"]["sandbox"] == meta["sandbox"]


async def test_an_episode_opened_right_after_its_worker_died_opens_on_a_new_one(tmp_path):
    """A worker that died after its last episode closed (what that episode's code did to it, a kill) is seen dead
    only when the next ``open`` goes to it: that open used to fail (``EnvLoadError: … worker 0 exited``, seen in
    CI after an episode whose code held file leases). A new episode has nothing on the dead worker: it is opened
    on its replacement."""
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Good": ""})])
    async with EnvPool(workers=1) as pool:
        for _ in range(3):
            episode = await pool.open_episode(catalog.get("good"))
            await episode.close()
            os.kill(pool.workers[0].proc.pid, signal.SIGKILL)  # no await between the kill and the open
            episode = await asyncio.wait_for(pool.open_episode(catalog.get("good")), 120)
            result = await _settled_call(episode, "list_notes")
            assert [n["text"] for n in json.loads(result.text)["notes"]] == ["first", "second"]
            await episode.close()
