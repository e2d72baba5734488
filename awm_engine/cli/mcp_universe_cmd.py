"""``awm bench mcp-universe tasks | run | score | report`` and ``awm bench report`` (one table across benchmarks).

``register(which)`` adds both to the ``awm bench`` benchmark sub-parsers (``bench_cmd.register`` calls it).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from awm_engine.agent.endpoints import ConfigError, resolve_endpoint
from awm_engine.agent.policies import PolicyError
from awm_engine.bench import report as bench_report
from awm_engine.bench.mcp_universe import scores, tasks
from awm_engine.bench.mcp_universe.servers import ServerConfigError, load_servers
from awm_engine.cli.common import CliError, echo, interrupted_code, print_json, run_async, shown, stderr, stdout
from awm_engine.cli.options import add_executor_args, executor_from_args


def _output_flags(parser: argparse.ArgumentParser) -> None:
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true")
    output.add_argument("--markdown", action="store_true")


def _judge_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge-model", metavar="M",
                        help="score web-search answers with this LLM judge (MCP-Universe uses gpt-4.1); without "
                             "it those evaluators report needs: llm-judge")
    parser.add_argument("--judge-base-url", metavar="URL", help="the judge's OpenAI-compatible base URL")
    parser.add_argument("--judge-api-key", help=argparse.SUPPRESS)


MCPU_LOCAL_ONLY = ("MCP-Universe's tasks run against its MCP servers, started as sandboxed processes on this "
                   "machine or reached at their URLs, not in the worker pool")


def register(which) -> None:
    """Add ``mcp-universe`` and ``report`` to ``awm bench``'s benchmark sub-parsers."""
    mcpu = which.add_parser("mcp-universe", help="MCP-Universe tasks against configured MCP servers")
    sub = mcpu.add_subparsers(dest="mcpu_verb", metavar="ACTION")
    sub.required = True

    check = sub.add_parser("check", help="is MCP-Universe's official evaluator installed (make mcpu), and which "
                                         "services its evaluators reach")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)

    listing = sub.add_parser("tasks", help="the tasks of a checkout, per domain")
    listing.add_argument("--mcp-universe", required=True, metavar="DIR", help="an MCP-Universe checkout (or its "
                         "benchmark configs folder)")
    listing.add_argument("--domain", nargs="+", metavar="D")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_tasks)

    run = sub.add_parser("run", help="run tasks with a model against the configured MCP servers, then score them")
    run.add_argument("--mcp-universe", metavar="DIR", help="an MCP-Universe checkout (or its configs folder)")
    run.add_argument("--domain", nargs="+", metavar="D",
                     help="suites or paper domains (location, financial, browser, web, repository, 3d, multi)")
    run.add_argument("--task", nargs="+", dest="task_ids", metavar="ID", help="only these tasks (id or file stem)")
    run.add_argument("--limit", type=int, metavar="N", help="the first N tasks of each domain")
    run.add_argument("--servers", metavar="MCP_JSON",
                     help='MCP server definitions: {"mcpServers": {...}} or server_list.json')
    run.add_argument("--endpoint", metavar="NAME")
    run.add_argument("--model", metavar="M")
    run.add_argument("--base-url", metavar="URL")
    run.add_argument("--api-key", help="API key (default: endpoint config, then OPENAI_API_KEY)")
    run.add_argument("--mode", choices=["function_call", "react"], default="function_call")
    run.add_argument("--max-steps", type=int, default=20)
    run.add_argument("--concurrency", type=int, default=1)
    run.add_argument("--temperature", type=float, default=None)
    run.add_argument("--simulation", action="store_true",
                     help="the servers are stand-ins with fixed data: the report marks the run as an offline "
                          "simulation")
    _judge_flags(run)
    add_executor_args(run, local_only=MCPU_LOCAL_ONLY)
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="RUN_DIR")
    where.add_argument("--resume", metavar="RUN_DIR")
    run.add_argument("--quiet", action="store_true")
    run.set_defaults(func=cmd_run)

    score = sub.add_parser("score", help="score a run's answers again, or an answers file")
    score.add_argument("run_dir", nargs="?", metavar="RUN_DIR")
    score.add_argument("--answers", metavar="FILE", help='JSON {"<task id or file stem>": "<final answer>", …}')
    score.add_argument("--mcp-universe", metavar="DIR", help="with --answers: the checkout")
    _judge_flags(score)
    score.add_argument("--grouping", choices=scores.GROUPINGS, default="paper")
    _output_flags(score)
    score.set_defaults(func=cmd_score)

    report = sub.add_parser("report", help="success rates per domain and Overall")
    report.add_argument("run_dir")
    report.add_argument("--grouping", choices=scores.GROUPINGS, default="paper",
                        help="paper: the six domains; awm: the AWM paper's columns (Location, Financial, Browser, "
                             "Web, Multi)")
    report.add_argument("--tasks", action="store_true",
                        help="every task instead: its verdict, evaluators passed / failed / needing a service, "
                             "the services, steps and why it did not pass")
    _output_flags(report)
    report.set_defaults(func=cmd_report)

    table = which.add_parser("report", help="one table across benchmarks: AWM evaluation, BFCLv3, τ²-bench and "
                                            "MCP-Universe runs, one row per model")
    table.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    _output_flags(table)
    table.set_defaults(func=cmd_bench_report)


