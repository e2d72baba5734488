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
