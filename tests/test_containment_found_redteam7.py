"""Attacks found by red team 7 (a hostile environment, verifier or data SQL against the sandbox); each test failed
while its gap was open.

Every sandbox runs as the same unprivileged host uid (``AWM_SANDBOX_UID``), each in a user namespace of its own. The
kernel still counts some objects per uid of the *host's* user namespace, summed over every namespace below it:
inotify instances (``fs.inotify.max_user_instances``, 128 by default) among them. One sandbox that held them all
left every other sandbox — another scenario's worker, a later tenant's leased warm worker — without any; and an
inotify watch needs no Landlock right, so it saw, on the files every sandbox shares read-only (Python, awm's
package), when other sandboxes and the host opened and read them.
"""
from __future__ import annotations

import asyncio
import errno
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from awm_engine.sandbox import host  # noqa: E402

INOTIFY_TOOL = '''
import ctypes as _ct
_libc = _ct.CDLL(None, use_errno=True)
_HELD = []
_WATCH = -1

class InotifyOut(BaseModel):
    held: int
    watch: int
    errno: int

@app.get("/api/inotify", summary="inotify", description="Tries inotify.", tags=["bad"], operation_id="inotify", response_model=InotifyOut)
async def inotify():
    fd = _libc.inotify_init1(0)
    err = _ct.get_errno()
    if fd >= 0:
        os.close(fd)
    return InotifyOut(held=len(_HELD), watch=_WATCH, errno=0 if fd >= 0 else err)
'''

# at import: every inotify instance the kernel gives this uid, held; a watch on the shared Python library
HOG = INOTIFY_TOOL + '''
for _i in range(4096):
    _fd = _libc.inotify_init1(0)
    if _fd < 0:
        break
    _HELD.append(_fd)
if _HELD:
    _WATCH = _libc.inotify_add_watch(_HELD[0], os.path.dirname(os.__file__).encode(), 0x20 | 0x1)
'''


def _need_sandbox() -> None:
    if not host.protections().namespaces or not host.protections().syscall_filter:
        pytest.skip(f"no namespace layer or filter here: {host.protections().off}")


def test_one_sandbox_cannot_take_or_watch_through_inotify_what_every_sandbox_of_the_uid_shares(tmp_path):
    _need_sandbox()
    from tinyenv import make_env_dir

    from awm_engine.data.catalog import Catalog
    from awm_engine.runtime.pool import EnvPool

    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Hog": HOG, "Tenant": INOTIFY_TOOL})])

    async def go():
        async with EnvPool(workers=1) as pool:
            hog = await pool.open_episode(catalog.get("hog"), run_dir=tmp_path / "runs" / "hog")
            tenant = await pool.open_episode(catalog.get("tenant"), run_dir=tmp_path / "runs" / "tenant")
            assert hog.worker is not tenant.worker  # one scenario per sandbox
            held = await hog.call_tool("inotify", {})
            other = await tenant.call_tool("inotify", {})
            await hog.close()
            await tenant.close()
            return held, other

    held, other = asyncio.run(go())
    assert not held.is_error and not other.is_error, (held.text, other.text)
    held, other = json.loads(held.text), json.loads(other.text)
    assert held["held"] == 0 and held["watch"] < 0, held  # no instance to hold, no watch on shared files
    assert other["errno"] != errno.EMFILE, other  # (it was: the hostile scenario held the uid's every instance)


