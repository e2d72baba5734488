"""The ``awm`` command line: one module per verb group; it parses, calls the engine and prints.
May import: every other engine subpackage (nothing in the engine imports it).

stdout carries data (tables or JSON); stderr carries narration.

Exit codes: 0 success, 1 the operation ran and failed, 2 bad usage or unusable input, 3 env serve's port is busy, 4 untrusted code refused
(the sandbox's namespace layer is unavailable and --unsafe-no-sandbox was not given), 130 interrupted (Ctrl-C), 143 stopped
by SIGTERM (after the same clean-up as Ctrl-C; ``env serve`` exits 0, a SIGTERM being how a server is stopped).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# every verb, the module that registers it, and its one-line help (``awm --help`` lists them without importing the
# modules: a command imports only its own verb's module, so ``awm env serve`` does not load the agent, eval, bench …)
VERBS: dict[str, tuple[str, str]] = {
    "catalog": ("catalog_cmd", "list and inspect environments"),
    "db": ("db_cmd", "build databases exactly as AWM does; diff two databases"),
    "env": ("env_cmd", "serve environments over MCP, call tools, health-check"),
    "agent": ("agent_cmd", "run an agent on a task"),
    "verify": ("agent_cmd", "verify a run directory and compute its reward"),
    "replay": ("agent_cmd", "step through a run directory; database diff after any step"),
    "fake-llm": ("agent_cmd", "serve a scripted OpenAI-compatible chat completions API"),
    "eval": ("eval_cmd", "batch evaluation: run, resume, report, compare"),
    "train": ("train_cmd", "training data from rollouts; task rows for online trainers"),
    "gen": ("gen_cmd", "synthesize environments: scenario → tasks → db → sample → spec → env → verifiers, each "
                       "executed and repaired from its errors"),
    "bench": ("bench_cmd", "benchmarks through the same engine: BFCLv3, τ²-bench, MCP-Universe, one report across "
                           "them"),
    "doctor": ("doctor_cmd", "check this machine (awm doctor sandbox)"),
}


def verb_help(verb: str) -> str:
    return VERBS[verb][1]


def _verb_of(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in VERBS else None
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``argv``, only the parsers of its verb's module are built in full (the other verbs
    are listed with their help)."""
    parser = argparse.ArgumentParser(prog="awm", description="Workbench for Agent World Model environments.")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="run untrusted code even where the sandbox's namespace layer is unavailable (weaker "
                             "protection; recorded in every run's metadata; see awm doctor sandbox)")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    wanted = _verb_of(argv) if argv is not None else None
    modules = list(dict.fromkeys(module for module, _ in VERBS.values()))
    if argv is not None:
        modules = [VERBS[wanted][0]] if wanted else []
    registered: set[str] = set()
    for name in modules:
        before = set(verbs.choices)
        importlib.import_module(f"awm_engine.cli.{name}").register(verbs)
        registered |= set(verbs.choices) - before
    for verb, (_, help_text) in VERBS.items():  # the others: listed, never parsed
        if verb not in registered:
            verbs.add_parser(verb, help=help_text)
    # ``awm --help`` lists verbs in this table's order whatever was built first
    verbs._choices_actions.sort(key=lambda action: list(VERBS).index(action.dest))
    return parser


def main(argv: list[str] | None = None) -> int:
    entry = argv is None
    if entry:  # this process's program (not a call from another): ``awm env serve`` may exec (lean_handoff)
        argv = sys.argv[1:]
        from awm_engine.runtime.lean_handoff import PROCESS_ENTRY

        PROCESS_ENTRY.append(True)
    resuming = "AWM_SERVE_STATE_FD" in os.environ  # ``awm env serve`` taking its episode back: nothing to prepare
    if not entry or [a for a in argv if a != "--unsafe-no-sandbox"][:2] != ["env", "serve"]:
        return _main(argv, resuming)
    # a server: a Ctrl-C or SIGTERM while it starts (its imports take half a second) stops it as one that comes later
    # does, before anything was created (it was a traceback, or the SIGTERM killed the process)
    import signal

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return _main(argv, resuming)
    except KeyboardInterrupt:
        os.write(2, b"stopped before serving\n")
        return 0


def _main(argv: list[str], resuming: bool) -> int:
    if (argv[:1] == ["env"] or argv[:2] == ["--unsafe-no-sandbox", "env"]) and not resuming:  # (~0.25 s ahead)
        from awm_engine.cli.serve_early import prepare

        prepare(argv)
    from rich.markup import escape

    from awm_engine.cli.common import CliError, Terminated, input_errors, interrupted_code, stderr
    from awm_engine.sandbox.host import harden_parent
    from awm_engine.sandbox.launcher import SandboxUnavailable

    harden_parent()  # nothing this process starts can read its environment (API keys) through /proc
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.unsafe_no_sandbox:
        os.environ["AWM_UNSAFE_NO_SANDBOX"] = "1"
    try:
        return int(args.func(args) or 0)
    except SandboxUnavailable as exc:
        stderr.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 4
    except (CliError, *input_errors()) as exc:
        stderr.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return getattr(exc, "code", 2)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (``Terminated``) in a verb that runs ``run_async``
        stderr.print("terminated" if isinstance(exc, Terminated) else "interrupted")
        return interrupted_code(exc)
    except BrokenPipeError:  # stdout closed before the output ended (``awm replay RUN | head``): quietly, exit 1,
        if not _stdout_gone():  # as rich's console does for what it prints (plain lines and JSON raised a traceback)
            raise  # another pipe or socket of the verb's: its error, not a reader that stopped reading
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush of stdout writes nowhere
        except (OSError, ValueError):
            pass
        return 1


def _stdout_gone() -> bool:
    """Nothing reads this process's stdout any more (a pipe whose reader closed, a socket its peer shut)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


if __name__ == "__main__":
    sys.exit(main())
