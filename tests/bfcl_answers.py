"""Multi-turn answers in BFCL's FC result format, built from call strings (the tests' shared helper; needs the
bfcl-eval wheel when called)."""
from __future__ import annotations

import json


def fc_turns(entry, turns: list[list[str]]) -> list[list]:
    """One FC step per turn that makes calls (``turns``: call strings as in the ground truth)."""
    from awm_engine.bench.bfcl import ground_truth

    docs = {d["name"]: d for d in entry.prompt["function"]}
    for held in (entry.prompt.get("missed_function") or {}).values():
        docs.update({d["name"]: d for d in held})
    return [[[{name: json.dumps(args)} for name, args in (ground_truth.parse_call(c, docs) for c in calls)]]
            if calls else [] for calls in turns]
