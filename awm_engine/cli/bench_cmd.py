"""``awm bench bfcl check | run | score | report``: BFCLv3 through awm's engine, scored by the official checkers."""
from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table as RichTable

from awm_engine.cli import verb_help
from awm_engine.agent.endpoints import ConfigError, resolve_endpoint
from awm_engine.agent.policies import PolicyError
from awm_engine.bench.bfcl import categories, scores, wheel
from awm_engine.cli.common import CliError, echo, interrupted_code, print_json, run_async, shown, stderr, stdout
from awm_engine.cli.options import add_executor_args, executor_from_args

BFCL_LOCAL_ONLY = ("BFCL has no environments in the worker pool: its entries are executed and checked by one "
                   "sandboxed checker host on this machine (the model calls are the slow part; raise --concurrency)")


def register(verbs) -> None:
    bench = verbs.add_parser("bench", help=verb_help("bench"))
    which = bench.add_subparsers(dest="bench_name", metavar="BENCHMARK")
    which.required = True
    bfcl = which.add_parser("bfcl", help="BFCLv3, scored by the official checkers of bfcl-eval "
                                         f"{wheel.BFCL_EVAL_VERSION}")
    sub = bfcl.add_subparsers(dest="bfcl_verb", metavar="ACTION")
    sub.required = True

    check = sub.add_parser("check", help="is BFCL installed? (`make bfcl` installs it)")
    check.set_defaults(func=cmd_check)

    run = sub.add_parser("run", help="answer BFCLv3 entries with a model (or the ground truth) and score them")
    run.add_argument("--endpoint", metavar="NAME", help="a named endpoint from the awm config file")
    run.add_argument("--model", metavar="M")
    run.add_argument("--base-url", metavar="URL", help="OpenAI-compatible base URL (or OPENAI_BASE_URL)")
    run.add_argument("--api-key", help="API key (default: endpoint config, then OPENAI_API_KEY)")
    run.add_argument("--policy", choices=["llm", "ground-truth"], default="llm",
                     help="ground-truth: answer every entry with its possible answer (no model)")
    run.add_argument("--mode", choices=["fc", "prompt"], default="fc",
                     help="fc: OpenAI function calling (default); prompt: calls written as text")
    pick = run.add_mutually_exclusive_group()
    pick.add_argument("--categories", nargs="+", metavar="C",
                      help="v3 categories (or wheel names, or groups), space- or comma-separated")
    pick.add_argument("--group", choices=["non_live", "live", "multi_turn", "all"], default=None)
    pick.add_argument("--entries", nargs="+", metavar="ID", help="these entries only (wheel ids, e.g. simple_python_3)")
    run.add_argument("--limit", type=int, default=None, metavar="N", help="the first N entries of each category")
    run.add_argument("-k", type=int, default=1, help="samples per entry")
    run.add_argument("--concurrency", type=int, default=8, help="entries in flight")
    run.add_argument("--temperature", type=float, default=None, help="default 0.001 (BFCL's)")
    run.add_argument("--max-tokens", type=int, default=None)
    run.add_argument("--retries", type=int, default=None, help="endpoint retries per request (default 3)")
    add_executor_args(run, local_only=BFCL_LOCAL_ONLY)
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="RUN_DIR", help="a new run directory")
    where.add_argument("--resume", metavar="RUN_DIR", help="run what is missing or errored in a run")
    run.add_argument("--quiet", action="store_true")
    run.set_defaults(func=cmd_run)

    score = sub.add_parser("score", help="score BFCL result files (BFCL_v4_<category>_result.json)")
    score.add_argument("files", nargs="+", metavar="RESULT_FILE",
                       help="BFCL result files (*_result.json), or folders holding them (one table per model folder)")
    score.add_argument("--mode", choices=["auto", "fc", "prompt"], default="auto",
                       help="how the answers were made (auto: fc when answers are lists of calls)")
    score.add_argument("--out", metavar="DIR", help="write BFCL score files (<model>/<group>/..._score.json) here")
    output = score.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true")
    output.add_argument("--markdown", action="store_true")
    score.set_defaults(func=cmd_score)

    report = sub.add_parser("report", help="per-category accuracy, v3 Overall (and the v4 formula), AWM columns")
    report.add_argument("run_dir")
    output = report.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true")
    output.add_argument("--markdown", action="store_true")
    report.set_defaults(func=cmd_report)

    from awm_engine.cli import (
        mcp_universe_cmd,  # awm bench mcp-universe …, awm bench report
    )

    mcp_universe_cmd.register(which)

    from awm_engine.cli import tau2_cmd  # awm bench tau2 …

    tau2_cmd.register(which)


