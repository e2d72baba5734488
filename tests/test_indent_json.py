"""``runtime/indent_json.dumps`` is ``json.dumps(indent=2, ensure_ascii=False)`` byte for byte on what ``json.loads``
returns, and ``asgi_call.response_text`` (every tool result's text) is unchanged by using it."""
from __future__ import annotations

import json
import random

import pytest

from awm_engine.runtime import indent_json
from awm_engine.runtime.asgi_call import AsgiResponse, response_text

ALPHABET = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "ß", "中", "😀", "\u2028",
            "\ufeff", "\ud800", "\udfff", "'", "<", "&"]
FLOATS = [0.0, -0.0, 1.5, -2.25, 1e308, -1e-308, 5e-324, 1e16, 123456789.123, 0.1, 1e-7, float("nan"),
          float("inf"), float("-inf")]
INTS = [0, 1, -1, 2 ** 31, -(2 ** 63), 10 ** 40, 7]


def _string(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))


def _value(rng: random.Random, depth: int):
    roll = rng.random()
    if depth <= 0 or roll < 0.45:
        return rng.choice([lambda: _string(rng), lambda: rng.choice(INTS), lambda: rng.choice(FLOATS),
                           lambda: None, lambda: True, lambda: False,
                           lambda: rng.randint(-10 ** 6, 10 ** 6), lambda: rng.uniform(-1e6, 1e6)])()
    if roll < 0.75:
        return {_string(rng): _value(rng, depth - 1) for _ in range(rng.randint(0, 5))}
    return [_value(rng, depth - 1) for _ in range(rng.randint(0, 5))]


def _corpus(count: int = 6000):
    rng = random.Random(20261207)
    for _ in range(count):
        # through JSON text and back: exactly the types and values json.loads gives a tool result's body
        yield json.loads(json.dumps(_value(rng, rng.randint(0, 6)), ensure_ascii=rng.random() < 0.5))


def test_equal_to_json_dumps_on_a_generated_corpus():
    seen = 0
    for value in _corpus():
        assert indent_json.dumps(value) == json.dumps(value, indent=2, ensure_ascii=False)
        seen += 1
    assert seen == 6000


@pytest.mark.parametrize("value", [{}, [], "", 0, None, True, False, [[]], [{}], {"": {}}, {"a": [1, [2, [3, {}]]]},
                                   [float("nan"), float("inf"), -0.0], {"k": "\ud800"}, 10 ** 300])
def test_edges(value):
    assert indent_json.dumps(value) == json.dumps(value, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("value", [(1, 2), {1: "a"}, {"a": b"x"}, {1, 2}, [object()]])
def test_other_types_raise_type_error(value):
    with pytest.raises(TypeError):
        indent_json.dumps(value)


@pytest.mark.parametrize("body", [
    b'{"id": 1, "name": "Dana", "tags": ["a", "b"], "score": 1.5, "ok": true, "none": null}',
    b'[{"a": {}}, {"b": []}, NaN, Infinity, -Infinity]',
    b'"just a string"', b'12', b'{"deep": ' + b'[' * 50 + b']' * 50 + b'}',
    b'not json', b'', b'{"broken": ', b'\xff\xfe',
    json.dumps({"\u00e9": "\ud800", "x": "中文"}, ensure_ascii=False).encode("utf-8", "surrogatepass"),
])
def test_a_tool_results_text_is_what_json_dumps_gives(body):
    response = AsgiResponse(200, body)
    try:
        expected = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        expected = body.decode("utf-8", errors="replace")
    assert response_text(response) == expected
