"""Helpers shared by the CLI verbs."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from awm_engine.data.catalog import Catalog
from awm_engine.data.run_formats import RunFormatError
from awm_engine.eval.batch import RunLocked
from awm_engine.eval.runs import NotAnEvalRun

stdout = Console(soft_wrap=True)
if not stdout.is_terminal:
    stdout = Console(soft_wrap=True, width=160)
# narration never wraps (a path cut in two cannot be pasted back); tables on stderr still fit a terminal
stderr = Console(stderr=True, soft_wrap=True, highlight=False)


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
            stderr.print(f"[{colour}]{escape(str(issue))}[/{colour}]", highlight=False, markup=True)
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
    stderr.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