NO_USERNS = r'''
import ctypes, json, os, sys
from awm_engine.sandbox import init

class NoUserns:  # the host refuses the sandbox uid a user namespace (a sysctl, an AppArmor rule, a full count)
    def __init__(self, real):
        self.real = real
    def __getattr__(self, name):
        return getattr(self.real, name)
    def unshare(self, flags):
        ctypes.set_errno(28)
        return -1

real = ctypes.CDLL
init.ctypes = type("C", (), {"CDLL": staticmethod(lambda *a, **k: NoUserns(real(*a, **k))),
                             "get_errno": staticmethod(ctypes.get_errno), "c_uint32": ctypes.c_uint32})
import resource
from awm_engine.sandbox import host
before = resource.getrlimit(resource.RLIMIT_NPROC)
uid = int(sys.argv[1])
init.confine({"drop_to": [uid, uid], "max_procs": 64, "inside_uid": 1000})
r = {}
probe = host.PROBE
exec(probe[probe.index("try:  # the host's user namespace"):probe.index('r["canary"]')])  # the probe's own check
print(json.dumps({"uid": os.getuid(), "nproc": resource.getrlimit(resource.RLIMIT_NPROC), "before": before,
                  "own_user_ns": r["own_user_ns"]}))
'''


def test_a_sandbox_whose_user_namespace_the_host_refuses_gets_no_shared_process_limit_and_says_so(tmp_path):
    """``init.drop_privileges`` went on, without a word, when ``unshare(CLONE_NEWUSER)`` failed: the sandboxed code
    then ran in the host's user namespace, where the kernel counts the processes of every sandbox (one uid) together,
    so the per-sandbox ``RLIMIT_NPROC`` became one limit for all of them — one sandbox's threads stopped every
    other's — and the run's recorded protections said nothing of it. Now no such limit is set there, and the probe
    sees the host's user namespace (``own_user_ns`` false: ``process_limit`` is recorded off, with why, unless a
    pids cgroup per sandbox holds). The sandbox still runs: the host's other namespaces, the uid drop, Landlock and
    the system-call filter are unchanged."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("the uid drop runs only when awm runs as root")
    from awm_engine.sandbox.launcher import PACKAGE_PARENT, sandbox_ids

    done = subprocess.run([sys.executable, "-c", NO_USERNS, str(sandbox_ids()[0])], capture_output=True, timeout=60,
                          env={"PYTHONPATH": PACKAGE_PARENT, "PATH": "/usr/bin:/bin"})
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["uid"] == sandbox_ids()[0], (out, done.stderr.decode()[-2000:])
    assert out["nproc"] == out["before"] and out["nproc"][0] != 64, out  # no limit shared by every sandbox
    assert out["own_user_ns"] is False, out


def test_the_probe_sees_a_sandbox_in_a_user_namespace_of_its_own_here():
    from awm_engine.sandbox import host

    p = host.protections()
    if not p.namespaces:
        pytest.skip("no namespace layer on this host")
    assert p.process_limit, p.off  # this host gives each sandbox its own user namespace (or a pids cgroup)


SQUAT = r'''
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind("\0" + sys.argv[1])
    s.listen()
except OSError as exc:
    print(json.dumps({"bound": repr(exc)}), flush=True)
    raise SystemExit
print(json.dumps({"bound": True}), flush=True)
s.settimeout(20)
conn, _ = s.accept()
print(json.dumps({"got": conn.recv(100).decode()}), flush=True)
'''


def test_what_a_sandbox_with_network_can_still_do_with_abstract_sockets_is_recorded(tmp_path):
    """A sandbox with network (an MCP-Universe server) shares the host's network namespace, and with it the
    namespace of abstract unix socket names. Landlock (ABI 6) keeps it from connecting to the host's, but not from
    binding one: a host client that connects to a name no host server holds (X11's ``@/tmp/.X11-unix/X0`` while no X
    server runs, a D-Bus address) talks to the sandbox. Nothing the kernel offers stops the bind (a system-call filter
    cannot read the address), so it cannot be fixed here: the recorded protections must say it, and did not."""
    _need_sandbox()
    import os
    import socket
    import subprocess
    import uuid

    from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy

    name = f"awm-redteam7-squat-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    sandbox = Sandbox(SandboxPolicy(writable=[str(tmp_path / "own")], network=True), "squat")
    proc = sandbox.popen([sys.executable, "-c", SQUAT, name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        first = json.loads(proc.stdout.readline() or b"{}")
        if first.get("bound") is True:  # what a host client would hand the sandbox
            with socket.socket(socket.AF_UNIX) as client:
                client.settimeout(10)
                client.connect("\0" + name)
                client.sendall(b"host")
            assert json.loads(proc.stdout.readline())["got"] == "host"
    finally:
        sandbox.cleanup()
    facts = host.protections(network=True)
    if first.get("bound") is True:
        assert "abstract unix socket" in facts.off.get("network_isolated", ""), facts.off


DNOTIFY = r'''
import fcntl, json, os, signal, sys, time
hits = []
signal.signal(signal.SIGRTMIN + 1, lambda *a: hits.append(1))
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGRTMIN + 1)
    fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
    print(json.dumps({"watching": True}), flush=True)
except OSError as exc:
    print(json.dumps({"watching": type(exc).__name__}), flush=True)
sys.stdin.readline()
time.sleep(0.5)
print(json.dumps({"hits": len(hits)}), flush=True)
'''


def test_a_sandbox_cannot_watch_with_dnotify_what_the_host_and_other_sandboxes_read(tmp_path):
    """With inotify refused, ``fcntl(F_NOTIFY)`` (dnotify) still watched a directory every sandbox shares read-only:
    a signal for each read of a file in it, by the host or by another sandbox."""
    _need_sandbox()
    import subprocess

    from awm_engine.sandbox import launcher
    from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy

    shared = Path(launcher.__file__).parent  # awm's package: in every sandbox's view
    sandbox = Sandbox(SandboxPolicy(writable=[str(tmp_path / "own")]), "dnotify")
    proc = sandbox.popen([sys.executable, "-c", DNOTIFY, str(shared)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        first = json.loads(proc.stdout.readline() or b"{}")
        for _ in range(5):  # what the host (or another sandbox) reads there
            (shared / "view.py").read_bytes()
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        last = json.loads(proc.stdout.readline() or b"{}")
    finally:
        sandbox.cleanup()
    assert first.get("watching") is not True and last.get("hits") == 0, (first, last)


SETUID = r'''
import json, os, shutil, sys
own = sys.argv[1]
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except OSError as exc:
        out[name] = type(exc).__name__
target = os.path.join(own, "chmodded")
shutil.copyfile(sys.executable, target)
attempt("chmod", lambda: os.chmod(target, 0o4755))
attempt("chmod_sgid", lambda: os.chmod(target, 0o2755))
def create(name, mode, flags=os.O_CREAT | os.O_WRONLY):
    fd = os.open(os.path.join(own, name), flags, mode)
    os.close(fd)
attempt("open", lambda: create("opened", 0o4755))
def tmpfile():
    fd = os.open(own, os.O_TMPFILE | os.O_WRONLY, 0o4755)
    os.link(f"/proc/self/fd/{fd}", os.path.join(own, "linked"))
    os.close(fd)
attempt("tmpfile", tmpfile)
attempt("plain", lambda: create("plain", 0o755))
print(json.dumps(out))
'''


def test_a_sandbox_leaves_no_set_user_id_file_on_the_host(tmp_path):
    """A sandbox directory without a size-capped tmpfs of its own (BFCL's project root; any directory where the
    quota mount is not there) lies on the host's file system, mounted without ``nosuid`` on the host: the sandbox
    could leave there a copy of Python that is set-user-ID to the sandbox uid, which anyone on the host who could
    reach it would run as that uid — the owner of every running sandbox's directory and user namespace (another
    tenant's databases, its processes)."""
    _need_sandbox()
    import os
    import stat

    from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy

    own = tmp_path / "own"
    done = Sandbox(SandboxPolicy(writable=[str(own)]), "setuid").run(
        [sys.executable, "-c", SETUID, str(own)], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["plain"] == "done", out  # files are still made as asked
    left = {entry.name: oct(entry.stat(follow_symlinks=False).st_mode) for entry in os.scandir(own)
            if entry.stat(follow_symlinks=False).st_mode & (stat.S_ISUID | stat.S_ISGID)}
    assert not left, (left, out)
