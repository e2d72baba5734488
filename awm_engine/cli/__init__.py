"""The ``awm`` command line: one module per verb group; it parses, calls the engine and prints.
May import: every other engine subpackage (nothing in the engine imports it).

stdout carries data (tables or JSON); stderr carries narration.

Exit codes: 0 success, 1 the operation ran and failed, 2 bad usage or unusable input, 3 env serve's port is busy, 4 untrusted code refused
(the sandbox's namespace layer is unavailable and --unsafe-no-sandbox was not given), 130 interrupted (Ctrl-C), 143 stopped
by SIGTERM (after the same clean-up as Ctrl-C; ``env serve`` exits 0, a SIGTERM being how a server is stopped).
"""
from __future__ import annotations

import argparse
import os
import sys

from rich.markup import escape

from awm_engine.cli import (
    agent_cmd,
    bench_cmd,
    catalog_cmd,
    db_cmd,
    doctor_cmd,
    env_cmd,
    eval_cmd,
    gen_cmd,
    train_cmd,
)
from awm_engine.cli.common import INPUT_ERRORS, CliError, Terminated, interrupted_code, stderr
from awm_engine.sandbox.host import harden_parent
from awm_engine.sandbox.launcher import SandboxUnavailable


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="awm", description="Workbench for Agent World Model environments.")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="run untrusted code even where the sandbox's namespace layer is unavailable (weaker "
                             "protection; recorded in every run's metadata; see awm doctor sandbox)")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    catalog_cmd.register(verbs)
    db_cmd.register(verbs)
    env_cmd.register(verbs)
    agent_cmd.register(verbs)
    eval_cmd.register(verbs)
    train_cmd.register(verbs)
    gen_cmd.register(verbs)
    bench_cmd.register(verbs)
    doctor_cmd.register(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    harden_parent()  # nothing this process starts can read its environment (API keys) through /proc
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.unsafe_no_sandbox:
        os.environ["AWM_UNSAFE_NO_SANDBOX"] = "1"
    try:
        return int(args.func(args) or 0)
    except SandboxUnavailable as exc:
        stderr.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 4
    except (CliError, *INPUT_ERRORS) as exc:
        stderr.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return getattr(exc, "code", 2)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (``Terminated``) in a verb that runs ``run_async``
        stderr.print("terminated" if isinstance(exc, Terminated) else "interrupted")
        return interrupted_code(exc)


if __name__ == "__main__":
    sys.exit(main())
