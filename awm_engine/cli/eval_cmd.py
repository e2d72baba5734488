"""``awm eval run | report | compare | list``."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from awm_engine.cli import verb_help
from awm_engine.agent.endpoints import ConfigError, Endpoint, judge_endpoint, resolve_endpoint
from awm_engine.agent.policies import PolicyError
from awm_engine.cli.common import (
    AGENT_RUN_FILES,
    CliError,
    add_data_arg,
    echo,
    interrupted_code,
    out_dir,
    print_fitted,
    print_json,
    print_warning,
    run_async,
    shown,
    stderr,
    stdout,
)
from awm_engine.cli.options import (
    add_agent_args,
    add_executor_args,
    agent_config_from_args,
    endpoint_from_args,
    executor_from_args,
    judge_from_args,
)
from awm_engine.data.paths import sample_envs_dir
from awm_engine.eval.batch import EvalConfig, preflight, run_evaluation, run_outcome
from awm_engine.eval.report import (
    COMPARED,
    aggregates,
    compare_rows,
    compare_runs,
    fmt,
    markdown,
    pass_ks,
    run_metadata,
)
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runs import list_eval_runs, load_eval_config


DEFAULT_EVAL_ROOT = "outputs/eval"


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def register(verbs) -> None:
    ev = verbs.add_parser("eval", help=verb_help("eval"))
    sub = ev.add_subparsers(dest="eval_verb", metavar="ACTION")
    sub.required = True
    run = sub.add_parser("run", help="every (task, sample) of the selected scenarios; resumable")
    add_data_arg(run)
    run.add_argument("--scenario", action="append", metavar="S")
    run.add_argument("--task", action="append", type=int, metavar="N")
    run.add_argument("--policy", choices=["llm", "oracle", "immediate"], default="llm")
    run.add_argument("-k", type=positive_int, default=1, help="samples per task")
    run.add_argument("--concurrency", type=positive_int, default=8, help="rollouts in flight")
    run.add_argument("--workers", type=int, default=None,
                     help="environment worker sandboxes per scenario (default: 1); with --executor ray: actors")
    run.add_argument("--pass-threshold", type=float, default=0.5)
    add_agent_args(run)
    from awm_engine.cli import tau2_cmd

    tau2_cmd.add_eval_args(run)  # τ²-bench domains as scenarios: --scenario tau2_retail --tau2-data DIR
    add_executor_args(run)
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="RUN_DIR", help="a new run directory")
    where.add_argument("--resume", metavar="RUN_DIR", help="rerun only the missing or errored rollouts of a run")
    run.add_argument("--quiet", action="store_true")
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="metrics of a run: reward, completion, pass@k, pass^k, failures")
    report.add_argument("run_dir")
    output = report.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true")
    output.add_argument("--markdown", action="store_true")
    report.set_defaults(func=cmd_report)

    compare = sub.add_parser("compare", help="two runs side by side, per scenario")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.add_argument("--json", action="store_true")
    compare.set_defaults(func=cmd_compare)

    ls = sub.add_parser("list", help="evaluation runs under a directory")
    ls.add_argument("root", nargs="?", default=DEFAULT_EVAL_ROOT)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)


def _endpoint_record(endpoint: Endpoint | None) -> dict | None:
    """What config.json keeps of the endpoint: everything but the key, and the retries (``--resume`` reuses them)."""
    return {**endpoint.public(), "max_retries": endpoint.max_retries} if endpoint else None


def _config_from_args(args) -> tuple[EvalConfig, Endpoint | None, Endpoint | None]:
    try:
        endpoint = endpoint_from_args(args) if args.policy == "llm" else None
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    judge = judge_from_args(args) if args.verify == "sql" else None
    agent = agent_config_from_args(args, endpoint=endpoint)
    data_dirs = [str(Path(d).resolve()) for d in (args.data or [sample_envs_dir()])]
    executor, ray_address = executor_from_args(args)
    config = EvalConfig(data_dirs=data_dirs, scenarios=args.scenario, tasks=args.task, policy=args.policy,
                        endpoint=_endpoint_record(endpoint), k=args.k, concurrency=args.concurrency,
                        workers=args.workers, verify=args.verify, judge=judge.public() if judge else None,
                        agent=agent.to_dict(), pass_threshold=args.pass_threshold, executor=executor,
                        ray_address=ray_address)
    return config, endpoint, judge


def _resume_config(args) -> tuple[EvalConfig, Endpoint | None, Endpoint | None]:
    """The run's own configuration (agent settings included); --base-url, --api-key and --retries may override."""
    config = load_eval_config(args.resume)
    config.executor, config.ray_address = executor_from_args(args, (config.executor, config.ray_address))
    endpoint = judge = None
    try:
        if config.policy == "llm":
            ep = config.endpoint or {}
            retries = args.retries if args.retries is not None else ep.get("max_retries")
            endpoint = resolve_endpoint(ep.get("name"), args.base_url or ep.get("base_url"), ep.get("model"),
                                        args.api_key, ep.get("mode"), temperature=ep.get("temperature"),
                                        max_tokens=ep.get("max_tokens"), max_retries=retries)
        if config.verify == "sql" and config.judge:
            jd = config.judge
            judge = judge_endpoint(name=jd.get("name"), base_url=jd.get("base_url"), model=jd.get("model"))
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return config, endpoint, judge


