"""A request's line and headers, parsed strictly, and the plain replies awm's servers refuse a request with.

Built-in modules only: ``runtime/lean_front.py`` (``awm env serve``'s front process, which holds nothing but
Python's built-in modules) loads this file as it is, and so does the sandboxed worker (``mcp_http``).
"""
from __future__ import annotations

_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_TARGET_BAD = frozenset(range(0x21)) | {0x7f}  # a request target's forbidden bytes (controls, space, DEL)
_VALUE_BAD = frozenset(range(0x20)) - {0x09} | {0x7f}  # a header value's (controls but tab, DEL)
REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 413: "Payload Too Large",
           421: "Misdirected Request", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]] | None:
    """A request's line and headers (without the blank line), strictly: ``METHOD TARGET HTTP/1.x``, then
    ``name: value`` lines with token names, no folding, no control characters, one ``Content-Length``, ``Host`` and
    ``Transfer-Encoding`` at most. None for anything else."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0") or not parts[0] or \
            not _TOKEN.issuperset(parts[0]) or not parts[1] or not _TARGET_BAD.isdisjoint(parts[1]):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or not _TOKEN.issuperset(name):
            return None
        value = value.strip(b" \t")
        if not _VALUE_BAD.isdisjoint(value):
            return None
        key = name.decode("ascii").lower()
        if key in headers:
            if key in ("content-length", "host", "transfer-encoding"):
                return None
            headers[key] += ", " + value.decode("latin-1")
        else:
            headers[key] = value.decode("latin-1")
    return parts[0].decode("ascii"), parts[1].decode("latin-1"), parts[2].decode("ascii"), headers


def plain_reply(status: int, text: str, extra: dict[str, str] | None = None) -> bytes:
    """A refusal: ``status`` with ``text`` as its plain-text body, and the connection closed."""
    body = text.encode()
    head = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}", "content-type: text/plain; charset=utf-8",
            f"content-length: {len(body)}", "connection: close", *(f"{k}: {v}" for k, v in (extra or {}).items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
