"""Each sandbox had a memory limit (2 GiB for a worker) and a size-capped tmpfs directory (1 GiB), and nothing
bounded them together: ``max_sandboxes`` workers (32) could ask for 96 GiB on a machine of 24, and a tmpfs's pages
are freed by killing no process — a few scenarios filling their directories took the host's memory from every
other scenario of the run, awm and the host's other processes (found by attacking awm as a hostile environment
author would; the test fails while the gap is open). Now all the sandboxes of one awm process share one memory
cgroup limited to ``AWM_SANDBOX_TOTAL_MEMORY_MB`` (three quarters of the machine's memory by default)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from awm_engine.sandbox import host

THREE_SANDBOXES = r'''
import json, os, sys, tempfile
from pathlib import Path
from awm_engine.sandbox import limits
from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy, sandbox_ids

FILL = """
import os, sys
written = 0
try:
    with open(os.path.join(sys.argv[1], "fill"), "wb") as fh:
        for _ in range(150):
            fh.write(b"x" * (1 << 20))
            fh.flush()
            written += 1
except OSError as exc:
    print("error", type(exc).__name__)
print(written)
"""
base = Path(tempfile.mkdtemp(dir=sys.argv[1]))
mounts, written = [], []
try:
    for i in range(3):  # each writes 150 MB into its own 200 MB tmpfs, which stays (as a worker's directory does)
        own = base / f"own{i}"
        own.mkdir()
        assert limits.mount_quota(own, 200, *sandbox_ids())
        mounts.append(own)
        done = Sandbox(SandboxPolicy(writable=[str(own)], memory_mb=400), f"fill{i}").run(
            [sys.executable, "-c", FILL, str(own)], timeout=120, capture_output=True)
        lines = done.stdout.decode().split()
        written.append(int(lines[-1]) if lines and lines[-1].isdigit() else 0)
finally:
    for own in mounts:
        limits.unmount_quota(own)
print(json.dumps({"written_mb": written}))
'''


def test_all_sandboxes_of_a_process_share_one_memory_limit(tmp_path):
    p = host.protections()
    if not (p.memory_limit and p.disk_quota):
        pytest.skip(f"no memory cgroup or tmpfs quota here: {p.off.get('memory_limit') or p.off.get('disk_quota')}")
    env = {**os.environ, "AWM_SANDBOX_TOTAL_MEMORY_MB": "300"}
    done = subprocess.run([sys.executable, "-c", THREE_SANDBOXES, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(done.stdout.strip().splitlines()[-1])["written_mb"]
    assert sum(written) <= 300, f"three sandboxes held {sum(written)} MB of tmpfs together ({written}), over 300"
    assert written[0] == 150, written  # the first fitted


def test_a_killed_processes_total_group_is_swept_with_its_sandboxes_groups():
    from awm_engine.sandbox import limits

    roots, why = limits.cgroup_support()
    if "memory" not in roots:
        pytest.skip(f"no memory cgroup here: {why}")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs, like an awm process killed with its sandboxes' groups left behind
    total = roots["memory"] / f"awm-{limits.TOTAL_LABEL}-{gone.pid}-all"
    inner = total / f"awm-worker0-{gone.pid}-0123abcd"
    inner.mkdir(parents=True)
    try:
        limits.sweep_stale_cgroups()
        assert not inner.exists() and not total.exists()
    finally:
        for path in (inner, total):
            if path.exists():
                path.rmdir()
