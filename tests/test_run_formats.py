"""Versioned run formats: every file is stamped; a newer awm's file is refused with a clear message (engine,
CLI and TUI); a legacy file without a version still reads."""
from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from awm_engine.agent.replay import RunReplay
from awm_engine.cli import main as awm
from awm_engine.data.run_formats import (
    CONFIG,
    EVENTS,
    FORMATS,
    METADATA,
    RESULTS,
    TRAJECTORY,
    EvalConfig,
    NewerFormatError,
    RunFormatError,
    check_format,
)
from awm_engine.eval.report import run_metadata
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runs import list_eval_runs, read_metadata
from awm_engine.verify.verification import verify_run
from awm_tui.app import AwmApp
from awm_tui.screens.evals import EvalScreen
from awm_tui.screens.replay import ReplayScreen


def newer_message(path: Path | str, kind: str) -> str:
    version = FORMATS[kind].version + 2
    return f"{path} was written by a newer awm ({kind} format {version}; this awm reads up to " \
           f"{FORMATS[kind].version}): upgrade awm"


def restamp(data: dict, kind: str, newer: bool) -> dict:
    """``data`` from a newer awm (its version + 2), or as a legacy file (no version at all)."""
    data = {k: v for k, v in data.items() if k != "format_version"}
    return {"format_version": FORMATS[kind].version + 2, **data} if newer else data


def rewrite_json(path: Path, kind: str, newer: bool) -> None:
    path.write_text(json.dumps(restamp(json.loads(path.read_text()), kind, newer)))


