"""Untrusted text made safe for a terminal: every character that could start or carry an escape sequence, move the
cursor, ring the bell or reorder what is shown is replaced by a visible escape.

``visible(text)`` replaces each of these characters by a Python-style escape of its code point — ``\\x1b`` for ESC,
``\\x07`` for BEL, ``\\x9b`` for the one-byte CSI, ``\\u202e`` for RIGHT-TO-LEFT OVERRIDE:

- C0 controls (U+0000–U+001F) except newline and tab; a carriage return directly before a newline is dropped
  (``\\r\\n`` is a line end, not an attack);
- DEL (U+007F) and the C1 controls (U+0080–U+009F);
- the bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069);
- lone surrogates (U+D800–U+DFFF), which no terminal encoding can write.

Everything else (accents, CJK, emoji, a literal backslash) is left as it is, so ``visible`` of ordinary text is the
text itself. The escape of a character is ambiguous with the same four or six characters typed literally; that is
the price of output that stays readable.

``json_visible(dumped)`` does the same for a JSON document made with ``ensure_ascii=False``: ``json.dumps`` escapes
C0 controls itself, but writes DEL, C1, bidi controls and lone surrogates raw; they become ``\\u`` escapes, so the
document parses to the same value.

The CLI (``awm_engine.cli.common``) and the TUI (``awm_tui.widgets.safe``) show untrusted text (tool results,
descriptions, task text, verifier and model output, anything read from environment data or runs) through these.
"""
from __future__ import annotations

import re

# what visible() escapes; json_visible() escapes the same set minus the C0 controls json.dumps already escapes
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    char = match.group()
    if char == "\r" and match.string.startswith("\n", match.end()):  # a CRLF line end: just the line end
        return ""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` (made a ``str``) with every terminal control character as a visible escape (see the module doc)."""
    text = text if isinstance(text, str) else str(text)
    return UNSAFE.sub(_escape, text) if UNSAFE.search(text) else text


def is_safe(text: str) -> bool:
    """True when ``text`` holds nothing ``visible`` would replace or drop."""
    return UNSAFE.search(text) is None


def json_visible(dumped: str) -> str:
    """A JSON document (``json.dumps(..., ensure_ascii=False)``) with DEL, C1, bidi controls and lone surrogates as
    ``\\uXXXX`` escapes: the same value, nothing a terminal acts on."""
    if not _JSON_UNSAFE.search(dumped):
        return dumped
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
