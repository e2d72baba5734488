"""The shell blocks and relative links of README.md and docs/*.md, for tests/test_docs.py.

A shell block is a fenced block tagged ``bash``, ``sh`` or ``console``. Right before its fence (blank lines
allowed) an HTML comment may say what it needs that a test cannot have::

    <!-- needs: model endpoint -->

Blocks without one are run by the test. What a block is documented to print is checked:

- ``# prints: TEXT`` at the end of a command line: TEXT occurs in the block's output;
- a ``console`` block: lines starting with ``$ `` are the commands, the lines after them their output;
- a ``text`` block right after the shell block (only blank lines between): its output.

Output lines are matched in order, each as a substring of an output line after trimming; a line ``…`` skips
any number of output lines (a stated output is a selection, not the whole of it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHELL_LANGS = {"bash", "sh", "console"}
# what a block may need that a test cannot have
NEEDS = {"model endpoint", "download", "gpu", "../shared", "network", "long-running TUI", "long-running"}
NEEDS_RE = re.compile(r"^<!--\s*needs:\s*(.+?)\s*-->$")
PRINTS_RE = re.compile(r"#\s*prints:\s*(.+?)\s*$")
FENCE_RE = re.compile(r"^(\s*)```(\S*)\s*$")
LINK_RE = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass
class Block:
    path: Path              # the Markdown file
    line: int               # 1-based line of the opening fence
    lang: str
    body: str               # the block's text (console: its commands only)
    needs: list[str]        # what it needs that a test cannot have; empty: the test runs it
    expected: list[str] = field(default_factory=list)  # output lines, in order ("…" skips)

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _fences(lines: list[str]):
    """(start index, end index, lang) of every fenced block."""
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        yield i, j, m.group(2)
        i = j + 1


def _needs_before(lines: list[str], start: int) -> list[str]:
    k = start - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    m = NEEDS_RE.match(lines[k].strip()) if k >= 0 else None
    return [n.strip() for n in m.group(1).split(",")] if m else []


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    fences = list(_fences(lines))
    found = []
    for n, (start, end, lang) in enumerate(fences):
        if lang not in SHELL_LANGS:
            continue
        content = lines[start + 1:end]
        expected: list[str] = []
        if lang == "console":
            commands = []
            for line in content:
                if line.startswith("$ "):
                    commands.append(line[2:])
                elif line.startswith("> ") and commands:
                    commands.append(line[2:])
                else:
                    expected.append(line)
            body = "\n".join(commands)
        else:
            body = "\n".join(content)
        for line in body.splitlines():
            m = PRINTS_RE.search(line)
            if m:
                expected.append(m.group(1))
        if n + 1 < len(fences):
            nstart, nend, nlang = fences[n + 1]
            if nlang == "text" and all(not x.strip() for x in lines[end + 1:nstart]):
                expected += lines[nstart + 1:nend]
        found.append(Block(path, start + 1, lang, body + "\n", _needs_before(lines, start),
                           [e.strip() for e in expected if e.strip()]))
    return found


def all_blocks() -> list[Block]:
    return [b for p in doc_files() for b in blocks(p)]


def missing_output(expected: list[str], output: str) -> str | None:
    """The first expected line not found in order in output (None: all found)."""
    out = [line.strip() for line in output.splitlines()]
    i = 0
    for want in expected:
        if want == "…":
            continue
        while i < len(out) and want not in out[i]:
            i += 1
        if i == len(out):
            return want
        i += 1
    return None


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    lines = path.read_text().splitlines()
    inside = set()
    for start, end, _ in _fences(lines):
        inside.update(range(start, end + 1))
    return {slug(m.group(2)) for i, line in enumerate(lines) if i not in inside
            for m in [re.match(r"^(#+)\s+(.*)$", line)] if m}


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link outside code (no scheme, not a bare #anchor)."""
    lines = path.read_text().splitlines()
    inside = set()
    for start, end, _ in _fences(lines):
        inside.update(range(start, end + 1))
    found = []
    for i, line in enumerate(lines):
        if i in inside:
            continue
        for m in LINK_RE.finditer(re.sub(r"`[^`]*`", "", line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            found.append((i + 1, target))
    return found
