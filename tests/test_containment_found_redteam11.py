"""Found by attacking awm as hostile environment code, verifiers and data would (red team 11); each test fails while
its gap is open:

- a tool's text holding a lone surrogate (its worker's answer is the environment's to forge: the JSON escape
  ``"\\ud800"``) made the health check raise ``UnicodeEncodeError`` while it wrote its cache — ``awm env test``
  over a data directory crashed with a traceback for every scenario in it, and the cache file was left empty;
"""
from __future__ import annotations

import asyncio
import json
import os

from tinyenv import make_env_dir

from awm_engine.data.catalog import Catalog
from awm_engine.runtime.pool import EnvPool

FORGE_SURROGATE = '''
import awm_engine.runtime.protocol as _protocol
_ok_reply = _protocol.ok_reply

def _forged(rid, result):
    if isinstance(result, dict) and "text" in result:
        result = {**result, "text": "x\\ud800y"}
    return _ok_reply(rid, result)

_protocol.ok_reply = _forged
'''


def test_a_tool_text_with_a_lone_surrogate_does_not_crash_the_health_check(tmp_path):
    """``awm env test`` gathers every scenario's health check: one that raised took the whole command down (no
    scenario's verdict was shown). The report is cached with the surrogate escaped, and reads back."""
    from awm_engine.runtime.health import _cache_path, cached_health, check_scenario

    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Forger": FORGE_SURROGATE, "Honest": ""})])

    async def go():
        async with EnvPool(workers=1) as pool:
            return [await check_scenario(pool, s) for s in catalog]

    reports = asyncio.run(go())
    assert [r.status for r in reports] == ["ok", "ok"]
    forger = catalog.get("forger")
    cached = cached_health(forger)
    assert cached is not None and cached["calls"] and cached["calls"][0]["text"] == "x\ud800y"
    assert not [n for n in os.listdir(_cache_path(forger).parent) if n.endswith(".tmp")]
    assert json.loads(_cache_path(catalog.get("honest")).read_text())["calls_ok"] == 2