def _judge(args: argparse.Namespace):
    if not getattr(args, "judge_model", None):
        return None
    from awm_engine.bench.mcp_universe.run import make_judge

    try:
        endpoint = resolve_endpoint(None, args.judge_base_url, args.judge_model, args.judge_api_key, "native")
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return make_judge(endpoint)


def _require_evaluator() -> None:
    from awm_engine.bench.mcp_universe import official

    if (reason := official.problem()) is not None:
        raise CliError(reason)


def cmd_check(args: argparse.Namespace) -> int:
    from awm_engine.bench.mcp_universe import official

    reason = official.problem()
    if reason is None:
        try:
            official.load()
        except Exception as exc:  # noqa: BLE001 - an import failure of the wheel is what this check reports
            reason = f"mcpuniverse {official.MCPUNIVERSE_VERSION} is installed but does not import: " \
                     f"{type(exc).__name__}: {exc}"
    result = {"ok": reason is None, "package": f"mcpuniverse=={official.MCPUNIVERSE_VERSION}", "problem": reason,
              "services": list(official.SERVICES)}
    if args.json:
        print_json(result)
    elif reason is None:
        stdout.print(f"MCP-Universe's evaluator: mcpuniverse {official.MCPUNIVERSE_VERSION}, importable; services "
                     f"intercepted: {', '.join(official.SERVICES)}", highlight=False, markup=False)
    else:
        stderr.print(f"awm: {reason}", highlight=False, markup=False)
    return 0 if reason is None else 1


def cmd_tasks(args: argparse.Namespace) -> int:
    problems: list[str] = []
    try:
        loaded = tasks.load_benchmark(args.mcp_universe, args.domain, problems=problems)
    except tasks.TaskError as exc:
        raise CliError(str(exc)) from None
    _print_problems(problems)
    if args.json:
        print_json([t.summary() for t in loaded])
        return 0
    by_domain: dict[str, int] = {}
    for t in loaded:
        by_domain[t.domain] = by_domain.get(t.domain, 0) + 1
    for domain, n in by_domain.items():
        stdout.print(f"{shown(domain)}: {n} tasks", highlight=False)
    stdout.print(f"total: {len(loaded)}", highlight=False, markup=False)
    return 0


def _print_problems(problems: list[str]) -> None:
    """Tasks, suites or answers left out, one warning each (the rest goes on)."""
    for problem in problems:
        stderr.print(f"warning: {problem}", markup=False)


