"""Nothing of awm stays in the temporary directory: not after a sandbox refusal, not after SIGTERM (the verb cleans up
as after Ctrl-C), and what a SIGKILLed awm process left (its pool and view directories, its workers' quota mounts)
goes at the next pool start. Every wait here is on a condition (a file appearing, the process exiting), never on a
fixed time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tinyenv import FOOTER, HEADER, make_env_dir

SCENARIO = "maple_library_lending"  # of the bundled sample_envs
HANGS_AT_IMPORT = "#FULL" + HEADER + "\nimport time as _t\n_t.sleep(3600)\n" + FOOTER  # loading never finishes


def awm(*argv: str) -> list[str]:
    return [sys.executable, "-m", "awm_engine.cli", *argv]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("AWM_UNSAFE_NO_SANDBOX", "AWM_SANDBOX")}
    return {**env, "TMPDIR": str(tmpdir), "AWM_CACHE_DIR": str(tmp_path / "cache"), **extra}


def wait_for(condition, proc: subprocess.Popen, what: str, deadline: float = 180.0):
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        found = condition()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode} before {what}: {proc.stderr.read()}")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"never {what}")


def signalled(argv: list[str], env: dict[str, str], ready, sig: int, what: str, **popen) -> tuple[int, str]:
    """Start ``argv``, send it ``sig`` once ``ready()`` holds, and wait for it: (its exit code, its stderr)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    try:
        wait_for(ready, proc, what)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


@pytest.mark.parametrize("verb", [["env", "call", SCENARIO, "list_branches"], ["env", "test", "--scenario", SCENARIO],
                                  ["env", "doctor", SCENARIO]], ids=["call", "test", "doctor"])