def _require() -> None:
    if (reason := wheel.problem()) is not None:
        raise CliError(reason)


def cmd_check(args: argparse.Namespace) -> int:
    if (reason := wheel.problem()) is not None:  # the check's answer, not bad usage: exit 1 (docs/exit-codes.md)
        raise CliError(reason, 1)
    wheel.prepare()
    stdout.print(f"bfcl-eval {wheel.BFCL_EVAL_VERSION} is installed; BFCL_PROJECT_ROOT is {wheel.project_root()}",
                 markup=False)
    return 0


def _config(args: argparse.Namespace):
    from awm_engine.bench.bfcl.run import DEFAULT_TEMPERATURE, BfclConfig

    endpoint = None
    if args.policy == "llm":
        try:
            endpoint = resolve_endpoint(args.endpoint, args.base_url, args.model, args.api_key, "native",
                                        temperature=DEFAULT_TEMPERATURE if args.temperature is None
                                        else args.temperature, max_tokens=args.max_tokens, max_retries=args.retries)
        except ConfigError as exc:
            raise CliError(str(exc)) from None
    entries = [e for item in args.entries or [] for e in item.split(",") if e.strip()] or None
    try:
        chosen = categories.resolve(args.categories, args.group) if not entries else \
            [c for c in categories.CATEGORIES if c in {categories.category_of(e).name for e in entries}]
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.limit is not None and args.limit < 1 or args.k < 1:
        raise CliError("--limit and -k must be at least 1")
    record = {**endpoint.public(), "max_retries": endpoint.max_retries} if endpoint else None
    return BfclConfig(categories=chosen, mode=args.mode, policy=args.policy, endpoint=record, limit=args.limit,
                      entries=entries, k=args.k, concurrency=args.concurrency), endpoint


def _resume_config(args: argparse.Namespace):
    from awm_engine.bench.bfcl.run import BfclConfig, is_bfcl_run

    if not is_bfcl_run(args.resume):
        raise CliError(f"{args.resume} is not a BFCL run (no config.json with \"benchmark\": \"bfcl\")")
    config = BfclConfig.load(args.resume)
    endpoint = None
    if config.policy == "llm":
        ep = config.endpoint or {}
        try:
            endpoint = resolve_endpoint(ep.get("name"), args.base_url or ep.get("base_url"), ep.get("model"),
                                        args.api_key, "native", temperature=ep.get("temperature"),
                                        max_tokens=ep.get("max_tokens"),
                                        max_retries=args.retries if args.retries is not None else ep.get("max_retries"))
        except ConfigError as exc:
            raise CliError(str(exc)) from None
    return config, endpoint


def cmd_run(args: argparse.Namespace) -> int:
    from awm_engine.bench.bfcl.run import preflight, run_bfcl

    executor_from_args(args, local_only=BFCL_LOCAL_ONLY)
    _require()
    config, endpoint = _resume_config(args) if args.resume else _config(args)
    out = Path(args.resume or args.out)
    if args.out and (out / "results.jsonl").exists():
        raise CliError(f"{out} already holds a run; use --resume {out} to continue it")
    try:
        preflight(config)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[stats]}", markup=False), console=stderr, disable=args.quiet) as bar:
        job = bar.add_task(f"BFCL {config.mode}", total=None, stats="")

        def on_progress(p, record) -> None:
            accuracy = "-" if p.mean_reward is None else f"{100 * p.mean_reward:.1f}%"
            last = f" · {record['category']}" if record else ""
            bar.update(job, total=p.total, completed=p.done,
                       stats=f"accuracy {accuracy} · errored {p.errors}" + (f" · resumed {p.skipped}" if p.skipped
                                                                           else "") + last)

        try:
            meta = run_async(run_bfcl(config, out, endpoint, resume=bool(args.resume), on_progress=on_progress))
        except PolicyError as exc:
            raise CliError(str(exc)) from None
        except KeyboardInterrupt as exc:
            stderr.print(f"{str(exc) or 'interrupted'}: finished entries are in {out / 'results.jsonl'}; "
                         f"continue with: awm bench bfcl run --resume {out}", markup=False)
            return interrupted_code(exc)
    print_report(meta)
    stderr.print(f"run directory: {out.resolve()}", markup=False)
    if meta["totals"]["errors"]:
        errored = meta['totals']['errors']
        stderr.print(f"{errored} {'entry' if errored == 1 else 'entries'} errored (not scored); rerun them with "
                     f"awm bench bfcl run --resume {out}", markup=False)
    if not meta["totals"].get("scored"):  # nothing was scored: the run tells nothing
        stderr.print("[red]nothing was scored[/red]")
        return 1
    return 0