def _is_tau2_run(run_dir) -> bool:
    from awm_engine.bench.tau2.run import is_tau2_run

    return is_tau2_run(run_dir)


def _run_tau2(args: argparse.Namespace, domains: list[str] | None) -> int:
    """``awm eval run`` on τ²-bench domains: the τ² runner (``awm bench tau2 run``'s), awm eval's report."""
    from awm_engine.bench.tau2.run import current_metadata
    from awm_engine.cli import tau2_cmd

    if args.resume:
        config, agent, user, judge = tau2_cmd.eval_resume_config(args)
    else:
        config, agent, user, judge = tau2_cmd.eval_config(args, domains)
    out = Path(args.resume or args.out)
    code, _ = tau2_cmd.execute_run(config, agent, user, judge, out, bool(args.resume), args.quiet, "awm eval run")
    if code:
        return code
    meta = current_metadata(out)
    _print_report(meta)
    stderr.print(f"run directory: {out.resolve()} (τ²'s metrics: awm bench tau2 report {out})", markup=False)
    overall = meta.get("overall") or {}
    errors = overall.get("errored") or 0
    if errors:
        stderr.print(f"{_n(errors, 'simulation')} errored (see results.jsonl); rerun them with: "
                     f"awm eval run --resume {out}", markup=False)
    outcome = run_outcome(overall)  # nothing scored (every simulation errored, or none got a verdict): exit 1
    if outcome["exit_code"]:
        stderr.print(f"[red]{shown(outcome['reason'])}[/red]", highlight=False)
    return outcome["exit_code"]


def _metadata(run_dir) -> dict:
    """The run's aggregates: an evaluation's, or a τ² run's (scenarios ``tau2_<domain>``) computed by τ²'s runner."""
    if _is_tau2_run(run_dir):
        from awm_engine.bench.tau2.run import current_metadata

        return current_metadata(run_dir)
    return run_metadata(run_dir)