def test_a_sandbox_refusal_leaves_nothing_in_the_temporary_directory(tmp_path, verb):
    env = clean_env(tmp_path, AWM_SANDBOX="off-namespaces")
    done = subprocess.run(awm(*verb), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stderr
    assert "untrusted code was not run" in done.stderr
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []


def hanging_data(tmp_path: Path) -> Path:
    """A data directory whose one scenario, ``hangs``, never finishes loading (its code sleeps at import)."""
    return make_env_dir(tmp_path / "data", {"Hangs": HANGS_AT_IMPORT})


def loading(tmpdir: Path):
    """The pool directory of a process that is loading an environment: the template copy its worker was given is
    there until the load answers."""
    def found():
        return next(iter(tmpdir.glob("awm_pool_*/w*/incoming-*.db")), None)
    return found


def quota_mounts_below(path: Path) -> list[str]:
    from awm_engine.sandbox.limits import mountinfo_path

    out = []
    for line in Path("/proc/self/mountinfo").read_bytes().decode(errors="surrogateescape").split("\n"):
        if " - " in line and line.split(" - ", 1)[1].split()[1:2] and \
                line.split(" - ", 1)[1].split()[1].startswith("awm-sbx-"):
            target = mountinfo_path(line.split()[4])
            if target.startswith(str(path) + "/"):
                out.append(target)
    return out


@pytest.mark.parametrize("verb", [["env", "call", "hangs", "list_notes"], ["env", "test", "--scenario", "hangs"]],
                         ids=["call", "test"])
def test_sigterm_while_loading_cleans_up_as_ctrl_c_does(tmp_path, verb):
    env = clean_env(tmp_path)
    tmpdir = tmp_path / "tmp"
    code, err = signalled(awm(*verb[:2], "--data", str(hanging_data(tmp_path)), *verb[2:]), env, loading(tmpdir),
                          signal.SIGTERM, "loading")
    assert code == 143, err
    assert "Traceback" not in err and "terminated" in err
    assert quota_mounts_below(tmpdir) == []
    assert sorted(p.name for p in tmpdir.iterdir()) == []


def test_what_a_killed_process_left_goes_at_the_next_pool_start(tmp_path):
    env = clean_env(tmp_path)
    tmpdir = tmp_path / "tmp"
    proc = subprocess.Popen(awm("env", "call", "--data", str(hanging_data(tmp_path)), "hangs", "list_notes"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(loading(tmpdir), proc, "loading")
    finally:
        proc.kill()
        proc.wait()
    left = sorted(p.name for p in tmpdir.iterdir())
    assert any(n.startswith("awm_pool_") for n in left) and any(n.startswith("awm_view_") for n in left), left
    # a directory of a live process and one without a marker are never touched
    from awm_engine.sandbox import owned

    live = tmpdir / "awm_pool_live"
    live.mkdir()
    owned.mark(live)
    unmarked = tmpdir / "awm_pool_unmarked"
    unmarked.mkdir()
    done = subprocess.run(awm("env", "call", SCENARIO, "list_branches"), env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert quota_mounts_below(tmpdir) == []
    assert sorted(p.name for p in tmpdir.iterdir()) == ["awm_pool_live", "awm_pool_unmarked"]


def test_the_stale_mount_sweep_decodes_every_escape_of_mountinfo(tmp_path):
    from awm_engine.sandbox import limits

    assert limits.mountinfo_path(r"/t\011ab/n\012l/b\134s/s\040p") == "/t\tab/n\nl/b\\s/s p"
    if not limits.quota_support()[0]:
        pytest.skip("quota mounts need root")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid with no process: its mounts are stale
    target = tmp_path / "t\tab" / "new\nline" / "back\\slash and space"
    target.mkdir(parents=True)
    source = f"{limits.MOUNT_SOURCE}-{gone.pid}".encode()
    assert limits._libc().mount(source, os.fsencode(target), b"tmpfs", 0, b"size=1m") == 0
    try:
        assert quota_mounts_below(tmp_path) == [str(target)]
        limits.sweep_stale_quota_mounts()
        assert quota_mounts_below(tmp_path) == []
    finally:
        if quota_mounts_below(tmp_path):
            limits.unmount_quota(target)


def test_the_sweep_removes_only_marked_directories_of_dead_processes_and_follows_no_symlink(tmp_path):
    from awm_engine.sandbox import owned

    tmpdir, outside = tmp_path / "tmp", tmp_path / "outside"
    tmpdir.mkdir()
    outside.mkdir()
    (outside / "precious").write_text("keep")

    def dead_owned(prefix: str, where: Path) -> Path:  # made by a process that then exits
        made = subprocess.run([sys.executable, "-c", "import sys; from awm_engine.sandbox import owned; "
                               "print(owned.owned_dir(sys.argv[1]))", prefix],
                              env={**os.environ, "TMPDIR": str(where)}, capture_output=True, text=True, check=True)
        return Path(made.stdout.strip())

    dead = dead_owned("awm_pool_", tmpdir)
    (dead / "w0" / "episodes").mkdir(parents=True)
    (dead / "w0" / "to_outside").symlink_to(outside)
    (dead / "w0" / "episodes" / "final.db").write_text("x")
    dead_elsewhere = dead_owned("awm_pool_", outside)
    (tmpdir / "awm_pool_link").symlink_to(dead_elsewhere)  # a link to a dead process's directory: not followed
    other_prefix = dead_owned("awm_probe_", tmpdir)  # not a prefix the sweep looks at
    for prefix in ("awm_verify_", "awm_bfcl_"):  # a verifier's or BFCL checker's: its inner directory is the sandbox's
        killed = dead_owned(prefix, tmpdir)
        (killed / "work").mkdir()
        (killed / "work" / "final.db").write_text("x")
        os.chown(killed / "work", 65534, 65534) if os.geteuid() == 0 else None
    live = owned.owned_dir("awm_view_")  # this process's (in the real temporary directory)
    os.rename(live, tmpdir / live.name)
    foreign = dead_owned("awm_pool_", tmpdir)  # marked in another pid namespace: its owner cannot be seen from here
    text = (foreign / owned.MARKER).read_text().replace("pidns=", "pidns=other:")
    (foreign / owned.MARKER).unlink()
    (foreign / owned.MARKER).write_text(text)
    (tmpdir / "awm_pool_unmarked").mkdir()

    assert owned.sweep_dead_dirs(tmpdir) == 3
    assert not dead.exists() and not list(tmpdir.glob("awm_verify_*")) and not list(tmpdir.glob("awm_bfcl_*"))
    assert (outside / "precious").read_text() == "keep" and dead_elsewhere.is_dir()
    assert sorted(p.name for p in tmpdir.iterdir()) == sorted(
        ["awm_pool_link", other_prefix.name, live.name, foreign.name, "awm_pool_unmarked"])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_server_stopped_while_its_environment_loads_exits_cleanly(tmp_path, sig):
    from awm_engine.runtime.ports import free_port

    env, out = clean_env(tmp_path), tmp_path / "session"
    code, err = signalled(awm("env", "serve", "--data", str(hanging_data(tmp_path)), "--scenario", "hangs", "--port",
                              str(free_port()), "--out", str(out)), env,
                          lambda: next(iter(out.glob(".awm/w*/incoming-*.db")), None), sig, "loading")
    assert code == 0, err  # as a SIGTERM or Ctrl-C once it serves
    assert "Traceback" not in err and "CancelledError" not in err
    assert not (out / ".awm").exists()
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("unsafe", [False, True], ids=["sandboxed", "unsafe-no-sandbox"])
def test_a_servers_session_records_the_sandbox_it_ran_in(tmp_path, unsafe):
    env, out = clean_env(tmp_path, **({"AWM_SANDBOX": "off-namespaces"} if unsafe else {})), tmp_path / "session"
    flag = ["--unsafe-no-sandbox"] if unsafe else []
    code, err = signalled(awm(*flag, "env", "serve", "--scenario", SCENARIO, "--stdio", "--out", str(out)), env,
                          lambda: (out / "session.json").is_file(), signal.SIGTERM, "serving", stdin=subprocess.PIPE)
    assert code == 0, err
    sandbox = json.loads((out / "session.json").read_text())["sandbox"]
    assert sandbox["unsafe_no_sandbox"] is unsafe
    assert sandbox["namespaces"] is (not unsafe)


def test_a_replay_that_fails_or_is_cancelled_removes_its_states(tmp_path, monkeypatch):
    import asyncio
    import tempfile

    from awm_engine.agent.replay import RunReplay
    from awm_engine.data.catalog import Catalog
    from awm_engine.eval.episode import make_policy, run_episode

    catalog = Catalog.load()
    s = catalog.get(SCENARIO)
    asyncio.run(run_episode(catalog, s, 3, make_policy("oracle", s, 3), run_dir=tmp_path / "run"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    class Refusing:
        async def open_episode(self, *args, **kwargs):
            raise RuntimeError("no episode")

    class Hanging:
        async def open_episode(self, *args, **kwargs):
            await asyncio.Event().wait()

    run = RunReplay(tmp_path / "run")
    with pytest.raises(RuntimeError):
        asyncio.run(run.materialize(Refusing(), catalog))
    assert run.workdir is None and list((tmp_path / "tmp").iterdir()) == []

    async def cancelled():
        task = asyncio.ensure_future(run.materialize(Hanging(), catalog))
        while run.workdir is None:  # until it made its directory
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert run.workdir is None and list((tmp_path / "tmp").iterdir()) == []


def test_verifier_and_checker_directories_are_marked_and_removed_whole(tmp_path, monkeypatch):
    """A sandbox's private directory sits in a marked directory of awm's own, so a killed process's goes at the next
    pool start; the normal clean-up removes both."""
    import tempfile

    from awm_engine.sandbox import owned
    from awm_engine.sandbox.launcher import private_dir, remove_dir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    work = private_dir("awm_verify_")
    assert work.name == "work" and work.parent.parent == tmp_path
    assert owned.owner_of(work.parent)["pid"] == str(os.getpid())
    assert owned.owner_of(work) is None  # the sandbox's own directory holds no marker it could forge
    remove_dir(work)
    assert list(tmp_path.iterdir()) == []