def print_report(meta: dict) -> None:
    title = f"BFCLv3 · {meta.get('model', '')} · {meta.get('mode')} mode" + \
        (f" · {meta['policy']}" if meta.get("policy") else "")
    table = RichTable(title=shown(title))  # a run's record: untrusted text
    for col in ("category", "group", "correct", "scored", "accuracy %", "errors"):
        table.add_column(col, justify="left" if col in ("category", "group") else "right")
    for name, row in meta["categories"].items():
        scored = str(row["scored"]) + ("" if row["scored"] >= row["size"] else f" of {row['size']}")
        table.add_row(shown(name), shown(row["group"]), shown(row["correct"]), shown(scored),
                      scores.pct(row["accuracy"]), shown(row["errors"]) if row["errors"] else "-")
    stdout.print(table)
    for section, rows in scores.report_rows(meta).items():
        part = RichTable(title=shown(section), show_header=False)
        part.add_column("what")
        part.add_column("%", justify="right")
        for label, value in rows:
            part.add_row(shown(label), shown(value))
        stdout.print(part)
    if meta["unsatisfiable"]:
        stdout.print("entries no answer can pass (in this mode):", markup=False)
        for u in meta["unsatisfiable"]:
            stdout.print(f"  {u['id']} ({u['verdict'] or 'not run'}): {u['reason']}", markup=False)
    if meta.get("data"):
        stderr.print(meta["data"], markup=False)


def cmd_score(args: argparse.Namespace) -> int:
    from awm_engine.bench.bfcl.bfcl_files import score_files

    _require()
    files: list[Path] = []
    for given in map(Path, args.files):  # a folder: every BFCL result file below it (result/<model>/<group>/…)
        if given.is_dir():
            found = sorted(given.rglob("*_result.json"))
            if not found:
                raise CliError(f"{given}: no BFCL result file (*_result.json) in this folder or below")
            files += found
        else:
            files.append(given)
    try:
        result = asyncio.run(score_files(files, args.mode, args.out))
    except (OSError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if not result["models"]:
        stderr.print(f"nothing was scored: {len(files)} result file(s) hold no entry", markup=False)
        return 1
    for one in result["models"]:
        one["bfcl_eval"] = wheel.BFCL_EVAL_VERSION
    if args.json:  # every model's table and per-entry verdicts
        print_json({**result, "bfcl_eval": wheel.BFCL_EVAL_VERSION})
        return 0
    for one in result["models"]:  # one table (or markdown report) per model folder
        _print(args, one)
    if not args.markdown:
        for path in result["score_files"]:
            stderr.print(f"wrote {path}", markup=False)
    return 0


def _print(args: argparse.Namespace, meta: dict) -> bool:
    """``--json``, ``--markdown`` or the tables; True for the tables."""
    if args.json:
        print_json(meta)
    elif args.markdown:
        echo(scores.markdown(meta), end="")
    else:
        print_report(meta)
        return True
    return False


def cmd_report(args: argparse.Namespace) -> int:
    from awm_engine.bench.bfcl.run import current_metadata, is_bfcl_run

    if not is_bfcl_run(args.run_dir):
        raise CliError(f"{args.run_dir} is not a BFCL run (no config.json with \"benchmark\": \"bfcl\")")
    _print(args, current_metadata(args.run_dir))
    return 0