def cmd_run(args: argparse.Namespace) -> int:
    from awm_engine.bench.mcp_universe.run import McpuConfig, is_mcpu_run, run_mcpu, select

    executor_from_args(args, local_only=MCPU_LOCAL_ONLY)
    _require_evaluator()
    if args.resume:
        if not is_mcpu_run(args.resume):
            raise CliError(f"{args.resume} is not an MCP-Universe run")
        config = McpuConfig.load(args.resume)
        ep = config.endpoint or {}
        base_url, model, servers_file = args.base_url or ep.get("base_url"), ep.get("model"), config.servers_file
        temperature = ep.get("temperature")
    else:
        if not args.mcp_universe or not args.servers:
            raise CliError("run needs --mcp-universe DIR and --servers MCP_JSON")
        base_url, model, servers_file, temperature = args.base_url, args.model, args.servers, args.temperature
        out = Path(args.out)
        if (out / "results.jsonl").exists():
            raise CliError(f"{out} already holds a run; use --resume {out} to continue it")
    try:
        endpoint = resolve_endpoint(args.endpoint, base_url, model, args.api_key, "native", temperature=temperature)
        servers = load_servers(servers_file)
    except (ConfigError, ServerConfigError) as exc:
        raise CliError(str(exc)) from None
    if not args.resume:
        try:
            configs = str(tasks.configs_dir(args.mcp_universe).resolve())
        except tasks.TaskError as exc:
            raise CliError(str(exc)) from None
        config = McpuConfig(mcp_universe=configs, domains=args.domain or list(tasks.DOMAINS),
                            servers_file=str(Path(servers_file).resolve()),
                            servers={n: s.to_dict() for n, s in servers.items()}, endpoint=endpoint.public(),
                            mode=args.mode, max_steps=args.max_steps, limit=args.limit, task_ids=args.task_ids,
                            concurrency=args.concurrency, simulation=args.simulation)
    out = Path(args.resume or args.out)
    problems: list[str] = []
    try:
        chosen = select(config, problems)
    except tasks.TaskError as exc:
        raise CliError(str(exc)) from None
    found = {t.id for t in chosen} | {t.path.stem for t in chosen}
    problems += [f"--task {t}: no such task in the chosen domains" for t in config.task_ids or [] if t not in found]
    _print_problems(problems)
    if not chosen:
        raise CliError("no tasks selected" + (f" ({len(problems)} problem(s) above)" if problems else ""))
    unknown = sorted({s for t in chosen for s in t.mcp_servers} - set(servers))
    if unknown:
        stderr.print(f"warning: no definition for server(s) {', '.join(unknown)}: their tasks will error",
                     markup=False)
    for name in sorted({s for t in chosen for s in t.mcp_servers} & set(servers)):
        try:
            servers[name].check_startable()
        except ServerConfigError as exc:
            stderr.print(f"warning: {exc}: its tasks will error", markup=False)
            continue
        if servers[name].unset:
            stderr.print(f"warning: server {name} starts without {', '.join(servers[name].unset)} (unset)",
                         markup=False)
    # the stats name the last task (its folder and file name, the benchmark's data): never markup ("ws[" + "/" +
    # "]x.json" is a closing tag with nothing to close, whose MarkupError ended the run at its first task)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[stats]}", markup=False), console=stderr, disable=args.quiet) as bar:
        job = bar.add_task(f"MCP-Universe {config.mode}", total=len(chosen), stats="")

        def on_progress(p, record) -> None:
            bar.update(job, completed=p.done,
                       stats=f"passed {p.passed}/{p.scored} · needs a service {p.needs} · errored {p.errors}"
                             + (f" · {record['id']}" if record else ""))

        try:
            # run_async: a SIGTERM cleans up as Ctrl-C does (servers and sandboxes stopped, their directories
            # removed) and exits 143 saying so (asyncio.run died on it at once, silent, leaving them behind)
            meta = run_async(run_mcpu(config, out, endpoint, servers, resume=bool(args.resume),
                                      services=_judge(args), on_progress=on_progress))
        except (PolicyError, ValueError) as exc:
            raise CliError(str(exc)) from None
        except KeyboardInterrupt as exc:
            stderr.print(f"{str(exc) or 'interrupted'}: finished tasks are in {out / 'results.jsonl'}; continue with: "
                         f"awm bench mcp-universe run --resume {out}", markup=False)
            return interrupted_code(exc)
    _print_rates(meta, "paper")
    stderr.print(f"run directory: {out.resolve()}", markup=False)
    reason = nothing_scored(out)
    if reason:  # the run tells nothing: exit 1, as awm eval run (docs/exit-codes.md)
        stderr.print(f"[red]{reason}[/red]", highlight=False)
        return 1
    return 0


def nothing_scored(out: Path) -> str | None:
    """Why an MCP-Universe run scored nothing (no task run, every task errored, or every one needs a service the
    run did not have), else None."""
    from awm_engine.eval.results import read_records

    records = read_records(Path(out) / "results.jsonl")
    errored = sum(r.get("status") == "error" for r in records)
    needs = sum(r.get("status") != "error" and r.get("label") == "needs" for r in records)
    if not records:
        return "nothing to run: no task was selected"
    if errored + needs >= len(records):
        return (f"nothing was scored: of {len(records)} tasks, {errored} errored and {needs} need a service the run "
                "did not have")
    return None


