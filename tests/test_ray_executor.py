"""The ray executor: environment workers as Ray actors on a local Ray instance give the same results as the
local executor on the same scripted rollouts, stream into the same run directory and resume the same way."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'awm[ray]'; make test installs it)")

from awm_engine.cli import main as awm  # noqa: E402


def records(run_dir):
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {r["id"]: (r["status"], r.get("label"), r.get("reward"), r.get("stop_reason"), r.get("turns"), r.get("error"))
            for r in rows}


def test_ray_results_equal_local_results_and_resume(tmp_path, capsys):
    common = ["eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--scenario",
              "pinecrest_online_store", "--task", "0", "--task", "3", "-k", "2", "--quiet"]
    assert awm([*common, "--out", str(tmp_path / "local")]) == 0
    assert awm([*common, "--executor", "ray", "--workers", "2", "--out", str(tmp_path / "ray")]) == 0
    capsys.readouterr()
    local, remote = records(tmp_path / "local"), records(tmp_path / "ray")
    assert len(local) == 8 and local == remote
    assert all(v[0] == "ok" and v[2] == 1.0 for v in remote.values())
    one = tmp_path / "ray" / "rollouts" / "maple_library_lending" / "3_1"
    assert (one / "final.db").is_file() and (one / "verify.json").is_file()  # databases came back
    config = json.loads((tmp_path / "ray" / "config.json").read_text())
    assert config["executor"] == "ray"
    # resume: drop two lines, the ray executor reruns exactly those
    lines = (tmp_path / "ray" / "results.jsonl").read_text().splitlines()
    (tmp_path / "ray" / "results.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    assert awm(["eval", "run", "--resume", str(tmp_path / "ray"), "--quiet"]) == 0
    assert records(tmp_path / "ray") == local


def dump(path: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(path) as db:
        return list(db.iterdump())


def test_tau2_on_ray_equals_local_and_resumes(tmp_path, capsys):
    """`awm bench tau2 run --executor ray`: the domains are built on the actors from the same data directory; the
    same scripted simulations give the same messages, rewards and databases, and --resume reruns what is missing."""
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.tau2.data import Tau2Data
    from tests.test_tau2_domains import FIXTURE
    from tests.test_tau2_run import gold_plan, scripted

    tasks = Tau2Data(FIXTURE).domain("airline").split_tasks()
    plans = [gold_plan(t, f"R{t.id}", "Done: 255 - on time.") for t in tasks]

    def simulations(run_dir):
        rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
        return {r["id"]: (r["status"], r.get("reward"), r.get("termination_reason"),
                          [(m.get("role"), m.get("content"), [(c.get("name"), c.get("arguments"), c.get("requestor"))
                                                              for c in m.get("tool_calls") or []])
                           for m in r.get("messages") or []]) for r in rows}  # call ids are random

    with FakeLLMServer(scripted(plans)) as server:
        common = ["bench", "tau2", "run", "--tau2-data", str(FIXTURE), "--domain", "airline", "-k", "2",
                  "--model", "scripted", "--base-url", server.url, "--concurrency", "4", "--quiet"]
        assert awm([*common, "--out", str(tmp_path / "local")]) == 0
        assert awm([*common, "--executor", "ray", "--workers", "2", "--out", str(tmp_path / "ray")]) == 0
        local, remote = simulations(tmp_path / "local"), simulations(tmp_path / "ray")
        assert len(local) == 8 and local == remote
        assert all(v[0] == "ok" and v[1] == 1.0 for v in remote.values())
        config = json.loads((tmp_path / "ray" / "config.json").read_text())
        assert config["executor"] == "ray" and config["benchmark"] == "tau2"
        one = json.loads((tmp_path / "ray" / "results.jsonl").read_text().splitlines()[0])
        for name in ("initial.db", "final.db", "simulation.json", "reward.json"):  # the databases came back
            assert (Path(one["run_dir"]) / name).is_file(), name
        for rollout in (tmp_path / "local" / "rollouts" / "airline").iterdir():  # … holding the same rows
            there = tmp_path / "ray" / "rollouts" / "airline" / rollout.name
            assert dump(rollout / "final.db") == dump(there / "final.db"), rollout.name
        lines = (tmp_path / "ray" / "results.jsonl").read_text().splitlines()
        (tmp_path / "ray" / "results.jsonl").write_text("\n".join(lines[:-3]) + "\n")
        assert awm(["bench", "tau2", "run", "--resume", str(tmp_path / "ray"), "--quiet"]) == 0
    capsys.readouterr()
    assert simulations(tmp_path / "ray") == local


def test_episodes_without_a_run_directory_stay_out_of_the_current_directory(tmp_path, monkeypatch):
    """A Ray pool's episodes opened without a run directory keep their databases in the pool's own temporary
    directory (removed at close), as the local pool does — never in ./episodes (seen after a benchmark run)."""
    import asyncio

    from awm_engine.data.catalog import Catalog
    from awm_engine.runtime.ray_pool import RayEnvPool

    monkeypatch.chdir(tmp_path)
    scenario = Catalog.load().get("maple_library_lending")

    async def go():
        async with RayEnvPool(actors=1) as pool:
            episode = await pool.open_episode(scenario)
            await episode.close()
            kept = episode.run_dir
            assert (kept / "final.db").is_file() and pool.workdir in kept.parents
            return pool.workdir

    workdir = asyncio.run(go())
    assert not (tmp_path / "episodes").exists() and not workdir.exists()