def rewrite_jsonl(path: Path, kind: str, newer: bool) -> None:
    lines = [restamp(json.loads(line), kind, newer) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_check_format_per_kind(kind):
    fmt = FORMATS[kind]
    assert check_format({"x": 1}, kind, "f") == {"x": 1}  # legacy: no version
    assert check_format(fmt.stamp({"x": 1}), kind, "f")["format_version"] == fmt.version
    with pytest.raises(NewerFormatError) as exc:
        check_format({"format_version": fmt.version + 2}, kind, f"/runs/x/{fmt.file}")
    assert str(exc.value) == newer_message(f"/runs/x/{fmt.file}", kind)
    assert isinstance(exc.value, ValueError)
    with pytest.raises(RunFormatError, match="not a version number"):
        check_format({"format_version": "two"}, kind, fmt.file)


def test_rollout_files_are_stamped_and_a_newer_one_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    assert awm(["agent", "run", "--scenario", "maple_library_lending", "--task", "0", "--policy", "oracle",
                "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert json.loads((run / "trajectory.json").read_text())["format_version"] == TRAJECTORY.version
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert events and all(e["format_version"] == EVENTS.version for e in events)
    steps = [(s.tool, s.arguments) for s in RunReplay(run).steps]

    # trajectory.json from a newer awm: replay and verification refuse it, the CLI says so and exits 2
    newer = tmp_path / "newer"
    shutil.copytree(run, newer)
    rewrite_json(newer / "trajectory.json", "trajectory", newer=True)
    message = newer_message(newer / "trajectory.json", "trajectory")
    with pytest.raises(NewerFormatError, match="upgrade awm") as exc:
        RunReplay(newer)
    assert str(exc.value) == message
    with pytest.raises(NewerFormatError):
        asyncio.run(verify_run(newer, "code"))
    for argv in (["replay", str(newer)], ["verify", str(newer), "--mode", "code"]):
        assert awm(argv) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert "error:" in err and "was written by a newer awm (trajectory format" in err and "upgrade awm" in err

    # events.jsonl with a newer line
    newer_events = tmp_path / "newer_events"
    shutil.copytree(run, newer_events)
    rewrite_jsonl(newer_events / "events.jsonl", "events", newer=True)
    with pytest.raises(NewerFormatError) as exc:
        RunReplay(newer_events)
    assert str(exc.value) == newer_message(newer_events / "events.jsonl", "events")

    # legacy files without a version read as before
    legacy = tmp_path / "legacy"
    shutil.copytree(run, legacy)
    rewrite_json(legacy / "trajectory.json", "trajectory", newer=False)
    rewrite_jsonl(legacy / "events.jsonl", "events", newer=False)
    assert [(s.tool, s.arguments) for s in RunReplay(legacy).steps] == steps
    assert awm(["verify", str(legacy), "--mode", "code", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["label"] == "complete"


def test_evaluation_files_are_stamped_and_a_newer_one_is_refused(tmp_path, capsys):
    root = tmp_path / "eval"
    run = root / "run"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", "maple_library_lending", "--task", "0",
                "--task", "1", "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert json.loads((run / "config.json").read_text())["format_version"] == CONFIG.version
    assert json.loads((run / "metadata.json").read_text())["format_version"] == METADATA.version
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(r["format_version"] == RESULTS.version for r in lines)
    expected = run_metadata(run)["overall"]

    def copy(name: str) -> Path:
        dst = root / name
        shutil.copytree(run, dst)
        return dst

    # legacy: no version anywhere; every reader works
    legacy = copy("legacy")
    rewrite_json(legacy / "config.json", "config", newer=False)
    rewrite_json(legacy / "metadata.json", "metadata", newer=False)
    rewrite_jsonl(legacy / "results.jsonl", "results", newer=False)
    assert EvalConfig.load(legacy).policy == "oracle" and read_metadata(legacy)["rollouts"] == 2
    assert awm(["eval", "report", str(legacy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"] == expected

    # config.json from a newer awm: EvalConfig.from_dict, report, resume and list refuse it
    newer_config = copy("newer_config")
    rewrite_json(newer_config / "config.json", "config", newer=True)
    message = newer_message(newer_config / "config.json", "config")
    with pytest.raises(NewerFormatError) as exc:
        EvalConfig.load(newer_config)
    assert str(exc.value) == message
    with pytest.raises(NewerFormatError):
        EvalConfig.from_dict(json.loads((newer_config / "config.json").read_text()))
    for argv in (["eval", "report", str(newer_config)], ["eval", "run", "--resume", str(newer_config), "--quiet"],
                 ["eval", "list", str(root)]):
        assert awm(argv) == 2, argv
        err = " ".join(capsys.readouterr().err.split())
        assert "error:" in err and "newer awm (config format" in err
    shutil.rmtree(newer_config)

    # metadata.json from a newer awm
    newer_meta = copy("newer_meta")
    rewrite_json(newer_meta / "metadata.json", "metadata", newer=True)
    with pytest.raises(NewerFormatError) as exc:
        read_metadata(newer_meta)
    assert str(exc.value) == newer_message(newer_meta / "metadata.json", "metadata")
    assert awm(["eval", "report", str(newer_meta)]) == 2
    assert "newer awm (metadata format" in " ".join(capsys.readouterr().err.split())
    with pytest.raises(NewerFormatError):
        list_eval_runs(root)
    shutil.rmtree(newer_meta)

    # a results line from a newer awm: the index stops there; resume leaves the file alone
    newer_results = copy("newer_results")
    with open(newer_results / "results.jsonl", "a") as fh:
        fh.write(json.dumps({"format_version": RESULTS.version + 2, "id": "maple_library_lending/2/0"}) + "\n")
    before = (newer_results / "results.jsonl").read_text()
    with pytest.raises(NewerFormatError) as exc:
        ResultsIndex(newer_results / "results.jsonl").refresh()
    assert str(exc.value) == newer_message(newer_results / "results.jsonl", "results")
    for argv in (["eval", "report", str(newer_results)], ["eval", "run", "--resume", str(newer_results), "--quiet"]):
        assert awm(argv) == 2
        assert "newer awm (results format" in " ".join(capsys.readouterr().err.split())
    assert (newer_results / "results.jsonl").read_text() == before


def _fake_eval_run(path: Path, config_version: int | None = None) -> None:
    path.mkdir(parents=True)
    config = EvalConfig(data_dirs=[], policy="oracle").to_dict()
    if config_version is not None:
        config["format_version"] = config_version
    (path / "config.json").write_text(json.dumps(config))
    (path / "results.jsonl").write_text("")


async def test_the_tui_shows_a_newer_run_as_a_notification(tmp_path):
    _fake_eval_run(tmp_path / "eval" / "newer", CONFIG.version + 2)
    _fake_eval_run(tmp_path / "eval" / "ok")
    replay = tmp_path / "agents" / "newer"
    replay.mkdir(parents=True)
    (replay / "trajectory.json").write_text(json.dumps({"format_version": TRAJECTORY.version + 2}))
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        app.open_replay(replay)
        await pilot.pause()
        assert not isinstance(app.screen, ReplayScreen)
        app.open_evaluations()
        await pilot.pause(0.3)
        assert isinstance(app.screen, EvalScreen)
        assert [r.name for r in app.screen.runs] == ["ok"]  # the newer run is left out of the list
        messages = [n.message for n in app._notifications]
        assert newer_message(replay / "trajectory.json", "trajectory") in messages
        assert newer_message(tmp_path / "eval" / "newer" / "config.json", "config") in messages
        app.screen.open_run(tmp_path / "eval" / "newer")  # e.g. awm-tui --eval on it
        await pilot.pause()
        assert app.screen.view.path.name == "ok"
        await app.workers.wait_for_complete()
