"""Containment end to end: an environment and a verifier carrying every payload (tests/attack_env.py), with
canary secrets in the parent's environment. Every attempt fails, in each place untrusted code runs."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from attack_env import make_attack_dir

from awm_engine.data.catalog import Catalog
from awm_engine.sandbox import host
from awm_engine.verify.verification import verify_run

CANARIES = {"OPENAI_API_KEY": "sk-CANARY-openai", "MY_SERVICE_TOKEN": "CANARY-service",
            "LANGCHAIN_API_KEY": "CANARY-langchain", "USER_TOKEN": "CANARY-user"}


def survivors(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(cmdline.read_bytes().decode(errors="replace"))
        except OSError:
            pass
    return found


@pytest.fixture
def attack(tmp_path, monkeypatch):
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # a listener of our own, the only address tried
    listener.listen()
    outside = tmp_path / "outside"
    outside.mkdir()
    templates = Path(os.environ["AWM_CACHE_DIR"]) / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    config = {"targets": [str(outside / "written"), f"/tmp/awm-escape-{uuid.uuid4().hex}",
                          str(Path.home() / f".awm-escape-{uuid.uuid4().hex}")],
              "templates": str(templates), "port": listener.getsockname()[1],
              "marker": "AWM-SURVIVOR-" + uuid.uuid4().hex}
    data = make_attack_dir(tmp_path / "data", config)
    yield data, config
    listener.close()
    for target in config["targets"]:
        Path(target).unlink(missing_ok=True)


def assert_contained(report: dict, config: dict) -> None:
    where = report["where"]
    assert report["secrets"] == [], where
    for target, outcome in report["writes"].items():
        assert outcome != "written", (where, target, host.protections().off.get("writes_confined"))
    for target in config["targets"]:
        assert not Path(target).exists(), (where, target)
    assert report["connect"] != "connected", where
    assert report["alloc"] == "MemoryError", where


def template_digests(config) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in Path(config["templates"]).glob("*.db")}


def test_verifier_payloads_fail(attack, tmp_path):
    data, config = attack
    run = tmp_path / "run"
    run.mkdir()
    for name in ("initial.db", "final.db"):
        sqlite3.connect(run / name).close()
    (run / "trajectory.json").write_text(json.dumps({"scenario": "attack", "task_id": 0, "task": "Do nothing.",
                                                     "trajectory": [], "messages": []}))
    report = asyncio.run(verify_run(run, "code", Catalog.load([data])))
    outcome = report.code
    assert outcome.error is None, outcome.error
    payload = outcome.result["raw_result"]["report"]
    assert_contained(payload, config)
    deadline = time.time() + 5
    while survivors(config["marker"]) and time.time() < deadline:
        time.sleep(0.1)
    assert survivors(config["marker"]) == []


def test_environment_payloads_fail_at_import_and_in_handlers(attack, tmp_path):
    from awm_engine.runtime.pool import EnvPool

    data, config = attack
    scenario = Catalog.load([data]).get("attack")

    async def run():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(scenario, run_dir=tmp_path / "run")
            before = template_digests(config)
            assert before, "the attack scenario's template is in the cache"
            imported = json.loads((await episode.call_tool("import_report", {})).text)["report"]
            handled = json.loads((await episode.call_tool("handler_report", {})).text)["report"]
            second = await pool.open_episode(scenario)  # a later episode starts from an untouched template
            assert not (await second.call_tool("list_notes", {})).is_error
            await second.close()
            await episode.close()
            return imported, handled, before

    imported, handled, before = asyncio.run(run())
    for report in (imported, handled):
        assert_contained(report, config)
    assert template_digests(config) == before
    assert (tmp_path / "run" / "final.db").is_file()  # the episode's databases reached its run directory
    deadline = time.time() + 5
    while survivors(config["marker"]) and time.time() < deadline:
        time.sleep(0.1)
    assert survivors(config["marker"]) == []
