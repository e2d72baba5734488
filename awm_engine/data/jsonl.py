"""Reading and writing JSONL the way AWM does, with errors that name the file and line."""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator


@dataclass
class JsonlError:
    """A line that could not be used. ``line`` is 1-based."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class JsonlRow:
    line: int
    offset: int
    data: dict[str, Any]


MAX_DEPTH = 100  # AWM rows nest about ten levels; a row nested near Python's recursion limit breaks whatever reads it
# AWM rows are at most a few hundred KB (a scenario's whole code); a line is read whole into memory, so a data file
# of one endless line (a sparse file: ``truncate -s 1T``, no disk space, no newline) would take all of the host's
MAX_LINE_BYTES = 64 * 1024 * 1024


def open_regular(path: Path | str):
    """``path`` opened for binary reading, only if it is a regular file when opened: a FIFO (or a file swapped for
    one after a check) would block the open for ever, a device would be read without end. OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and objects in ``value`` nest deeper than ``limit`` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


MAX_FILE_BYTES = 256 << 20  # a whole-file read of data (a benchmark's database or task file): real ones are megabytes


def read_bounded(path: Path | str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (``open_regular``), or OSError when it holds more than ``limit``: a
    sparse file of a terabyte takes no disk space, and read whole it would take the host's memory."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"{path}: larger than {limit >> 20} MiB; not read")
    return data


def iter_jsonl(path: Path | str, errors: list[JsonlError]) -> Iterator[JsonlRow]:
    """Yield each object line with its 1-based line number and byte offset.

    Unlike the reference loader (which raises on the first bad line, blank lines included) a bad
    line is recorded in ``errors`` and skipped, so the other rows still load; so is a row nested deeper than
    ``MAX_DEPTH`` (near Python's recursion limit it fails whatever parses or walks it later). A trailing newline
    at the end of the file is fine; blank lines elsewhere are reported. A line longer than ``MAX_LINE_BYTES`` is
    reported and ends the file's reading (what follows it is not read). Only a regular file is read (OSError
    otherwise).
    """
    path = Path(path)
    offset = 0
    with open_regular(path) as fh:
        for number, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES:
                errors.append(JsonlError(str(path), number, f"line longer than {MAX_LINE_BYTES >> 20} MiB; the rest "
                                         "of the file is not read"))
                return
            start = offset
            offset += len(raw)
            text = raw.strip()
            if not text:
                errors.append(JsonlError(str(path), number, "blank line (the AWM reference loader rejects these)"))
                continue
            try:
                data = json.loads(text)
            except (ValueError, UnicodeDecodeError) as exc:
                errors.append(JsonlError(str(path), number, f"invalid JSON: {exc}"))
                continue
            except RecursionError:
                errors.append(JsonlError(str(path), number, f"JSON nested deeper than {MAX_DEPTH} levels"))
                continue
            if too_deep(data):  # read again later (lazily, from deeper in a call stack): it must parse there too
                errors.append(JsonlError(str(path), number, f"JSON nested deeper than {MAX_DEPTH} levels"))
                continue
            if not isinstance(data, dict):
                errors.append(JsonlError(str(path), number, f"expected a JSON object, got {type(data).__name__}"))
                continue
            yield JsonlRow(number, start, data)


def text_lines(path: Path | str) -> list[str]:
    """The lines of a JSONL file awm wrote, split at newlines only: ``str.splitlines`` also splits at U+2028, U+2029,
    U+0085 and U+001C–U+001E, which JSON leaves raw in strings (``ensure_ascii=False``), so any text in a record
    (a tool's answer) could break its line in two."""
    return Path(path).read_text(encoding="utf-8").split("\n")


def read_line_at(path: Path | str, offset: int) -> dict[str, Any]:
    """Parse the single JSONL line starting at ``offset`` (for lazy records): an object, as indexed, or ValueError
    (the file changed since: a line cut short, longer than ``MAX_LINE_BYTES``, nested too deep, not an object)."""
    with open_regular(path) as fh:
        fh.seek(offset)
        raw = fh.readline(MAX_LINE_BYTES + 1)
    if len(raw) > MAX_LINE_BYTES:
        raise ValueError(f"{path}: the line at byte {offset} is longer than {MAX_LINE_BYTES >> 20} MiB")
    try:
        data = json.loads(raw)
    except RecursionError:
        data = None
    if not isinstance(data, dict) or too_deep(data):
        raise ValueError(f"{path}: the line at byte {offset} is no longer the object indexed there (the file changed)")
    return data


def dumps_text(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)`` — unless ``obj`` holds a lone surrogate (what a JSON
    ``"\\ud800"`` escape from a model, a tool or a verifier decodes to), which no UTF-8 file can hold: then every
    non-ASCII character is escaped, so the document still reads back exactly (and writing it never raises)."""
    text = json.dumps(obj, ensure_ascii=False, **kwargs)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, **kwargs)
    return text


def dumps_line(obj: Any) -> str:
    return dumps_text(obj) + "\n"


def write_jsonl(path: Path | str, rows: list[Any]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(dumps_line(row))
