"""The sandbox launcher, attacked directly: a process carrying every payload, with canary secrets in the
parent's environment. Each attempt must fail; where the host lacks a mechanism the test says which."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from awm_engine.sandbox import host
from awm_engine.sandbox.environment import ALLOWED_NAMES, scrubbed_env
from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy

CANARIES = {"OPENAI_API_KEY": "sk-CANARY-openai", "MY_SERVICE_TOKEN": "CANARY-service",
            "LANGCHAIN_API_KEY": "CANARY-langchain", "LANGSMITH_API_KEY": "CANARY-langsmith",
            "HOMEBREW_GITHUB_API_TOKEN": "CANARY-brew", "USER_SECRET": "CANARY-user", "TMP_TOKEN": "CANARY-tmp"}

PAYLOAD = r'''
import glob, json, os, socket, subprocess, sys
report = {}
report["env_canary"] = [k for k, v in os.environ.items() if "CANARY" in v]
found = []
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        if b"CANARY" in open(path, "rb").read():
            found.append(path)
    except OSError:
        pass
report["proc_canary"] = found
report["pids_visible"] = len(glob.glob("/proc/[0-9]*"))
writes = {}
for target in json.loads(os.environ["TARGETS"]):
    try:
        with open(target, "w") as fh:
            fh.write("pwned")
        writes[target] = "written"
    except OSError as exc:
        writes[target] = type(exc).__name__
report["writes"] = writes
try:
    socket.create_connection(("127.0.0.1", int(os.environ["PORT"])), timeout=2).close()
    report["connect"] = "connected"
except OSError as exc:
    report["connect"] = type(exc).__name__
try:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); report["listen"] = "listening"; s.close()
except OSError as exc:
    report["listen"] = type(exc).__name__
try:
    block = bytearray(4 * 1024 ** 3)
    report["alloc"] = "allocated"
except MemoryError:
    report["alloc"] = "MemoryError"
marker = os.environ["MARKER"]
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker], start_new_session=True)
forks = 0
try:
    for _ in range(300):
        pid = os.fork()
        if pid == 0:
            import time
            time.sleep(5)
            os._exit(0)
        forks += 1
except OSError:
    pass
report["forks"] = forks
with open(os.path.join(os.environ["OUT"], "report.json"), "w") as fh:
    json.dump(report, fh)
'''


def survivors(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(str(cmdline.parent))
        except OSError:
            pass
    return found


@pytest.fixture
def listener():
    """A listener of our own on loopback: the only address network tests ever try."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def test_every_payload_fails_inside_the_sandbox(tmp_path, listener, monkeypatch):
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    own, outside = tmp_path / "own", tmp_path / "outside"
    own.mkdir()
    outside.mkdir()
    cache = Path(os.environ["AWM_CACHE_DIR"]) / "templates"
    cache.mkdir(parents=True, exist_ok=True)
    targets = [str(outside / "x"), str(cache / "poison.db"), "/tmp/awm-escape-" + uuid.uuid4().hex,
               str(own / "allowed")]
    marker = "AWM-SURVIVOR-" + uuid.uuid4().hex
    sandbox = Sandbox(SandboxPolicy(writable=[str(own)], memory_mb=1024, max_procs=32,
                                    env={"TARGETS": json.dumps(targets), "PORT": str(listener), "MARKER": marker,
                                         "OUT": str(own)}), "attack")
    result = sandbox.run([sys.executable, "-c", PAYLOAD], timeout=120, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    report = json.loads((own / "report.json").read_text())
    p = host.protections()
    assert report["env_canary"] == []  # exact allow-list of names
    if p.proc_isolated:
        assert report["proc_canary"] == [] and report["pids_visible"] <= 3
    else:
        pytest.fail(f"pid namespaces unavailable here: {p.off}")
    assert report["writes"][str(own / "allowed")] == "written"
    for target in targets[:3]:
        assert report["writes"][target] != "written", (target, p.off.get("writes_confined"))
        assert not Path(target).exists()
    assert report["connect"] != "connected" and report["listen"] != "listening"
    assert report["alloc"] == "MemoryError"
    assert report["forks"] < 32, p.off.get("process_limit")
    assert survivors(marker) == []  # the setsid child died with the sandbox
    assert not sandbox.tmp.exists()  # the private temp dir is gone


def test_allowed_network_is_opt_in(tmp_path, listener):
    code = ("import socket, os; socket.create_connection(('127.0.0.1', int(os.environ['PORT'])), timeout=2).close();"
            "print('connected')")
    sandbox = Sandbox(SandboxPolicy(network=True, env={"PORT": str(listener)}), "net")
    result = sandbox.run([sys.executable, "-c", code], timeout=60, capture_output=True)
    assert result.stdout.decode().strip() == "connected", result.stderr.decode()[-1000:]


def test_env_allow_list_is_exact_names_never_prefixes():
    source = {"HOME": "/h", "HOMEBREW_GITHUB_API_TOKEN": "x", "LANG": "C", "LANGCHAIN_API_KEY": "x",
              "USER": "me", "USER_TOKEN": "x", "TMPDIR": "/t", "TMP_SECRET": "x", "PATH": "/bin", "LC_ALL": "C"}
    env = scrubbed_env(source=source)
    assert set(env) == {"HOME", "LANG", "TMPDIR", "PATH", "LC_ALL", "PYTHONUNBUFFERED"}
    assert all(not name.endswith(("_KEY", "_TOKEN", "_SECRET")) for name in ALLOWED_NAMES)


def test_python_module_targets_run_in_the_same_interpreter(tmp_path):
    sandbox = Sandbox(SandboxPolicy(writable=[str(tmp_path)]), "mod")
    result = sandbox.run([sys.executable, "-m", "json.tool", "--help"], timeout=60, capture_output=True)
    assert result.returncode == 0 and b"usage" in result.stdout.lower()


def test_a_missing_mechanism_is_reported_not_skipped():
    code = textwrap.dedent("""
        import io, json
        from awm_engine.sandbox import host
        buf = io.StringIO()
        p = host.warn_once(buf)
        print(json.dumps({"off": p.off, "said": buf.getvalue()}))
    """)
    env = {**os.environ, "AWM_SANDBOX": "off-landlock"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert "writes_confined" in data["off"]
    assert "awm sandbox: writes confined is OFF on this host" in data["said"]