def cmd_run(args: argparse.Namespace) -> int:
    from awm_engine.cli import tau2_cmd

    if args.out and not (Path(args.out) / "results.jsonl").exists():  # an evaluation run there: refused below
        out_dir(args.out, holds=AGENT_RUN_FILES)  # an agent run or a served session would mix with this run's files
    if args.resume and _is_tau2_run(args.resume):
        return _run_tau2(args, None)
    if not args.resume and (tau2_domains := tau2_cmd.eval_tau2_domains(args)):
        return _run_tau2(args, tau2_domains)
    config, endpoint, judge = _resume_config(args) if args.resume else _config_from_args(args)
    out = Path(args.resume or args.out)
    out_dir(args.out)
    if args.out and (out / "results.jsonl").exists():
        raise CliError(f"{out} already holds a run; use --resume {out} to continue it")
    try:  # refusals and warnings before the run starts (run_evaluation checks again and records the warnings)
        for warning in preflight(config, judge).warnings:
            print_warning(warning)
    except PolicyError as exc:
        raise CliError(str(exc)) from None
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[stats]}", markup=False), console=stderr, disable=args.quiet) as bar:
        job = bar.add_task("evaluating", total=None, stats="")

        def on_progress(p, record) -> None:
            mean = f"{p.mean_reward:.3f}" if p.mean_reward is not None else "-"
            bar.update(job, total=p.total, completed=p.done,
                       stats=f"mean reward {mean} · errored {p.errors}" + (f" · resumed {p.skipped}" if p.skipped else ""))

        try:
            meta = run_async(run_evaluation(config, out, endpoint, judge, resume=bool(args.resume),
                                            on_progress=on_progress))
        except PolicyError as exc:
            raise CliError(str(exc)) from None
        except KeyboardInterrupt as exc:
            stderr.print(f"{str(exc) or 'interrupted'}: finished rollouts are in {out / 'results.jsonl'}; "
                         f"continue with: awm eval run --resume {out}", markup=False)
            return interrupted_code(exc)
    _print_report(meta)
    stderr.print(f"run directory: {out.resolve()}", markup=False)
    overall = meta.get("overall") or {}
    errors = overall.get("errored") or 0
    if errors:
        stderr.print(f"{_n(errors, 'rollout')} errored (see results.jsonl); rerun them with: "
                     f"awm eval run --resume {out}", markup=False)
    outcome = meta.get("outcome") or run_outcome(overall, config.verify != "none")
    if outcome["exit_code"]:
        stderr.print(f"[red]{shown(outcome['reason'])}[/red]", highlight=False)
    return outcome["exit_code"]


