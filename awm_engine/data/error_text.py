"""The first line of an environment error: the exception's type and message from the environment's own code.

A Python traceback ends with the exception line (``sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE
constraint failed: vehicles.vin``), which some libraries follow with lines of their own (SQLAlchemy's ``[SQL: …]``,
``[parameters: …]`` and ``(Background on this error at: …)``); in a chain (``During handling of …``) the last
exception is the one raised. ``exception_line`` finds that line and shortens it to ``IntegrityError: UNIQUE
constraint failed: vehicles.vin``; every summary of an environment error (verdict, transcript, replay, dashboard,
``awm replay``, ``awm verify``) leads with it and shows the traceback after it.
"""
from __future__ import annotations

import re

_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
_NOT_EXCEPTIONS = ("Traceback (most recent call last):", "During handling of the above exception",
                   "The above exception was the direct cause")
_WRAPPED = re.compile(r"^\((?:[\w.]+\.)?(\w+)\)\s*")  # SQLAlchemy's "(sqlite3.IntegrityError) " before the message


def exception_line(traceback: str | None) -> str:
    """``Type: message`` of the exception a traceback ends with ('' when the text holds none)."""
    if not traceback:
        return ""
    found = ""
    lines = traceback.strip().splitlines()
    for i, line in enumerate(lines):
        if not line or line[0].isspace() or line.startswith(_NOT_EXCEPTIONS) or line.startswith("["):
            continue
        match = _EXCEPTION.match(line.rstrip())
        if not match:
            continue
        previous = lines[i - 1] if i else ""
        # an exception line follows a frame's source line (indented) or the "Traceback" header; a library's
        # trailing note such as "(Background on this error at: …)" does not match the pattern at all
        if i and not (previous[:1].isspace() or previous.startswith(_NOT_EXCEPTIONS)):
            continue
        name = match.group("type").rsplit(".", 1)[-1]
        if not (name[:1].isupper() or "." in match.group("type")):
            continue
        message = (match.group("message") or "").strip()
        message = _WRAPPED.sub("", message)
        found = f"{name}: {message}" if message else name
    if not found:  # no traceback shape: the text's first non-empty line
        found = next((line.strip() for line in lines if line.strip()), "")
    return found


def error_title(text: str | None, traceback: str | None = None) -> str:
    """The line that leads an error's summary: the exception line of the traceback when there is one, else the
    first line of the error text."""
    line = exception_line(traceback)
    if line:
        return line
    return next((part.strip() for part in (text or "").splitlines() if part.strip()), "")
