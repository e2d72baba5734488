"""The requests a tool call makes are encoded exactly as the reference's client (httpx, through fastapi-mcp) encodes
them, whether awm spells them itself (the plain ones) or asks httpx (the rest)."""
from __future__ import annotations

import random
import subprocess
import sys

import pytest

from awm_engine.runtime import asgi_call
from awm_engine.runtime.asgi_call import _httpx_request, _plain_request, encode_request

PATH_CHARS = "ab/.-_~9Z%?# é+:@!$&'()*,;=\x00"
VALUE_CHARS = "ab.-_~9Z %?#&=é+/:\x7f"


def _corpus(n: int, seed: int = 25):
    rng = random.Random(seed)

    def text(chars: str, most: int) -> str:
        return "".join(rng.choice(chars) for _ in range(rng.randint(0, most)))

    def value():
        if rng.random() < 0.5:
            return rng.choice([text("abc.-_~19", 6), rng.randint(-10**6, 10**6), 10**20])
        return rng.choice([text(VALUE_CHARS, 6), True, False, None, 1.5, -0.0, 1e-7, [1, "a"], {"k": 1}])

    for _ in range(n):
        path = "/" + text(PATH_CHARS if rng.random() < 0.5 else "ab/.-_~9Z", 12)
        query = {text("abc.-_~ %" if rng.random() < 0.2 else "abc.-_~", 4): value() for _ in range(rng.randint(0, 2))}
        headers = {text("abcX-", 5) or "x-h": text("ab ", 3)} if rng.random() < 0.1 else {}
        body = rng.choice([None, None, {}, {"a": value(), "b": [value(), {"c": value()}]}, {"t": text(VALUE_CHARS, 8)},
                           {"f": float("nan")}, {"s": "\ud800"}, {"deep": [[[1]]], "u": "雪"}])
        yield rng.choice(["get", "post", "put", "patch", "delete"]), path, query, headers, body


def _outcome(encode, *args):
    try:
        return encode(*args)
    except Exception as exc:  # noqa: BLE001 - what it raises is compared too: it becomes the call's result text
        return (type(exc).__name__, str(exc))


def test_plain_requests_are_encoded_as_httpx_encodes_them():
    plain = other = 0
    for case in _corpus(6000):
        mine = _outcome(_plain_request, *case)
        if mine is None:
            other += 1
            continue
        plain += 1
        assert mine == _outcome(_httpx_request, *case), case
    assert plain > 1200 and other > 1200  # both kinds were tried


@pytest.mark.parametrize("case, expected_path, query", [
    (("get", "/api/users/12", {}, {}, None), "/api/users/12", b""),
    (("get", "/api/items", {"page": 2, "sort": "name"}, {}, None), "/api/items", b"page=2&sort=name"),
    (("get", "/api/a/../b", {}, {}, None), "/api/b", b""),  # httpx's dot-segment rule, through httpx
    (("get", "/api/search", {"q": "two words"}, {}, None), "/api/search", b"q=two+words"),
    (("get", "/api/flags", {"on": True}, {}, None), "/api/flags", b"on=true"),
])
def test_the_scope_parts_a_call_gets(case, expected_path, query):
    encoded = encode_request(*case)
    assert (encoded.path, encoded.query) == (expected_path, query)


def test_a_body_and_its_headers():
    encoded = encode_request("post", "/api/refunds", {}, {}, {"reason": "late", "amount": 5, "note": "雪"})
    assert encoded.body == '{"reason":"late","amount":5,"note":"雪"}'.encode()
    assert encoded.headers == [(b"Host", b"apiserver"), (b"Content-Length", str(len(encoded.body)).encode()),
                               (b"Content-Type", b"application/json")]
    assert encode_request("post", "/api/x", {}, {}, None).headers == [(b"Host", b"apiserver"),
                                                                      (b"Content-Length", b"0")]
    with pytest.raises(ValueError, match="Out of range float"):
        encode_request("post", "/api/x", {}, {}, {"x": float("inf")})


def test_plain_calls_never_import_httpx():
    """httpx (5.7 MB) is loaded by a worker only for a request awm does not spell itself."""
    probe = ("import sys; from awm_engine.runtime.asgi_call import encode_request; "
             "encode_request('get', '/api/me', {'page': 1}, {}, None); "
             "encode_request('post', '/api/refunds', {}, {}, {'reason': 'x y', 'n': [1.5, None]}); "
             "print('httpx' in sys.modules); "
             "encode_request('get', '/api/search', {'q': 'two words'}, {}, None); print('httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
    assert "httpx" not in asgi_call.__dict__
