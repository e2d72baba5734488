"""The one sandbox launcher: every process that runs generated code (environment workers, verifiers,
served environments, database builds) is started through ``Sandbox``.

A sandboxed process gets: an exact allow-list of environment variables; its own user, pid, mount (own
``/proc``) and — unless network is allowed — network namespace; Landlock write confinement to its own
directories and a private temp dir; limits on memory, processes, file size, open files (and CPU time
where asked); no core dumps; and everything it starts dies with it. Protections the host cannot provide
are named in ``host.protections()`` and reported, never skipped silently.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.sandbox import host
from awm_engine.sandbox.environment import scrubbed_env

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # so ``-m awm_engine…`` works inside


@dataclass
class SandboxPolicy:
    writable: list[str] = field(default_factory=list)  # directories the process may write below
    network: bool = False  # environments are offline worlds: no network unless asked
    memory_mb: int | None = 2048  # address space
    max_procs: int | None = 64  # processes and threads of the sandbox's user
    file_size_mb: int | None = 2048
    open_files: int | None = 1024
    cpu_seconds: int | None = None  # verifiers get one
    env: dict[str, str] = field(default_factory=dict)  # set on top of the allow-listed variables

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_memory_mb(kind: str) -> int:
    override = os.environ.get(f"AWM_SANDBOX_{kind.upper()}_MEMORY_MB") or os.environ.get("AWM_SANDBOX_MEMORY_MB")
    if override and override.isdigit():
        return int(override)
    return {"worker": 2048, "verifier": 1024, "build": 1024, "serve": 2048}.get(kind, 2048)


class Sandbox:
    """One sandboxed process: ``Sandbox(policy).popen(argv, ...)``; ``cleanup()`` removes its private tmp."""

    def __init__(self, policy: SandboxPolicy, label: str = "awm"):
        self.policy = policy
        self.tmp = Path(tempfile.mkdtemp(prefix=f"awm_sbx_{label}_"))
        self.protections = host.protections(policy.network)
        self.cgroup: Path | None = None
        self._lifeline: int | None = None  # write end of a pipe: when it closes (we end or die), the sandbox ends

    def _prepare_dirs(self) -> list[str]:
        dirs = [str(self.tmp)] + [str(Path(d).resolve()) for d in self.policy.writable]
        for d in dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        return dirs

    def _make_cgroup(self) -> str | None:
        root = host.pids_cgroup_root()
        if root is None or not self.policy.max_procs:
            return None
        try:
            self.cgroup = root / self.tmp.name
            self.cgroup.mkdir(exist_ok=True)
            (self.cgroup / "pids.max").write_text(str(self.policy.max_procs))
        except OSError:
            self.cgroup = None
        return str(self.cgroup) if self.cgroup else None

    def spec(self, writable: list[str]) -> dict[str, Any]:
        p = self.policy
        return {"writable": writable, "deny_tcp": not p.network, "memory_mb": p.memory_mb, "max_procs": p.max_procs,
                "file_size_mb": p.file_size_mb, "open_files": p.open_files, "cpu_seconds": p.cpu_seconds,
                "reaper": self.protections.proc_isolated, "cgroup": self._make_cgroup(), "lifeline": None,
                "landlock": self.protections.writes_confined}

    def command(self, argv: list[str]) -> tuple[list[str], dict[str, str]]:
        """The wrapped command line and its environment."""
        writable = self._prepare_dirs()
        spec = self.spec(writable)
        spec["lifeline"] = getattr(self, "_lifeline_fd", None)
        env = scrubbed_env({"HOME": str(self.tmp), "TMPDIR": str(self.tmp), "PYTHONDONTWRITEBYTECODE": "1",
                            "PYTHONPATH": os.pathsep.join(x for x in (PACKAGE_PARENT, os.environ.get("PYTHONPATH"))
                                                          if x)})
        env["AWM_SANDBOXED"] = "1"  # a sandbox started from inside this one nests without mounts
        env.update(self.policy.env)
        inner = [sys.executable, "-m", "awm_engine.sandbox.init", json.dumps(spec), "--", *argv]
        if self.protections.proc_isolated:
            # unshare itself ignores INT/TERM/HUP (it would otherwise die and take the sandbox down at once):
            # pid 1 inside forwards them to the target, so a polite stop stays polite
            return ["/bin/sh", "-c", 'trap "" INT TERM HUP; exec "$@"', "awm-sandbox", host.unshare_path(),
                    *host.namespace_flags(self.policy.network), "--", *inner], env
        return inner, env

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        read_end = None
        if self.protections.proc_isolated:  # pid 1 inside watches this pipe: our death is the sandbox's
            read_end, self._lifeline = os.pipe()
        self._lifeline_fd = read_end
        command, env = self.command(argv)
        kwargs.setdefault("start_new_session", True)
        kwargs.setdefault("cwd", str(self.tmp))
        if read_end is not None:
            kwargs["pass_fds"] = tuple(kwargs.get("pass_fds", ())) + (read_end,)
        try:
            return subprocess.Popen(command, env=env, **kwargs)
        finally:
            if read_end is not None:
                os.close(read_end)

    def run(self, argv: list[str], timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run to completion (killed, with everything it started, at ``timeout``)."""
        if kwargs.pop("capture_output", False):
            kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = self.popen(argv, **kwargs)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
        finally:
            self.cleanup()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def cleanup(self) -> None:
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.cgroup is not None:
            try:
                self.cgroup.rmdir()  # empty once every process of the sandbox is gone
            except OSError:
                pass


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the sandbox's process group (with a pid namespace, that ends every process inside it)."""
    import signal

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass
