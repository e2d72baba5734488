"""Rollout identity in training exports (issue 28, item 2): ids are ``<run>/<scenario>/<task>/<sample>``, so the
rollouts of several evaluation runs exported together never share an id or a GRPO group, and an export that would
hold one id twice is refused."""
from __future__ import annotations

import json
import shutil

from awm_engine.cli import main as awm
from awm_engine.train.export import read_records

SCENARIO = "maple_library_lending"


def eval_run(out):
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", SCENARIO, "--task", "0", "--task", "3", "-k", "2",
                "--workers", "1", "--quiet", "--out", str(out)]) == 0


def test_runs_exported_together_keep_their_own_ids_and_groups(tmp_path, capsys):
    runs = tmp_path / "runs"
    eval_run(runs / "first")
    eval_run(runs / "second")
    capsys.readouterr()
    out = tmp_path / "s.jsonl"
    assert awm(["train", "export", str(runs), "--out", str(out), "--grpo", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rollouts"] == 8 and summary["groups"] == 4
    stats = {g["group_id"]: g for g in summary["group_stats"]}
    assert sorted(stats) == sorted(f"{run}/{SCENARIO}/{t}" for run in ("first", "second") for t in (0, 3))
    assert all(g["size"] == 2 and g["rewards"] == [1.0, 1.0] for g in stats.values())
    for gid, g in stats.items():  # a group holds the two samples of its own run's task
        run, _, task = gid.split("/")
        assert sorted(g["advantages"]) == [f"{run}/{SCENARIO}/{task}/{k}" for k in (0, 1)]
    rows = read_records(out)
    assert len({r["id"] for r in rows}) == len(rows) == summary["samples"] == 2 * (3 * 2 + 4 * 2)
    assert {r["rollout_id"] for r in rows} == {f"{run}/{SCENARIO}/{t}/{k}" for run in ("first", "second")
                                               for t in (0, 3) for k in (0, 1)}
    for r in rows:
        assert r["group_id"] == r["rollout_id"].rsplit("/", 1)[0] and r["run_id"] == r["rollout_id"].split("/")[0]
        assert r["extra_info"]["group_id"] == r["group_id"]
    # one run exported on its own keeps the ids it has in the folder; so does one of its rollouts
    assert awm(["train", "export", str(runs / "first"), "--out", str(tmp_path / "one.jsonl")]) == 0
    one = read_records(tmp_path / "one.jsonl")
    assert {r["id"] for r in one} == {r["id"] for r in rows if r["run_id"] == "first"}
    rollout = runs / "first" / "rollouts" / SCENARIO / "3_1"
    assert awm(["train", "export", str(rollout), "--out", str(tmp_path / "r.jsonl"), "--grpo"]) == 0
    assert {r["rollout_id"] for r in read_records(tmp_path / "r.jsonl")} == {f"first/{SCENARIO}/3/1"}


def test_an_export_holding_one_rollout_id_twice_is_refused(tmp_path, capsys):
    eval_run(tmp_path / "a" / "run")
    shutil.copytree(tmp_path / "a" / "run", tmp_path / "b" / "run")  # another run with the same name
    capsys.readouterr()
    for args in ([str(tmp_path / "a" / "run"), str(tmp_path / "a" / "run")],
                 [str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run")]):
        assert awm(["train", "export", *args, "--out", str(tmp_path / "s.jsonl"), "--grpo"]) == 2
        err = capsys.readouterr().err
        assert "duplicate rollout id" in err and f"'run/{SCENARIO}/" in err
        assert not (tmp_path / "s.jsonl").exists()
    # the folder holding both: their paths below it tell them apart, and each reads its own rollouts
    assert awm(["train", "export", str(tmp_path), "--out", str(tmp_path / "s.jsonl"), "--grpo", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["groups"] == 4 and f"a/run/{SCENARIO}/0" in summary["zero_variance_groups"]
    rows = read_records(tmp_path / "s.jsonl")
    assert {r["extra_info"]["run_dir"].split("/")[-5] for r in rows} == {"a", "b"}
