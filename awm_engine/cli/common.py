"""Helpers shared by the CLI verbs.

Untrusted text never reaches the terminal raw (``awm_engine.data.terminal``): everything printed through ``stdout``
and ``stderr`` (rich consoles) has its control characters made visible — strings before layout, and every other
segment (``Text`` objects, progress bars' text) as it is written, with no hyperlinks; ``echo`` does the same for
plain lines and ``print_json`` for JSON. Untrusted text inside rich markup still needs ``escape`` (``shown``), or
``[/red]`` in a name would be read as markup.
"""
from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterable

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

from awm_engine.data.catalog import Catalog
from awm_engine.data.names import normalize_scenario_name
from awm_engine.data.paths import MissingSampleEnvs
from awm_engine.data.terminal import is_safe, json_visible, visible


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
if not stdout.is_terminal:  # a pipe or file: 160 columns, unless COLUMNS says otherwise
    _columns = os.environ.get("COLUMNS", "")
    stdout = SafeConsole(soft_wrap=True, width=int(_columns) if _columns.isdigit() and int(_columns) > 0 else 160)
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


AGENT_RUN_FILES = ("trajectory.json", "events.jsonl", "results.jsonl", "session.json")  # a run is there


def out_dir(path: str | os.PathLike | None, holds: tuple[str, ...] = ()) -> Path | None:
    """``--out``, refused before anything starts when it names something other than a directory, or a directory
    that already has one of the files ``holds`` names (a run of its own) — a second run there would mix its records
    with the first's."""
    if path is None:
        return None
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any((out / name).exists() for name in holds):
        raise CliError(f"{out} already holds a run; give another --out (or remove that directory)")
    return out


TERMINATED = 143  # exit code of a verb stopped by SIGTERM (128 + 15), once its clean-up has run


class Terminated(KeyboardInterrupt):
    """SIGTERM stopped the verb (after its clean-up, as Ctrl-C does); ``code`` is its exit code. A KeyboardInterrupt,
    so every verb that reports an interruption (where a run's finished part is, how to resume) reports this too."""

    def __init__(self, code: int = TERMINATED):
        super().__init__("terminated")
        self.code = code


def interrupted_code(exc: BaseException) -> int:
    """The exit code of a verb stopped by ``exc``: 130 for Ctrl-C, 143 (or the verb's own code) for SIGTERM."""
    return exc.code if isinstance(exc, Terminated) else 130


_sigterm: dict[str, bool] | None = None  # the state of the running ``run_async``, if any


def ignore_sigterm() -> None:
    """From now on a SIGTERM (and, under ``run_async(..., own_sigint=True)``, a Ctrl-C) does not stop the running
    ``run_async`` (its clean-up has started: interrupting it would leave what it is removing behind)."""
    if _sigterm is not None:
        _sigterm["ignored"] = True


def stop_requested() -> bool:
    """Whether a SIGTERM or a Ctrl-C has stopped the running ``run_async`` (its main task is, or is about to be,
    cancelled)."""
    return _sigterm is not None and bool(_sigterm["terminated"] or _sigterm["interrupted"])


STILL_STOPPING = b"still stopping: the clean-up finishes on its own (SIGKILL abandons it)\n"


def run_async(main: Coroutine[Any, Any, Any], sigterm_code: int = TERMINATED, own_sigint: bool = False) -> Any:
    """``asyncio.run(main)`` with SIGTERM handled as Ctrl-C is: the main task is cancelled, so every clean-up in it
    runs (pools closed, sandboxes stopped, their directories and mounts removed), and then ``Terminated`` is raised
    (exit ``sigterm_code``). SIGTERMs after the first, or after ``ignore_sigterm``, are ignored until the loop is
    gone: they would only interrupt the clean-up (SIGKILL still stops the process; the next pool start sweeps what
    it left).

    ``own_sigint``: Ctrl-C too is handled here rather than by asyncio's runner (whose second SIGINT raises
    ``KeyboardInterrupt`` wherever the clean-up happens to be): the first SIGINT or SIGTERM cancels the main task
    (a task that returns all the same returns its value; one that is cancelled raises ``KeyboardInterrupt`` for a
    SIGINT), and every later one is ignored with a note on stderr — a SIGINT sent by ``timeout`` and by the user at
    once, or a second Ctrl-C, no longer cuts short the saving of what the first one stops. Once the loop is gone
    both signals stay ignored (the process is on its way out: one landing now would only change its exit code);
    it is meant for a command's last act."""
    global _sigterm
    state: dict[str, Any] = {"terminated": False, "interrupted": False, "ignored": False, "task": None,
                             "loop": None, "noted": False}

    def on_signal(signum, frame) -> None:
        if state["terminated"] or state["ignored"] or (own_sigint and state["interrupted"]):
            if own_sigint and not state["noted"] and state["task"] is not None:
                state["noted"] = True
                try:
                    os.write(2, STILL_STOPPING)
                except OSError:
                    pass
            return
        if signum == signal.SIGINT:
            state["interrupted"] = True
            if state["task"] is None:
                raise KeyboardInterrupt
        else:
            state["terminated"] = True
            if state["task"] is None:  # before the loop runs: nothing to clean up yet
                raise Terminated(sigterm_code)
        state["loop"].call_soon_threadsafe(state["task"].cancel)

    async def wrapper() -> Any:
        state["task"], state["loop"] = asyncio.current_task(), asyncio.get_running_loop()
        try:
            return await main
        finally:
            state["ignored"] = True  # asyncio.run's own shutdown (cancelling what is left) runs undisturbed

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT) if own_sigint else (signal.SIGTERM,):
            previous[signum] = signal.signal(signum, on_signal)
    _sigterm = state
    try:
        return asyncio.run(wrapper())
    except (asyncio.CancelledError, KeyboardInterrupt) as exc:
        if state["terminated"] and not isinstance(exc, Terminated):
            raise Terminated(sigterm_code) from None
        if isinstance(exc, asyncio.CancelledError) and state["interrupted"]:
            raise KeyboardInterrupt from None
        raise
    finally:
        _sigterm = None
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if own_sigint else handler)
        if inspect.getcoroutinestate(main) == inspect.CORO_CREATED:  # stopped before it started
            main.close()