def _n(count: int, word: str) -> str:
    """``1 rollout``, ``3 rollouts``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def _print_report(meta: dict, console=None) -> None:
    ks = pass_ks(meta)
    columns = ["scenario", "rollouts", "mean reward", "completion"] + [f"pass@{k}" for k in ks] + \
        [f"pass^{k}" for k in ks] + ["failures"]

    def build(shown_columns: list[str]) -> RichTable:
        # a run's record is untrusted text (its scenario names come from environment data): shown() in every cell
        table = RichTable(title=shown(f"{meta.get('model')} · k={meta.get('k')} · "
                                      f"{_n(meta['overall']['rollouts'], 'rollout')}"))
        for col in shown_columns:
            if col == "scenario":  # the key --scenario takes: never cut (other columns wrap or go first)
                table.add_column(col, no_wrap=True, overflow="fold")
            else:
                table.add_column(col, justify="left" if col == "failures" else "right",
                                 overflow="fold" if col == "failures" else "ellipsis")
        for name, agg in aggregates(meta):
            failures = ", ".join(f"{c} {n}" for c, n in agg["errors"].items() if n) or "-"
            cell = {"rollouts": str(agg["rollouts"]), "mean reward": fmt(agg["mean_reward"]),
                    "completion": fmt(agg["completion_rate"]), "failures": shown(failures),
                    **{f"pass@{k}": fmt(agg["pass_at_k"].get(k)) for k in ks},
                    **{f"pass^{k}": fmt(agg["pass_hat_k"].get(k)) for k in ks}}
            table.add_row(shown(name), *(cell[c] for c in shown_columns[1:]),
                          style="bold" if name == "overall" else None)
        return table

    # narrow terminals: pass^k (largest k first), pass@k beyond 1, completion, failures, pass@1 go before the
    # scenario is cut
    drop = [f"pass^{k}" for k in reversed(ks)] + [f"pass@{k}" for k in reversed(ks) if k != "1"] + \
        ["completion", "failures", "pass@1"]
    print_fitted(build, columns, drop, console or stdout)


def cmd_report(args: argparse.Namespace) -> int:
    meta = _metadata(args.run_dir)  # a τ² run's too
    if not _is_tau2_run(args.run_dir):
        index = ResultsIndex(Path(args.run_dir) / "results.jsonl")
        index.refresh()
        if index.bad_lines:  # the aggregates leave them out: say so, never a silently smaller run
            print_warning(f"{index.bad_lines} line(s) of {Path(args.run_dir) / 'results.jsonl'} are not result records "
                          f"(not JSON, or no id): left out of this report; awm eval run --resume {args.run_dir} runs "
                          "those rollouts again")
    if args.json:
        print_json(meta)
    elif args.markdown:
        echo(markdown(meta), end="")
    else:
        _print_report(meta)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if _is_tau2_run(args.run_a) or _is_tau2_run(args.run_b):  # τ² runs: their aggregates from τ²'s runner
        data = {"a": {"run": args.run_a, "model": (a := _metadata(args.run_a)).get("model")},
                "b": {"run": args.run_b, "model": (b := _metadata(args.run_b)).get("model")}, "rows": compare_rows(a, b)}
    else:
        data = compare_runs(args.run_a, args.run_b)
    a_meta, b_meta = _metadata(args.run_a), _metadata(args.run_b)
    differ = [f"{name} (only in {'A' if name in a_meta['scenarios'] else 'B'})"
              for name in sorted(set(a_meta["scenarios"]) ^ set(b_meta["scenarios"]))]
    differ += [f"{name} ({a_meta['scenarios'][name].get('tasks')} vs {b_meta['scenarios'][name].get('tasks')} tasks)"
               for name in sorted(set(a_meta["scenarios"]) & set(b_meta["scenarios"]))
               if a_meta["scenarios"][name].get("tasks") != b_meta["scenarios"][name].get("tasks")]
    if differ:  # the overall row (and those scenarios' rows) compare different sets of tasks
        print_warning(f"the runs cover different tasks: {', '.join(differ[:5])}"
                      + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
                      + "; the overall row compares different task sets")
    if args.json:
        print_json(data)
        return 0
    a, b = data["a"], data["b"]
    table = RichTable(title=shown(f"A = {a['model']} ({a['run']})   B = {b['model']} ({b['run']})"))
    for col in ("scenario", "reward A", "reward B", "Δ", "completion A", "completion B", "Δ", "pass@1 A",
                "pass@1 B", "Δ"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for r in data["rows"]:
        cells = []
        for key in COMPARED:
            d = r[key]["delta"]
            cells += [fmt(r[key]["a"]), fmt(r[key]["b"]),
                      ("[green]+" if d and d > 0 else "[red]" if d and d < 0 else "") + fmt(d)]
        table.add_row(shown(r["scenario"]), *cells, style="bold" if r["scenario"] == "overall" else None)
    stdout.print(table)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    if args.root != DEFAULT_EVAL_ROOT and not Path(args.root).is_dir():  # the default may not exist yet: no runs
        raise CliError(f"{args.root}: no such directory")
    runs = list_eval_runs(args.root)
    if args.json:
        print_json(runs)
        return 0
    table = RichTable(title=shown(f"evaluation runs under {args.root}"))
    for col in ("run", "model", "k", "rollouts", "mean reward", "created"):
        table.add_column(col)
    for r in runs:
        table.add_row(shown(r["run_dir"]), shown(r["model"]), shown(r["k"]), shown(r["rollouts"]),
                      fmt(r["mean_reward"]), shown(r["created"]))
    stdout.print(table)
    return 0
