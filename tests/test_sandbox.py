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
        if not target.startswith("/tmp/awm-escape-"):  # /tmp inside is the sandbox's own: written there, not here
            assert report["writes"][target] != "written", (target, p.off.get("writes_confined"))
        assert not Path(target).exists()
    assert report["connect"] != "connected" and report["listen"] != "listening"
    assert report["alloc"] == "MemoryError"
    assert report["forks"] < 32, p.off.get("process_limit")
    assert survivors(marker) == []  # the setsid child died with the sandbox


def test_allowed_network_is_opt_in(tmp_path, listener):
    code = ("import socket, os; socket.create_connection(('127.0.0.1', int(os.environ['PORT'])), timeout=2).close();"
            "print('connected')")
    sandbox = Sandbox(SandboxPolicy(network=True, connect_ports=[listener], env={"PORT": str(listener)}), "net")
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


HOSTILE = r"""
import ctypes, json, os, socket, sys
cfg = json.loads(sys.argv[1])
r = {}
def attempt(key, fn):
    try:
        fn(); r[key] = "ok"
    except OSError as exc:
        r[key] = type(exc).__name__
def unix(path):
    s = socket.socket(socket.AF_UNIX); s.settimeout(2)
    try: s.connect(path)
    finally: s.close()
attempt("path_socket", lambda: unix(cfg["unix"]))
attempt("abstract_socket", lambda: unix("\0" + cfg["abstract"]))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try: s.sendto(b"escaped", ("127.0.0.1", cfg["udp"]))
    finally: s.close()
attempt("udp", udp)
r["read"] = {}
for path in cfg["canaries"]:
    try:
        r["read"][path] = open(path).read()
    except OSError as exc:
        r["read"][path] = type(exc).__name__
libc = ctypes.CDLL(None, use_errno=True)
r["ptrace"] = libc.ptrace(0, 0, 0, 0)
r["unshare_user"] = libc.unshare(0x10000000)
r["mount"] = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
r["shm"] = libc.shmget(cfg["shm_key"], 1 << 20, 0o1000 | 0o600)
attempt("signal_parent", lambda: os.kill(cfg["parent"], 9))
r["uid"] = os.getuid()
print(json.dumps(r))
"""


def test_host_sockets_files_proc_and_ipc_are_out_of_reach(tmp_path):
    """What got out last time: a path unix socket (tmux, ssh-agent), abstract sockets and UDP, canary files in a
    fake HOME and elsewhere, ptrace/namespaces/mount, SysV shared memory outliving the sandbox, signals to awm."""
    p = host.protections()
    if not p.namespaces:
        pytest.skip(f"the sandbox's namespace layer is unavailable here: {p.off.get('namespaces')}")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".config" / "awm").mkdir(parents=True)
    canaries = [home / ".ssh" / "id_rsa", home / ".config" / "awm" / "config.toml", home / ".bash_history",
                tmp_path / "other-run" / "final.db", tmp_path / "data" / "reference_solutions.jsonl"]
    for c in canaries:
        c.parent.mkdir(parents=True, exist_ok=True)
        c.write_text("CANARY-" + c.name)
        c.chmod(0o644)
    for d in (tmp_path, home, home / ".ssh", home / ".config", home / ".config" / "awm"):
        d.chmod(0o755)
    listener_path = tmp_path / "agent.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(listener_path))
    os.chmod(listener_path, 0o777)
    abstract = socket.socket(socket.AF_UNIX)
    tag = uuid.uuid4().hex[:12]
    abstract.bind("\0awm-test-" + tag)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    for s in (unix, abstract):
        s.listen()
        s.setblocking(False)
    udp.setblocking(False)
    shm_key = int(tag[:7], 16)
    own = tmp_path / "own"
    cfg = {"unix": str(listener_path), "abstract": "awm-test-" + tag, "udp": udp.getsockname()[1],
           "canaries": [str(c) for c in canaries] + ["/etc/shadow", "/root/.bash_history"], "shm_key": shm_key,
           "parent": os.getpid()}
    try:
        result = Sandbox(SandboxPolicy(writable=[str(own)]), "hostile").run(
            [sys.executable, "-c", HOSTILE, json.dumps(cfg)], timeout=60, capture_output=True)
        assert result.returncode == 0, result.stderr.decode()[-2000:]
        report = json.loads(result.stdout.decode().strip().splitlines()[-1])
        for s in (unix, abstract):
            with pytest.raises(BlockingIOError):
                s.accept()
        with pytest.raises(BlockingIOError):
            udp.recv(64)
    finally:
        for s in (unix, abstract, udp):
            s.close()
    assert report["path_socket"] in ("FileNotFoundError", "PermissionError"), report
    assert report["abstract_socket"] != "ok", report  # (UDP went to the sandbox's own loopback: nothing arrived here)
    assert all(not str(v).startswith("CANARY") for v in report["read"].values()), report["read"]
    assert report["ptrace"] == -1 and report["unshare_user"] == -1 and report["mount"] == -1, report
    assert report["signal_parent"] != "ok" and report["uid"] != 0, report
    shm = Path("/proc/sysvipc/shm").read_text().split("\n")[1:]
    assert not [line for line in shm if line.split() and int(line.split()[0]) == shm_key]  # nothing survived


FORK_HOG = r"""
import os, sys, time
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(90 * 1024 * 1024)  # touched: really resident
        for j in range(0, len(block), 4096):
            block[j] = 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
codes = [os.waitpid(k, 0)[1] for k in kids]
print(sum(1 for c in codes if c == 0))
"""


