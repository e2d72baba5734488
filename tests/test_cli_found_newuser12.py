"""What new user 12 found running every verb as a user runs it, on data the authors did not write (one test per
finding; each failed before its fix)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awm_engine.agent.scripted_llm import FakeLLMServer
from tests.conftest import AWM_REAL

ROOT = Path(__file__).resolve().parent.parent


def _awm_process(*argv: str) -> subprocess.Popen:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "awm_engine.cli", *argv], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(condition, what: str, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def _signal_at_first_request(llm, proc, signum) -> tuple[str, str]:
    """Send ``signum`` to ``proc`` once the scripted model has its first request; what it printed (killed if it
    does not end)."""
    try:
        _wait_for(lambda: llm.requests or proc.poll() is not None, "the first model request")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signum)
        return proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_ctrl_c_in_eval_run_says_interrupted_before_where_the_finished_rollouts_are(tmp_path):
    """SIGINT to a running `awm eval run`: it printed `: finished rollouts are in …/results.jsonl; continue with: …`
    — the message began with a bare colon, since an empty KeyboardInterrupt is truthy (`exc or 'interrupted'`)."""
    script = {"responses": [{"content": "All done.", "delay": 600}]}  # the model never answers before the Ctrl-C
    with FakeLLMServer(script) as llm:
        proc = _awm_process("eval", "run", "--policy", "llm", "--model", "scripted", "--base-url", llm.url,
                            "--scenario", "maple_library_lending", "--task", "3", "--out", str(tmp_path / "run"))
        out, err = _signal_at_first_request(llm, proc, signal.SIGINT)
    assert proc.returncode == 130, err
    assert "interrupted: finished rollouts are in" in err, err
    assert "\n: finished" not in "\n" + err, err


def test_eval_run_on_a_data_directory_with_no_scenario_is_refused_and_creates_nothing(tmp_path):
    """`awm eval run --data /nonexistent` (or an empty directory): every other verb refuses with exit 2 `no scenarios
    found in …`; eval run ran 0 rollouts, created the run directory (so a corrected retry with the same --out was
    refused: `already holds a run`) and exited 1, never saying the directory does not exist."""
    from test_exit_codes import awm

    (tmp_path / "empty").mkdir()
    for data in (tmp_path / "nonexistent", tmp_path / "empty"):
        out = tmp_path / f"run-{data.name}"
        done = awm("eval", "run", "--data", str(data), "--policy", "immediate", "--out", str(out), "--quiet")
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"no scenarios found in {data}" in done.stderr, done.stderr
        assert not out.exists()


def test_eval_run_on_a_truncated_download_says_what_it_leaves_out(tmp_path):
    """The real AgentWorldModel data with gen_tasks.jsonl and gen_envs.jsonl cut short (a truncated download): `awm
    eval run` over all scenarios quietly evaluated two of the three — no warning on the terminal or in
    metadata.json's `warnings`, while `awm catalog list` prints the broken lines."""
    from test_exit_codes import awm

    if not AWM_REAL.is_dir():
        pytest.skip(f"the real AWM data is not at {AWM_REAL}")
    data = tmp_path / "data"
    data.mkdir()
    for path in AWM_REAL.glob("*.jsonl"):
        text = path.read_bytes()
        cut = path.name in ("gen_tasks.jsonl", "gen_envs.jsonl")
        (data / path.name).write_bytes(text[:len(text) - len(text) // 5] if cut else text)
    out = tmp_path / "run"
    done = awm("eval", "run", "--data", str(data), "--policy", "immediate", "--verify", "none", "--out", str(out),
               "--quiet")
    assert done.returncode == 0, done.stderr
    warnings = json.loads((out / "metadata.json").read_text())["warnings"]
    assert any("of the data could not be read" in w and "gen_tasks.jsonl:3: invalid JSON" in w for w in warnings), warnings
    assert any("selected scenarios have no task (gofundme)" in w for w in warnings), warnings
    assert "selected scenarios have no task (gofundme)" in done.stderr, done.stderr


def test_sigterm_to_bench_mcp_universe_run_cleans_up_and_says_how_to_resume(tmp_path):
    """SIGTERM to `awm bench mcp-universe run` (the way a job scheduler stops it): the verb ran under a bare
    asyncio.run, so the signal killed it on the spot — no message, no resume command, its sandbox view directory left
    behind — where every other batch verb cleans up as on Ctrl-C and exits 143 saying so."""
    import tempfile

    from awm_engine.sandbox import owned

    configs = AWM_REAL.parent / "mcp-universe" / "configs"
    if not (configs / "browser_automation.yaml").is_file():
        pytest.skip(f"MCP-Universe configs not found at {configs}")
    standins = str(Path(__file__).with_name("mcpu_standins.py"))
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {name: {"command": sys.executable, "args": [standins, name]}
                                                   for name in ("playwright", "date")}}))
    out = tmp_path / "run"
    with FakeLLMServer({"responses": [{"content": "x", "delay": 600}]}) as llm:  # never answers before the signal
        proc = _awm_process("bench", "mcp-universe", "run", "--mcp-universe", str(configs), "--task",
                            "playwright_sports_task_0001", "--servers", str(servers), "--model", "scripted",
                            "--base-url", llm.url, "--simulation", "--out", str(out))
        _, err = _signal_at_first_request(llm, proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    assert "terminated: finished tasks are in" in err and f"--resume {out}" in err, err
    left = [path for path in Path(tempfile.gettempdir()).glob("awm_*")
            if path.name.startswith(owned.PREFIXES) and not path.is_symlink()
            and (owned.owner_of(path) or {}).get("pid") == str(proc.pid)]
    assert not left, left


def test_a_verifier_row_with_a_negative_task_idx_is_named_as_one_beyond_the_tasks_is(tmp_path):
    """A gen_verifier.jsonl row of the real data edited to `task_idx: -1`: the task it verified lost its verifier
    (`code verifiers 9/10`) and `awm catalog list` said nothing, while `task_idx: 99` was warned about (`beyond the 10
    tasks`). Reference solutions outside the tasks were never named."""
    from test_exit_codes import awm

    if not AWM_REAL.is_dir():
        pytest.skip(f"the real AWM data is not at {AWM_REAL}")
    data = tmp_path / "data"
    data.mkdir()
    for path in AWM_REAL.glob("*.jsonl"):
        (data / path.name).write_bytes(path.read_bytes())
    rows = [json.loads(line) for line in (data / "gen_verifier.jsonl").read_text().splitlines()]
    rows[0]["task_idx"], rows[1]["task_idx"] = -1, 99
    (data / "gen_verifier.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    scenario = rows[0]["scenario"]
    listed = awm("catalog", "list", "--data", str(data))
    assert listed.returncode == 0, listed.stderr
    assert "code verifiers for tasks [-1, 99] outside the 10 tasks (0–9)" in listed.stderr, listed.stderr
    (data / "reference_solutions.jsonl").write_text(json.dumps({"scenario": scenario, "task_idx": -2,
                                                                "calls": []}) + "\n")
    listed = awm("catalog", "list", "--data", str(data))
    assert "reference solutions for tasks [-2] outside the 10 tasks" in listed.stderr, listed.stderr


@pytest.mark.parametrize("verb", [["replay", "{run}", "--step", "1"], ["replay", "{run}", "--json"],
                                  ["catalog", "show", "maple_library_lending"]], ids=["replay-step", "replay-json",
                                                                                     "catalog-show"])
def test_a_reader_that_stops_early_gets_no_traceback(tmp_path, verb):
    """`awm replay RUN --step 1 | head -5`: once `head` had its lines, awm died with a 30-line BrokenPipeError
    traceback (plain lines and JSON go through sys.stdout; only what rich prints exited quietly). Here the reader
    closes the pipe before awm writes anything: every write after it fails as it does behind `head`."""
    from test_exit_codes import awm

    run = tmp_path / "run"
    done = awm("agent", "run", "--scenario", "maple_library_lending", "--task", "3", "--policy", "oracle", "--out",
               str(run), "--quiet")
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen([sys.executable, "-m", "awm_engine.cli", *[a.format(run=run) for a in verb]], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read()
    proc.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 1, err


def test_the_demo_never_plays_against_another_server_on_its_port(tmp_path):
    """`python scripts/scripted_model_demo.py --mode meta` while another scripted server held port 8765 (one from the
    τ² demo of docs/tau2.md, answering `###STOP###`): its own `awm fake-llm` exited 3 (port busy), but the demo's
    readiness probe got an answer from the other server, played the task against it and printed `verdict: others
    (reward 0.0)` — a broken sample environment, to a new user. Now it waits for its own server's URL."""
    other = {"responses": [{"content": "Thanks, that is all. ###STOP###"}]}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with FakeLLMServer(other) as foreign:
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "scripted_model_demo.py"), "--mode", "meta",
                               "--port", str(foreign.port)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert not foreign.requests, "the demo talked to another process's server"
    assert done.returncode == 3, done.stdout + done.stderr
    assert "awm fake-llm exited 3" in done.stderr
    assert "already in use" in (tmp_path / "fake-llm.log").read_text()
    assert not (tmp_path / "runs" / "scripted-meta").exists()


def test_the_demo_takes_any_free_port(tmp_path):
    """`--port 0` (the scripted server's own choice, printed in its log) was refused by the demo's help text
    (`must be a fixed port, not 0`): the URL it probed was port 0's."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "scripted_model_demo.py"), "--mode", "native",
                           "--port", "0"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "verdict: complete (reward 1.0)" in done.stdout


def test_a_broken_pipe_of_the_verbs_own_is_not_taken_for_a_reader_that_stopped(tmp_path):
    """Only a stdout nobody reads is quiet: a ``BrokenPipeError`` of another pipe the verb writes (a worker gone)
    while stdout is read is the verb's error, shown as such, never hidden behind a quiet exit 1."""
    code = ("import sys\n"
            "def broken(args):\n    raise BrokenPipeError(32, 'a pipe of the verb')\n"
            "import argparse\nimport awm_engine.cli as c\n"
            "parse = argparse.ArgumentParser.parse_args\n"
            "def parsed(self, *a, **k):\n    args = parse(self, *a, **k)\n    args.func = broken\n    return args\n"
            "argparse.ArgumentParser.parse_args = parsed\n"
            "sys.exit(c.main(['catalog', 'list']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "a pipe of the verb" in done.stderr, done.stderr
    assert done.returncode != 0