# engine errors that mean unusable input (a run file from a newer awm, a directory that is not a run, default data
# that is missing): every verb reports them like a CliError, as ``error: …`` with exit code 2
def input_errors() -> tuple[type[Exception], ...]:
    """The engine errors of unusable input: imported when an error is being caught (``except (…,
    *input_errors())`` evaluates it then), so a command that raises none never loads the evaluation modules."""
    from awm_engine.data.run_formats import RunFormatError
    from awm_engine.eval.runner import RunLocked
    from awm_engine.eval.runs import NotAnEvalRun

    return (RunFormatError, NotAnEvalRun, RunLocked, MissingSampleEnvs)


def add_data_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", action="append", metavar="DIR",
                        help="AWM data directory (repeatable); default: the bundled sample_envs/")


def load_catalog(args: argparse.Namespace, quiet: bool = False, only: Iterable[str] | None = None) -> Catalog:
    """The catalog of ``--data``, its issues printed on stderr (unless ``quiet``). With ``only`` (scenario names),
    just those scenarios' issues are printed, and a count of the others (``awm catalog list`` shows them all)."""
    catalog = Catalog.load(args.data)
    if not quiet:
        issues = catalog.issues
        if only:
            keys = {normalize_scenario_name(name) for name in only}
            issues = [i for i in catalog.issues if i.scenario in keys]
            others = len(catalog.issues) - len(issues)
        for issue in issues:
            colour = "red" if issue.level == "error" else "yellow"
            stderr.print(f"[{colour}]{shown(issue)}[/{colour}]", highlight=False, markup=True)
        if only and others:
            stderr.print(f"[dim]{others} catalog {'issue' if others == 1 else 'issues'} of other scenarios or "
                         "files not shown (awm catalog list shows them)[/dim]", highlight=False)
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


def fit_columns(build: Callable[[list[str]], Any], columns: list[str], drop_order: Iterable[str],
                console: Console | None = None) -> tuple[Any, list[str]]:
    """The table ``build(shown_columns)`` with as many of ``columns`` as fit ``console``'s width: while its narrowest
    rendering is wider than the console, the next column of ``drop_order`` is left out. Key columns (never in
    ``drop_order``) are built ``no_wrap`` by the caller, so they are never cut: other columns wrap or go first.
    Returns (table, the columns left out)."""
    console = console or stdout
    shown_columns, dropped = list(columns), []
    table = _least_widths(build(shown_columns), console)
    for name in drop_order:
        if _least_width(table) <= console.width:
            break
        if name in shown_columns:
            shown_columns.remove(name)
            dropped.append(name)
            table = _least_widths(build(shown_columns), console)
    return table, dropped


def _least_width(table: Any) -> int:
    """The width of ``table`` with every column at its ``min_width``: cells, their padding, the box's rules."""
    _, right, _, left = table.padding
    rules = (len(table.columns) + 1 if table.show_edge else len(table.columns) - 1) if table.box else 0
    return sum((c.min_width or 0) + left + right for c in table.columns) + rules


def _least_widths(table: Any, console: Console) -> Any:
    """Give every column of a rich ``table`` the width its cells need to show whole (a column that wraps: its longest
    word), so a table too wide for the console is narrowed by leaving columns out, never by cutting cells to ``…``."""
    from rich.measure import Measurement

    for column in table.columns:
        wraps = column.overflow == "fold" and not column.no_wrap
        widths = [(m.minimum if wraps else m.maximum)
                  for m in (Measurement.get(console, console.options, cell) for cell in column.cells)]
        header = str(column.header).split() or [""]
        column.min_width = max([column.min_width or 0, *widths, *(len(word) for word in header)])
    return table


def print_fitted(build: Callable[[list[str]], Any], columns: list[str], drop_order: Iterable[str],
                 console: Console | None = None) -> list[str]:
    """Print ``fit_columns``'s table, and a line naming the columns left out (``--json`` has them)."""
    console = console or stdout
    table, dropped = fit_columns(build, columns, drop_order, console)
    console.print(table)
    if dropped:
        console.print(f"[dim]({len(dropped)} {'column' if len(dropped) == 1 else 'columns'} left out at this width: "
                      f"{escape(', '.join(dropped))}; widen the terminal or use --json)[/dim]", highlight=False,
                      soft_wrap=False)
    return dropped
