"""The minimal read-only filesystem view of a sandbox: what it sees, and nothing else of the host.

- the system's ``/usr`` (and the merged-usr links ``/bin``, ``/lib`` … or those directories where they are real);
- the Python runtime awm runs on (``sys.base_prefix``) and its environment (``sys.prefix``: the venv's packages);
- awm's own code: the ``awm_engine`` package directory only (not the checkout: no tests, sample data, git);
- from ``/etc`` only the dynamic linker's cache, the time zone, and a ``passwd``/``group`` naming the sandbox
  user (network sandboxes also get ``hosts``, ``resolv.conf`` and the CA certificates);
- the policy's extra read-only paths and its writable directories.

Every source is opened by the parent (``O_PATH``) and bound by descriptor, so the unprivileged uid bubblewrap
runs as needs no access to the directories above it (``/root`` holding a pyenv Python, say).
"""
from __future__ import annotations

import functools
import os
import site
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = str(Path(__file__).resolve().parents[1])  # .../awm_engine
PACKAGE_PARENT = str(Path(PACKAGE_DIR).parent)
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
ETC_NETWORK = ("/etc/hosts", "/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/nsswitch.conf",
               "/etc/host.conf", "/etc/gai.conf")


@dataclass(frozen=True)
class Entry:
    kind: str  # ro | rw | symlink | data
    source: str  # a host path (ro, rw), a link target (symlink), the file's text (data)
    dest: str


def _covered(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@functools.lru_cache(maxsize=1)
def python_paths() -> tuple[str, ...]:
    """The directories the Python runtime and its packages live in (read-only inside)."""
    roots: list[str] = []
    candidates = [sys.base_prefix, sys.prefix, *site.getsitepackages()]
    try:
        candidates.append(site.getusersitepackages())
    except Exception:  # noqa: BLE001
        pass
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and not _covered(real, roots) and not _covered(real, ["/usr"]):
            roots = [r for r in roots if not _covered(r, [real])] + [real]
    # a symlinked interpreter (a venv's bin/python -> the runtime) must resolve inside
    exe = os.path.realpath(sys.executable)
    if not _covered(exe, roots + ["/usr"]):
        roots.append(os.path.dirname(exe))
    return tuple(roots)


def _passwd(uid: int) -> str:
    return f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:{uid}:{uid}:awm sandbox:/tmp:/usr/sbin/nologin\n" \
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"


def _group(gid: int) -> str:
    return f"root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n"


def entries(readable: list[str], writable: list[str], network: bool = False, uid: int = 1000) -> list[Entry]:
    """The view's mounts in an order bubblewrap can apply (parents before what is mounted below them)."""
    out: list[Entry] = []
    out.append(Entry("ro", "/usr", "/usr"))
    for top in TOP_LEVEL:
        if os.path.islink(top):
            out.append(Entry("symlink", os.readlink(top), top))
        elif os.path.isdir(top):
            out.append(Entry("ro", top, top))
    for path in (*ETC_FILES, *(ETC_NETWORK if network else ())):
        if os.path.exists(path):
            out.append(Entry("ro", os.path.realpath(path), path))
    out.append(Entry("data", _passwd(uid), "/etc/passwd"))
    out.append(Entry("data", _group(uid), "/etc/group"))
    system = ["/usr", *TOP_LEVEL]
    for path in python_paths():
        if not _covered(path, system):
            out.append(Entry("ro", path, path))
    if not _covered(PACKAGE_DIR, list(python_paths())):
        out.append(Entry("ro", PACKAGE_DIR, PACKAGE_DIR))
    for path in readable:
        real = os.path.realpath(path)
        if os.path.exists(real):
            out.append(Entry("ro", real, real))
    for path in writable:
        out.append(Entry("rw", path, path))
    # bind parents before children, each after its missing ancestors were made (0755: bubblewrap would make them
    # 0700 and root's, which the sandbox uid could not even traverse); links and data files first
    mounts = sorted((e for e in out if e.kind in ("ro", "rw")), key=lambda e: e.dest.count("/"))
    ordered = [Entry("dir", "", "/etc")] + [e for e in out if e.kind not in ("ro", "rw")]
    made = {"/", "/tmp", "/etc", "/proc", "/dev"}
    read_only: list[str] = []
    for entry in mounts:
        parts = Path(entry.dest).parts
        for i in range(2, len(parts)):
            ancestor = str(Path(*parts[:i]))
            if ancestor in made or _covered(ancestor, read_only):
                continue
            ordered.append(Entry("dir", "", ancestor))
            made.add(ancestor)
        ordered.append(entry)
        made.add(entry.dest)
        if entry.kind == "ro":
            read_only.append(entry.dest)
    return ordered


_data_dir: str | None = None


def data_file(text: str) -> str:
    """A read-only host file with ``text`` to bind (the synthetic passwd and group): written once per process in a
    private directory (removed at exit), so a sandbox started by someone else's spawner (an MCP stdio client) needs
    no inherited descriptor."""
    global _data_dir
    import atexit
    import hashlib
    import shutil

    if _data_dir is None or not os.path.isdir(_data_dir):
        from awm_engine.sandbox.owned import owned_dir

        _data_dir = str(owned_dir("awm_view_"))  # marked: if this process is killed, the next pool start removes it
        os.chmod(_data_dir, 0o755)
        atexit.register(shutil.rmtree, _data_dir, True)
    path = os.path.join(_data_dir, hashlib.sha256(text.encode()).hexdigest()[:16])
    if not os.path.exists(path):
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    return path
