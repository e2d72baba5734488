"""Attacks on the BFCL sandbox that still succeed (found by a security review of ``untrusted.py``): each test
fails until the product is fixed."""
from __future__ import annotations

import pytest

from awm_engine.bench.bfcl import wheel

needs_wheel = pytest.mark.skipif(wheel.problem() is not None,
                                 reason=f"{wheel.problem()} (this test needs the bfcl-eval wheel)")

if wheel.problem() is None:
    from awm_engine.bench.bfcl import data
    from awm_engine.bench.bfcl.sandboxed import CheckerHost

# the model's code: a grandchild in a session of its own (out of reach of the runner's killpg) fills the
# sandbox's process limit with sleepers that outlive the request
FORK_BOMB = ("import os,time\n"
             "r,w=os.pipe()\n"
             "if os.fork()==0:\n"
             " os.setsid()\n"
             " for i in range(600):\n"
             "  try:\n"
             "   if os.fork()==0:\n"
             "    time.sleep(40); os._exit(0)\n"
             "  except OSError: break\n"
             " os.write(w,b'x'); time.sleep(40); os._exit(0)\n"
             "os.read(r,1)\n")  # the request returns once the process limit is full


@needs_wheel
def test_a_setsid_grandchild_cannot_deny_later_honest_answers_their_verdict():
    wheel.prepare(checker=True)
    entry = data.entries("simple")[0]
    hostile = f"[calculate_triangle_area(base=len(str(exec({FORK_BOMB!r})))*0+10, height=5)]"
    honest = "[calculate_triangle_area(base=5+5, height=5)]"  # not literal: served by the runner's child
    request = {"entry_id": entry.id, "mode": "prompt", "display": False}
    with CheckerHost(workers=1) as pool:
        assert pool.call("score", raw=honest, **request)["verdict"]["valid"] is True
        pool.map([("score", {**request, "raw": hostile})])
        after = pool.map([("score", {**request, "raw": honest})])[0]
    assert isinstance(after, dict) and after["verdict"]["valid"] is True, after
