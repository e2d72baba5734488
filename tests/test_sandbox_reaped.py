"""Killing a sandbox leaves no zombie on the host: its inside is killed first, so bubblewrap collects it (a group
kill could end bubblewrap first, and its child would become a zombie of the host's init, which a container's or this
VM's init never collects)."""
from __future__ import annotations

import os
import sys
import time

import pytest

from awm_engine.sandbox import host
from awm_engine.sandbox.launcher import Sandbox, SandboxPolicy, kill_tree


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def _gone_or_collected(pid: int) -> bool:
    """Not a process any more (a zombie still has its /proc entry, in state Z)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "X"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("rounds", [5])
def test_a_killed_sandbox_leaves_no_zombie(tmp_path, rounds):
    p = host.protections()
    if not p.namespaces:
        pytest.skip(f"the sandbox's namespace layer is unavailable here: {p.off.get('namespaces')}")
    for i in range(rounds):
        own = tmp_path / f"w{i}"
        own.mkdir()
        sandbox = Sandbox(SandboxPolicy(writable=[str(own)]), f"reap{i}")
        proc = sandbox.popen([sys.executable, "-c", "import time; time.sleep(600)"])
        try:
            deadline = time.monotonic() + 60
            while not _children(proc.pid) and time.monotonic() < deadline:  # bubblewrap has started its child
                time.sleep(0.02)
            inside = _children(proc.pid)
            assert inside
            kill_tree(proc)
            assert proc.returncode is not None
            # gone when kill_tree returns: collected by bubblewrap, which kill_tree collected (a group kill left the
            # inside to the host's init, a zombie for as long as that init takes, or for good)
            left = [(p, open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[:2]) for p in inside
                    if not _gone_or_collected(p)]
            assert not left, f"left (pid, [state, parent]): {left}"
        finally:
            sandbox.cleanup()