def test_memory_is_capped_for_the_whole_sandbox_not_per_process(tmp_path):
    """Four children of 90 MB each stay under a 200 MB per-process limit; the sandbox's cgroup holds them all to
    200 MB together, so not all four survive."""
    if not host.protections().memory_limit:
        pytest.skip(f"no memory cgroup here: {host.protections().off.get('memory_limit')}")
    result = Sandbox(SandboxPolicy(writable=[str(tmp_path / "own")], memory_mb=200), "hog").run(
        [sys.executable, "-c", FORK_HOG], timeout=120, capture_output=True)
    survived = int(result.stdout.decode().strip().splitlines()[-1]) if result.stdout.strip() else 0
    assert survived < 4


def test_untrusted_code_is_refused_without_the_namespace_layer_unless_asked(tmp_path):
    code = textwrap.dedent("""
        import json, sys
        from awm_engine.sandbox import host
        from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy, SandboxUnavailable
        try:
            r = Sandbox(SandboxPolicy(writable=[sys.argv[1]]), "t").run([sys.executable, "-c", "print(1)"],
                                                                        timeout=60, capture_output=True)
            out = {"ran": r.stdout.decode().strip()}
        except SandboxUnavailable as exc:
            out = {"refused": str(exc)}
        p = host.protections()
        out.update(namespaces=p.namespaces, unsafe=p.unsafe_no_sandbox, network=p.network_isolated,
                   fs=p.filesystem_view, off=sorted(p.off))
        print(json.dumps(out))
    """)
    env = {**os.environ, "AWM_SANDBOX": "off-namespaces"}
    env.pop("AWM_UNSAFE_NO_SANDBOX", None)
    refused = json.loads(subprocess.run([sys.executable, "-c", code, str(tmp_path / "a")], env=env,
                                        capture_output=True, text=True, check=True).stdout)
    assert "refused" in refused and "--unsafe-no-sandbox" in refused["refused"]
    assert not refused["namespaces"] and "namespaces" in refused["off"]
    allowed = json.loads(subprocess.run([sys.executable, "-c", code, str(tmp_path / "b")],
                                        env={**env, "AWM_UNSAFE_NO_SANDBOX": "1"}, capture_output=True, text=True,
                                        check=True).stdout)
    assert allowed["ran"] == "1" and allowed["unsafe"] is True
    # measured, not assumed: without namespaces the probe finds the network, the filesystem and /proc open
    assert allowed["network"] is False and allowed["fs"] is False
    assert {"network_isolated", "filesystem_view", "proc_isolated"} <= set(allowed["off"])


def test_the_real_commands_refuse_without_a_sandbox_and_record_the_unsafe_choice(tmp_path):
    """`awm env call` exits 4 with the reason when the namespace layer is missing; `awm --unsafe-no-sandbox eval
    run` runs and its metadata says so."""
    awm = str(Path(sys.executable).with_name("awm"))
    env = {**os.environ, "AWM_SANDBOX": "off-namespaces"}
    env.pop("AWM_UNSAFE_NO_SANDBOX", None)
    refused = subprocess.run([awm, "env", "call", "maple_library_lending", "list_branches"], env=env,
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert refused.returncode == 4, refused.stderr
    assert "untrusted code was not run" in refused.stderr and "--unsafe-no-sandbox" in refused.stderr
    assert "namespaces is OFF" in refused.stderr  # every protection that is off is named on stderr
    done = subprocess.run([awm, "--unsafe-no-sandbox", "eval", "run", "--scenario", "maple_library_lending",
                           "--task", "0", "--policy", "oracle", "--out", str(tmp_path / "run")], env=env,
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    sandbox = json.loads((tmp_path / "run" / "metadata.json").read_text())["sandbox"]
    assert sandbox["unsafe_no_sandbox"] is True and sandbox["namespaces"] is False
    assert "network_isolated" in sandbox["off"] and "filesystem_view" in sandbox["off"]


def test_the_private_tmp_is_writable_and_leaves_nothing_on_the_host(tmp_path):
    marker = f"awm-private-tmp-{uuid.uuid4().hex}"
    result = Sandbox(SandboxPolicy(writable=[str(tmp_path / "own")]), "tmp").run(
        [sys.executable, "-c", f"import tempfile; open('/tmp/{marker}', 'w').write('x'); tempfile.mkdtemp(); print('ok')"],
        timeout=60, capture_output=True)
    assert result.returncode == 0 and result.stdout.strip() == b"ok", result.stderr.decode()[-1000:]
    assert not Path("/tmp", marker).exists()


def test_a_policys_variables_reach_only_the_sandboxed_process_and_never_loader_ones(tmp_path):
    """A benchmark server config declares the variables its server gets: they must not reach the host-side processes
    that start the sandbox as root, and variables that change how programs load are refused."""
    from awm_engine.sandbox.launcher import UnsafeEnvironment

    with pytest.raises(UnsafeEnvironment, match="LD_PRELOAD"):
        Sandbox(SandboxPolicy(writable=[str(tmp_path / "a")], env={"LD_PRELOAD": "/tmp/x.so"}), "env").run(
            ["/bin/true"], timeout=60)
    sandbox = Sandbox(SandboxPolicy(writable=[str(tmp_path / "b")], env={"SERVICE_REGION": "test-1"}), "env")
    command, env = sandbox.command([sys.executable, "-c", "import os; print(os.environ.get('SERVICE_REGION'))"])
    assert "SERVICE_REGION" not in env  # not in the environment of the shell and bubblewrap, which run as root
    result = sandbox.run([sys.executable, "-c", "import os; print(os.environ.get('SERVICE_REGION'))"], timeout=60,
                         capture_output=True)
    assert result.stdout.decode().strip() == "test-1", result.stderr.decode()[-1000:]