def _print_rates(meta: dict, grouping: str, fmt: str = "text") -> None:
    summary = meta[grouping]
    if fmt == "json":
        print_json(meta)
        return
    text = scores.markdown(summary, f"MCP-Universe · {meta.get('model', '')} · {meta.get('mode', '')}",
                           bool(meta.get("simulation")))
    if fmt == "markdown":
        echo(text, end="")
    else:
        stdout.print(text, markup=False, highlight=False)


def cmd_score(args: argparse.Namespace) -> int:
    from awm_engine.bench.mcp_universe.run import is_mcpu_run, rescore, score_answers

    _require_evaluator()
    fmt = "json" if args.json else "markdown" if args.markdown else "text"
    judge = _judge(args)
    if args.answers:
        if not args.mcp_universe:
            raise CliError("--answers needs --mcp-universe DIR")
        try:
            answers = json.loads(Path(args.answers).read_text())
            rows, summary = score_answers(args.mcp_universe, answers, judge)
        except (OSError, ValueError) as exc:
            raise CliError(str(exc)) from None
        _print_problems(summary.get("problems") or [])
        if fmt == "json":
            print_json({"tasks": rows, **summary})
        else:
            for r in rows:
                stdout.print(f"{r['id']}: {r['label']}" + (f" (needs {', '.join(r['verdict']['needs'])})"
                                                           if r["label"] == "needs" else ""), markup=False)
            _print_rates({"model": "answers file", **summary}, args.grouping, fmt)
        return 0
    if not args.run_dir or not is_mcpu_run(args.run_dir):
        raise CliError("score needs an MCP-Universe RUN_DIR or --answers FILE")
    meta = rescore(args.run_dir, judge)
    _print_rates(meta, args.grouping, fmt)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from awm_engine.bench.mcp_universe.run import current_metadata, is_mcpu_run

    if not is_mcpu_run(args.run_dir):
        raise CliError(f"{args.run_dir} is not an MCP-Universe run (no config.json with \"benchmark\": "
                       "\"mcp-universe\")")
    fmt = "json" if args.json else "markdown" if args.markdown else "text"
    if args.tasks:
        _print_tasks(args.run_dir, fmt)
        return 0
    _print_rates(current_metadata(args.run_dir), args.grouping, fmt)
    return 0


TASK_COLUMNS = ("task", "domain", "AWM column", "verdict", "evaluators", "needs", "steps", "why not passed")


def _print_tasks(run_dir: str, fmt: str) -> None:
    """``report --tasks``: one line per task (the evaluation dashboard's task table)."""
    from rich.table import Table

    from awm_engine.bench.mcp_universe.run import task_line
    from awm_engine.eval.results import read_records

    lines = [task_line(r) for r in read_records(Path(run_dir) / "results.jsonl")]
    if fmt == "json":
        print_json(lines)
        return
    rows = [(t["id"], str(t["domain"] or "-"), str(t["awm_column"] or "-"), t["status"], t["evaluators"],
             ", ".join(t["needs"]) or "-", "-" if t["steps"] is None else str(t["steps"]), t["reason"] or "-")
            for t in lines]
    if fmt == "markdown":
        echo("| " + " | ".join(TASK_COLUMNS) + " |\n|" + "---|" * len(TASK_COLUMNS))
        for row in rows:
            echo("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in row) + " |")
        return
    table = Table(title=f"MCP-Universe tasks · {run_dir}")
    for name in TASK_COLUMNS:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*row[:-1], row[-1] if len(row[-1]) <= 240 else row[-1][:240] + "… (--json has it all)")
    stdout.print(table, markup=False, highlight=False)


def cmd_bench_report(args: argparse.Namespace) -> int:
    try:
        table = bench_report.build_table(args.run_dirs)
    except (OSError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(table)
    elif args.markdown:
        echo(bench_report.markdown(table), end="")
    else:
        stdout.print(bench_report.markdown(table), markup=False, highlight=False)
    for problem in table["skipped"]:
        stderr.print(f"skipped {problem['run_dir']}: {problem['reason']}", markup=False)
    if not table["rows"]:  # nothing could be read: not a report
        stderr.print("no run could be read (awm eval run / awm bench bfcl|tau2|mcp-universe run … --out RUN_DIR "
                     "make them)", markup=False)
        return 1
    return 0
