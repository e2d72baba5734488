"""The model's code runs apart from its checker (``bench/bfcl/untrusted.py``) and the verdicts stay the official
ones: values and backend states come back as data only (``state_codec``), and answers served that way — the
model's calls executed by the runner's child, the ground truth and the official checker in the worker — get
exactly the verdict bfcl-eval gives in one process. The codec tests need nothing; the rest need the bfcl-eval
wheel (``make bfcl``)."""
from __future__ import annotations

import datetime
import json
import math

import pytest
from bfcl_answers import fc_turns

from awm_engine.bench.bfcl import state_codec, wheel

needs_wheel = pytest.mark.skipif(wheel.problem() is not None,
                                 reason=f"{wheel.problem()} (this test needs the bfcl-eval wheel)")

if wheel.problem() is None:
    from awm_engine.bench.bfcl import checker, data
    from awm_engine.bench.bfcl.categories import GROUPS
    from awm_engine.bench.bfcl.sandboxed import CheckerHost


def roundtrip(value):
    return state_codec.decode(json.loads(json.dumps(state_codec.encode(value))))


def test_plain_values_come_back_equal_and_typed():
    when = datetime.datetime(2024, 9, 1, 10, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    values = [None, True, 0, -7, 10 ** 40, "é\n", 1.5, -0.0, math.inf, -math.inf, 2 + 3j, b"\x00\xff",
              bytearray(b"ab"), (1, [2, (3,)]), {1, "a"}, frozenset({2.5}), {1: "int", "1": "str", (2, 3): None},
              when, when.date(), datetime.time(10, 30), datetime.timedelta(days=-1, seconds=5, microseconds=7),
              [[], {}, ()], {"order_type": "buy", 12446: {"id": 12446}}]
    for value in values:
        back = roundtrip(value)
        assert back == value and type(back) is type(value), value
        if isinstance(value, dict):
            assert [type(k) for k in back] == [type(k) for k in value]  # keys keep their types and order
    assert math.copysign(1, roundtrip(-0.0)) == -1
    assert math.isnan(roundtrip(math.nan))


def test_sharing_and_cycles_are_kept():
    shared = [1]
    tree: dict = {"children": [shared, shared]}
    tree["parent"] = tree
    back = roundtrip(tree)
    assert back["parent"] is back and back["children"][0] is back["children"][1] == [1]


def test_what_is_not_data_is_an_opaque_stand_in():
    back = roundtrip(lambda: 1)
    assert isinstance(back, state_codec.Opaque) and repr(back).startswith("<function ") and "<lambda>" in repr(back)
    assert back != roundtrip(lambda: 1) and back == back  # equal only to itself
    assert isinstance(roundtrip(object()), state_codec.Opaque)


@pytest.mark.parametrize("data", [
    {"object": ["os", "system"], "id": 0, "attrs": {}},  # nothing outside the backend modules
    {"object": ["posix", "system"], "id": 0, "attrs": {}},
    {"object": [state_codec.BACKEND_MODULES + "nowhere", "Thing"], "id": 0, "attrs": {}},  # never imported
    {"object": [state_codec.BACKEND_MODULES + "gorilla_file_system", "datetime"], "id": 0, "attrs": {}},
    {"object": [state_codec.BACKEND_MODULES + "trading_bot", "CURRENT_TIME"], "id": 0, "attrs": {}},
    {"pickle": "80049505"}, {"list": [], "id": "x"}, {"ref": 3}, {"float": "1e", "x": 1}, [1, 2], 1.5,
    {"list": [], "id": 0, "more": 1}, {"dict": [[[1], 2]], "id": 0},  # an unhashable key
])
def test_anything_else_is_refused(data):
    if wheel.problem() is None:
        wheel.prepare(checker=True)
        checker.warm_up()  # the backend modules are imported: still no other class, no module attribute
    with pytest.raises(state_codec.CodecError):
        state_codec.decode(data)


def _answers():
    """Per multi-turn category, every 20th entry: its ground truth, and the ground truth less the last call of
    its first turn with two or more (the states differ there)."""
    cases = []
    for name in GROUPS["multi_turn"]:
        for entry in data.entries(name)[::20]:
            cases.append((entry, [list(c) for c in entry.ground_truth]))
            wrong = [list(c) for c in entry.ground_truth]
            turn = next((t for t, calls in enumerate(wrong) if len(calls) >= 2), None)
            if turn is not None:
                wrong[turn].pop()
                cases.append((entry, wrong))
    return cases


def _official(kind: str, **request) -> dict:
    """bfcl-eval's verdict in this process (its real eval, nothing routed anywhere), written as the host writes
    its answers (JSON: int keys become strings)."""
    try:
        if kind == "check":
            answer = checker.check_multi_turn(request["entry_id"], request["raw"], request["mode"])
        else:
            answer = checker.score_single(request["entry_id"], request["raw"], request["mode"], False)
        return json.loads(json.dumps(answer, default=repr))
    finally:
        checker.reset()


@needs_wheel
def test_multi_turn_answers_served_apart_get_the_official_verdicts_and_views():
    wheel.prepare(checker=True)
    checker.warm_up()
    cases = _answers()
    assert len(cases) >= 70
    requests = [("check", {"entry_id": e.id, "mode": "fc", "raw": fc_turns(e, turns)}) for e, turns in cases]
    views = [("states", {"entry_id": e.id, "mode": "fc", "raw": fc_turns(e, turns)}) for e, turns in cases[1::2]]
    with CheckerHost(workers=2) as pool:
        apart = pool.map([(k, {**r, "isolate": True}) for k, r in requests + views])
        together = pool.map(views)
    verdicts = [a["verdict"] for a in apart[:len(requests)]]
    assert {v["valid"] for v in verdicts} == {True, False}
    for (kind, request), verdict in zip(requests, verdicts):
        official = _official(kind, **request)["verdict"]
        assert (verdict["valid"], verdict.get("error_type")) == (official["valid"], official.get("error_type")), \
            request["entry_id"]
        if "0x" not in json.dumps(official):  # object reprs hold addresses; everything else is equal
            assert verdict == official, request["entry_id"]
    for view, plain in zip(apart[len(requests):], together):
        assert view == plain  # the backends' states came back whole: the same differences, to the character


@needs_wheel
def test_prompt_answers_whose_arguments_are_code_get_the_official_verdicts():
    """The decoder eval()s arithmetic and lambdas in prompt-mode arguments: served by the runner's child."""
    wheel.prepare(checker=True)
    checker.warm_up()
    entry = data.entries("simple")[0]
    texts = ["[calculate_triangle_area(base=10, height=5)]", "[calculate_triangle_area(base=5+5, height=5)]",
             "[calculate_triangle_area(base=2**3+2, height=10//2, unit='u'+'nits')]",
             "[calculate_triangle_area(base=(lambda: 10), height=5)]",
             "[calculate_triangle_area(base=x+1, height=5)]", "[calculate_triangle_area(base=1/0, height=5)]",
             "[calculate_triangle_area(base=-(3+7), height=5.0*1)]"]
    requests = [("score", {"entry_id": entry.id, "mode": "prompt", "raw": text, "display": False})
                for text in texts]
    with CheckerHost(workers=1) as pool:
        found = pool.map(requests)
    for (kind, request), answer in zip(requests, found):
        official = _official(kind, **request)["verdict"]
        assert answer["verdict"]["valid"] == official["valid"], request["raw"]
        if "0x" not in json.dumps(official):
            assert answer["verdict"] == official, request["raw"]
    assert [a["verdict"]["valid"] for a in found[:2]] == [True, True]
