"""Helpers shared by the CLI verbs.

Untrusted text never reaches the terminal raw (``awm_engine.data.terminal``): everything printed through ``stdout``
and ``stderr`` (rich consoles) has its control characters made visible — strings before layout, and every other
segment (``Text`` objects, progress bars' text) as it is written, with no hyperlinks; ``echo`` does the same for
plain lines and ``print_json`` for JSON. Untrusted text inside rich markup still needs ``escape`` (``shown``), or
``[/red]`` in a name would be read as markup.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

from awm_engine.data.catalog import Catalog
from awm_engine.data.run_formats import RunFormatError
from awm_engine.data.terminal import is_safe, json_visible, visible
from awm_engine.eval.batch import RunLocked
from awm_engine.eval.runs import NotAnEvalRun


class SafeConsole(Console):
    """A rich console that writes no control character it did not make itself: strings are made ``visible`` before
    markup and layout (so tables stay aligned); any other text segment (a ``Text`` built from untrusted text) as it
    is written; styles lose their hyperlinks (OSC 8, whose target markup could set). The console's own control
    segments (a progress bar's cursor moves) pass."""

    def render_str(self, text: str, **kwargs):
        return super().render_str(visible(text), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(_safe_segments(buffer))


def _safe_segments(buffer: Iterable[Segment]):
    for segment in buffer:
        text, style, control = segment
        if control:
            yield segment
            continue
        if style is not None and style.link:
            style = style.update_link(None)
        yield Segment(text if is_safe(text) else visible(text), style)


stdout = SafeConsole(soft_wrap=True)
if not stdout.is_terminal:
    stdout = SafeConsole(soft_wrap=True, width=160)
# narration never wraps (a path cut in two cannot be pasted back); tables on stderr still fit a terminal
stderr = SafeConsole(stderr=True, soft_wrap=True, highlight=False)


def shown(text: object) -> str:
    """Untrusted text for a place rich reads as markup (``print``, a table cell, a title): visible and escaped."""
    return escape(visible(text))


def echo(text: object = "", *, err: bool = False, end: str = "\n") -> None:
    """A plain line on stdout (or stderr) with untrusted text in it: control characters made visible."""
    stream = sys.stderr if err else sys.stdout
    stream.write(visible(text) + end)


class CliError(Exception):
    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


# engine errors that mean unusable input (a run file from a newer awm, a directory that is not a run):
# every verb reports them like a CliError, as ``error: …`` with exit code 2
INPUT_ERRORS: tuple[type[Exception], ...] = (RunFormatError, NotAnEvalRun, RunLocked)


def add_data_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", action="append", metavar="DIR",
                        help="AWM data directory (repeatable); default: the bundled sample_envs/")


def load_catalog(args: argparse.Namespace, quiet: bool = False) -> Catalog:
    catalog = Catalog.load(args.data)
    if not quiet:
        for issue in catalog.issues:
            colour = "red" if issue.level == "error" else "yellow"
            stderr.print(f"[{colour}]{shown(issue)}[/{colour}]", highlight=False, markup=True)
    if not len(catalog):
        raise CliError("no scenarios found in " + ", ".join(map(str, catalog.dirs)))
    return catalog


def get_scenario(catalog: Catalog, name: str):
    try:
        return catalog.get(name)
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from None


def print_warning(message: str) -> None:
    """One ``warning: …`` line on stderr (before a run: what it will not be able to do as asked)."""
    stderr.print(f"[yellow]warning:[/yellow] {shown(message)}", highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """JSON on stdout: ``json.dumps`` escapes C0 controls; ``json_visible`` the DEL, C1 and bidi controls it leaves."""
    sys.stdout.write(json_visible(json.dumps(data, indent=2, ensure_ascii=False, default=str)) + "\n")
