"""``awm bench tau2 check | run | score | report``: τ²-bench's airline, retail and telecom domains through awm's
engine, scored as τ²-bench does (registered under ``awm bench`` by ``bench_cmd``)."""
from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from awm_engine.agent.endpoints import ConfigError, Endpoint, judge_endpoint, resolve_endpoint
from awm_engine.agent.policies import PolicyError
from awm_engine.bench.tau2.data import DEFAULT_SPLIT, DOMAINS, Tau2Data
from awm_engine.cli.common import CliError, echo, interrupted_code, print_json, run_async, stderr, stdout
from awm_engine.cli.options import add_endpoint_args, add_executor_args, executor_from_args, judge_from_args
from awm_engine.data.paths import not_a_directory

DATA_ENV = "AWM_TAU2_DATA"


def register(which) -> None:
    """``awm bench tau2 …`` on the ``awm bench`` sub-parsers."""
    tau2 = which.add_parser("tau2", help="τ²-bench airline, retail and telecom with a simulated user, pass^k")
    sub = tau2.add_subparsers(dest="tau2_verb", metavar="ACTION")
    sub.required = True

    check = sub.add_parser("check", help="what a τ² data directory holds: domains, versions, splits, problems")
    _data_args(check)
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)

    run = sub.add_parser("run", help="every task × trial of a split with an agent model and a simulated user")
    _data_args(run)
    run.add_argument("--domain", nargs="+", choices=list(DOMAINS), metavar="DOMAIN",
                     help="airline, retail and/or telecom")
    run.add_argument("--split", default=DEFAULT_SPLIT, help="base (default), train, test; telecom also small")
    run.add_argument("--task", action="append", metavar="ID", help="only these task ids (repeatable)")
    run.add_argument("-k", type=int, default=1, help="trials per task (pass^k needs k trials)")
    add_endpoint_args(run)
    run.add_argument("--api-key", help="API key (default: endpoint config, then OPENAI_API_KEY)")
    run.add_argument("--user-endpoint", metavar="NAME", help="the user simulator's named endpoint")
    run.add_argument("--user-model", metavar="M", help="the user simulator's model (default: the agent's)")
    run.add_argument("--user-base-url", metavar="URL", help="the user simulator's base URL (default: the agent's)")
    run.add_argument("--temperature", type=float, default=None, help="the agent's (default 0, as τ²)")
    run.add_argument("--user-temperature", type=float, default=None, help="the user simulator's (default 0)")
    run.add_argument("--max-tokens", type=int, default=None)
    run.add_argument("--retries", type=int, default=None, help="endpoint retries per request (default 3)")
    add_endpoint_args(run, "judge")
    run.add_argument("--max-steps", type=int, default=200)
    run.add_argument("--max-errors", type=int, default=10, help="errored tool calls in all (not in a row)")
    run.add_argument("--timeout", type=float, default=None, help="seconds per simulation (default: none)")
    run.add_argument("--seed", type=int, default=300)
    run.add_argument("--concurrency", type=int, default=4, help="simulations in flight")
    run.add_argument("--workers", type=int, default=None,
                     help="environment worker processes (default: 2); with --executor ray: actors")
    add_executor_args(run)
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="RUN_DIR", help="a new run directory")
    where.add_argument("--resume", metavar="RUN_DIR", help="run what is missing or errored in a run")
    run.add_argument("--quiet", action="store_true")
    run.set_defaults(func=cmd_run)

    score = sub.add_parser("score", help="re-score a results file of τ²-bench's own runner (its simulations JSON)")
    score.add_argument("file", metavar="FILE")
    _data_args(score)
    score.add_argument("--domain", choices=list(DOMAINS), help="when the file does not say it")
    add_endpoint_args(score, "judge")
    score.add_argument("--json", action="store_true")
    score.set_defaults(func=cmd_score)

    report = sub.add_parser("report", help="τ²'s metrics per domain: avg reward, pass^k, pass@k, the paper's columns")
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    output = report.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true")
    output.add_argument("--markdown", action="store_true")
    report.set_defaults(func=cmd_report)


def _data_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tau2-data", metavar="DIR", help=f"a τ²-bench data directory (data/tau2; or {DATA_ENV})")
    parser.add_argument("--airline-db", metavar="FILE", help="the airline db.json, when the directory has none")


def _data(args: argparse.Namespace) -> Tau2Data:
    root = args.tau2_data or os.environ.get(DATA_ENV)
    if not root:
        raise CliError(f"no τ² data directory: pass --tau2-data DIR (or set {DATA_ENV})")
    if not_a_directory(root):
        raise CliError(f"--tau2-data {root}: {not_a_directory(root)}")
    return Tau2Data(Path(root).resolve(), Path(args.airline_db).resolve() if args.airline_db else None)


def fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


# -- check ----------------------------------------------------------------------------------------------------

def cmd_check(args: argparse.Namespace) -> int:
    data = _data(args)
    problems = data.problems()
    domains = []
    for name in DOMAINS:
        d = data.domain(name)
        domains.append({"domain": name, "dir": str(d.dir), "tasks": len(d.tasks) if d.dir.is_dir() else 0,
                        "splits": {k: len(v) for k, v in d.splits.items()} if d.dir.is_dir() else {},
                        "version": d.version.describe() if d.version else None,
                        "database": d.db_problem() or str(d.db_path)})
    result = {"root": str(data.root), "domains": domains, "problems": [p.__dict__ for p in problems]}
    if args.json:
        print_json(result)
        return 0
    table = RichTable(title=f"τ² data: {data.root}")
    for col in ("domain", "tasks", "splits", "task version", "database"):
        table.add_column(col)
    for d in domains:
        table.add_row(escape(d["domain"]), str(d["tasks"]), ", ".join(f"{k} {n}" for k, n in d["splits"].items()) or "-",
                      escape(d["version"] or "-"), escape(d["database"]))
    stdout.print(table)
    for p in problems:
        colour = "red" if p.level == "error" else "yellow"
        stderr.print(f"[{colour}]{escape(str(p))}[/{colour}]")
    return 0


# -- run ------------------------------------------------------------------------------------------------------

def _resolve(name, base_url, model, api_key, temperature, max_tokens, retries) -> Endpoint:
    return resolve_endpoint(name, base_url, model, api_key, "native", temperature=temperature,
                            max_tokens=max_tokens, max_retries=retries)


def _config(args: argparse.Namespace):
    from awm_engine.bench.tau2.run import DEFAULT_TEMPERATURE, Tau2Config

    if not args.domain:
        raise CliError("choose the domain(s): --domain airline|retail|telecom")
    data = _data(args)
    temperature = DEFAULT_TEMPERATURE if args.temperature is None else args.temperature
    user_temperature = DEFAULT_TEMPERATURE if args.user_temperature is None else args.user_temperature
    try:
        agent = _resolve(args.endpoint, args.base_url, args.model, args.api_key, temperature, args.max_tokens,
                         args.retries)
        if args.user_endpoint:  # the user simulator's own named endpoint (its flags win over it)
            user = _resolve(args.user_endpoint, args.user_base_url, args.user_model, args.api_key, user_temperature,
                            args.max_tokens, args.retries)
        else:  # the agent's endpoint, with the user's own model or base URL when given
            user = _resolve(None, args.user_base_url or agent.base_url, args.user_model or agent.model,
                            args.api_key or agent.api_key, user_temperature, args.max_tokens, args.retries)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    judge = judge_from_args(args)
    executor, ray_address = executor_from_args(args)
    config = Tau2Config(data_dir=str(data.root), domains=list(dict.fromkeys(args.domain)), split=args.split,
                        task_ids=args.task, airline_db=str(data.airline_db) if data.airline_db else None, k=args.k,
                        endpoint=_public(agent), user_endpoint=_public(user),
                        judge=judge.public() if judge else None, max_steps=args.max_steps,
                        max_errors=args.max_errors, timeout=args.timeout, seed=args.seed,
                        concurrency=args.concurrency, workers=args.workers, executor=executor,
                        ray_address=ray_address)
    return config, agent, user, judge


def _public(endpoint: Endpoint) -> dict:
    return {**endpoint.public(), "max_retries": endpoint.max_retries}


def _resume_config(args: argparse.Namespace):
    from awm_engine.bench.tau2.run import Tau2Config, is_tau2_run

    if not is_tau2_run(args.resume):
        raise CliError(f"{args.resume} is not a τ²-bench run (no config.json with \"benchmark\": \"tau2\")")
    config = Tau2Config.load(args.resume)
    config.executor, config.ray_address = executor_from_args(args, (config.executor, config.ray_address))

    def again(ep: dict | None) -> Endpoint | None:
        if not ep:
            return None
        retries = args.retries if args.retries is not None else ep.get("max_retries")
        return _resolve(ep.get("name"), ep.get("base_url"), ep.get("model"), args.api_key, ep.get("temperature"),
                        ep.get("max_tokens"), retries)

    try:
        agent, user = again(config.endpoint), again(config.user_endpoint)
        judge = judge_endpoint(name=config.judge.get("name"), base_url=config.judge.get("base_url"),
                               model=config.judge.get("model")) if config.judge else None
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return config, agent, user, judge


def cmd_run(args: argparse.Namespace) -> int:
    from awm_engine.bench.tau2.run import current_metadata

    config, agent, user, judge = _resume_config(args) if args.resume else _config(args)
    out = Path(args.resume or args.out)
    code, _ = execute_run(config, agent, user, judge, out, bool(args.resume), args.quiet, "awm bench tau2 run")
    if code == 0:
        meta = current_metadata(out)
        print_report([meta])  # with the DB match rate, which needs the full result lines
        stderr.print(f"run directory: {out.resolve()}", markup=False)
        from awm_engine.eval.batch import run_outcome

        outcome = run_outcome(meta.get("overall") or {})  # nothing scored: the run tells nothing (exit 1)
        if outcome["exit_code"]:
            stderr.print(f"[red]{outcome['reason']}[/red]", highlight=False)
            return outcome["exit_code"]
    return code


def execute_run(config, agent: Endpoint | None, user: Endpoint | None, judge: Endpoint | None, out: Path,
                resume: bool, quiet: bool, verb: str) -> tuple[int, dict | None]:
    """Run (or resume) a τ² run into ``out`` with a progress bar: (exit code, final metadata). ``verb`` is the
    command that resumes it (``awm bench tau2 run`` or ``awm eval run``), said when the run is interrupted."""
    from awm_engine.bench.tau2.run import RunRefused, preflight, run_tau2

    if not resume and (out / "results.jsonl").exists():
        raise CliError(f"{out} already holds a run; use --resume {out} to continue it")
    skipped: dict[str, str] = {}
    try:
        _, chosen = preflight(config, skipped)
    except RunRefused as exc:
        raise CliError(str(exc)) from None
    for why in skipped.values():
        stderr.print(f"warning: not run: {why}", markup=False)
    nl = sum(1 for tasks in chosen.values() for t in tasks if "NL_ASSERTION" in t.basis)
    if nl and judge is None:
        stderr.print(f"[yellow]warning:[/yellow] {nl} selected tasks have NL_ASSERTION in their reward basis and no "
                     "judge is configured (--judge-model/--judge-base-url): they get no verdict")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[stats]}", markup=False), console=stderr, disable=quiet) as bar:
        job = bar.add_task("τ²-bench " + "+".join(config.domains), total=None, stats="")

        def on_progress(p, record) -> None:
            mean = f"{p.mean_reward:.3f}" if p.mean_reward is not None else "-"
            bar.update(job, total=p.total, completed=p.done, stats=f"avg reward {mean} · errored {p.errors}"
                       + (f" · resumed {p.skipped}" if p.skipped else ""))

        try:
            meta = run_async(run_tau2(config, out, agent, user, judge, resume=resume, on_progress=on_progress))
        except (PolicyError, RunRefused) as exc:
            raise CliError(str(exc)) from None
        except KeyboardInterrupt as exc:
            stderr.print(f"{str(exc) or 'interrupted'}: finished simulations are in {out / 'results.jsonl'}; "
                         f"continue with: {verb} --resume {out}", markup=False)
            return interrupted_code(exc), None
    return 0, meta


# -- awm eval run on τ² domains ---------------------------------------------------------------------------------

def add_eval_args(parser: argparse.ArgumentParser) -> None:
    """``awm eval run``'s τ² options: the data, the split and the user simulator (its domains are named
    ``--scenario tau2_airline|tau2_retail|tau2_telecom``, as in the TUI's catalog)."""
    group = parser.add_argument_group("τ²-bench domains", "with --scenario tau2_airline|tau2_retail|tau2_telecom: "
                                                         "the run is scored as τ²-bench (awm bench tau2 run)")
    _data_args(group)
    group.add_argument("--split", default=DEFAULT_SPLIT, help="the τ² split --task counts in: base (default), "
                                                              "train, test; telecom also small")
    group.add_argument("--user-endpoint", metavar="NAME", help="the user simulator's named endpoint")
    group.add_argument("--user-model", metavar="M", help="the user simulator's model (default: the agent's)")
    group.add_argument("--user-base-url", metavar="URL", help="the user simulator's base URL (default: the agent's)")
    group.add_argument("--user-temperature", type=float, default=None, help="the user simulator's (default 0)")


# agent settings of awm eval run that a τ² run does not use (τ²'s orchestrator and evaluator decide instead)
EVAL_ONLY = {"mode": None, "protocol": "reference", "system_prompt": None, "max_turns": None, "window": None,
             "call_timeout": None, "on_format_error": "observe", "tool_names": "reference", "verify": "code",
             "pass_threshold": 0.5}


def eval_tau2_domains(args: argparse.Namespace) -> list[str] | None:
    """The τ² domains ``awm eval run --scenario`` names (None when it names none); ``CliError`` for a mix with AWM
    scenarios, or τ² options without a τ² domain."""
    from awm_engine.bench.tau2.data import domain_of_key

    scenarios = list(dict.fromkeys(args.scenario or []))
    domains = [domain_of_key(s) for s in scenarios]
    if not any(domains):
        if args.tau2_data or args.airline_db:
            raise CliError("--tau2-data runs τ²-bench domains: name them with --scenario tau2_airline, "
                           "--scenario tau2_retail or --scenario tau2_telecom")
        return None
    if not all(domains):
        awm = [s for s, d in zip(scenarios, domains) if not d]
        raise CliError(f"one run is either τ²-bench domains or AWM scenarios: run {', '.join(awm)} separately")
    return domains


def eval_config(args: argparse.Namespace, domains: list[str]):
    """A τ² run's configuration from ``awm eval run``'s flags: (config, agent, user, judge). ``--task N`` are
    positions in the split (as for AWM scenarios), ``--episode-timeout`` the seconds per simulation."""
    if args.policy != "llm":
        raise CliError(f"--policy {args.policy} does not apply to τ²-bench domains: a model plays the agent")
    ignored = [name for name, default in EVAL_ONLY.items() if getattr(args, name, default) != default]
    if ignored:
        stderr.print("[yellow]warning:[/yellow] not used by τ²-bench domains (τ²'s orchestrator and scoring decide): "
                     + ", ".join("--" + name.replace("_", "-") for name in ignored), highlight=False)
    ns = argparse.Namespace(**vars(args))
    ns.domain, ns.task = domains, None
    ns.max_steps, ns.max_errors, ns.seed = 200, 10, 300  # τ²'s defaults (awm bench tau2 run sets them)
    ns.timeout = args.episode_timeout or None
    config, agent, user, judge = _config(ns)
    config.task_indexes = list(dict.fromkeys(args.task)) if args.task else None
    return config, agent, user, judge


def eval_resume_config(args: argparse.Namespace):
    """A τ² run's own configuration, for ``awm eval run --resume``."""
    return _resume_config(args)


# -- score ----------------------------------------------------------------------------------------------------

def cmd_score(args: argparse.Namespace) -> int:
    from awm_engine.bench.tau2.run import make_nl_judge
    from awm_engine.bench.tau2.score import ScoreFileError, score_file

    data = _data(args)
    judge = judge_from_args(args)

    async def go():
        grader = make_nl_judge(judge) if judge is not None else None
        try:
            return await score_file(args.file, data, args.domain, grader)
        finally:
            if grader is not None:
                await grader.policy.aclose()

    try:
        result = asyncio.run(go())
    except ScoreFileError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(result)
        return 0
    table = RichTable(title=f"{result['domain']} · {args.file}")
    for col in ("simulation", "task", "termination", "τ² reward", "awm reward", "agree"):
        table.add_column(col)
    for r in result["simulations"]:
        agree = {True: "yes", False: "[red]NO[/red]"}.get(r.get("agree"), "-")
        table.add_row(escape(str(r.get("id"))), escape(str(r.get("task_id")))[:40], escape(str(r["termination_reason"])),
                      fmt(r["recorded_reward"]), fmt(r["reward"]) if r["status"] == "ok" else escape(r.get("error", "")),
                      agree)
    stdout.print(table)
    m, a = result["metrics"], result["agreement"]
    stdout.print(f"awm: avg reward {fmt(m['avg_reward'])} over {m['scored']} simulations · pass^k "
                 + " ".join(f"{k}:{fmt(v)}" for k, v in m["pass_hat_k"].items())
                 + f" · τ² recorded {fmt(result['recorded_metrics']['avg_reward'])}"
                 + f" · agree {a['agree']}/{a['compared']}", markup=False)
    for p in result["problems"]:
        stderr.print(f"[yellow]{escape(p)}[/yellow]")
    return 0


# -- report ---------------------------------------------------------------------------------------------------

def cmd_report(args: argparse.Namespace) -> int:
    from awm_engine.bench.tau2.run import current_metadata, is_tau2_run

    metas = []
    for run_dir in args.run_dirs:
        if not is_tau2_run(run_dir):
            raise CliError(f"{run_dir} is not a τ²-bench run (no config.json with \"benchmark\": \"tau2\")")
        metas.append({**current_metadata(run_dir), "run_dir": str(run_dir)})
    if args.json:
        print_json(metas if len(metas) > 1 else metas[0])
    elif args.markdown:
        echo(markdown(metas), end="")
    else:
        print_report(metas)
    return 0


def rows(metas: list[dict]) -> list[dict]:
    out = []
    for meta in metas:
        for domain, m in (meta.get("tau2") or {}).get("domains", {}).items():
            ks = sorted(m["pass_hat_k"], key=int)
            out.append({"model": meta.get("model"), "user model": meta.get("user_model"), "domain": domain,
                        "tasks": m["tasks"], "trials": m["trials"], "avg reward": m["avg_reward"],
                        **{f"pass^{k}": m["pass_hat_k"][k] for k in ks},
                        **{f"pass@{k}": m["pass_at_k"][k] for k in ks},
                        "DB match": m.get("db_match_rate"), "errored": m["errored"], "no verdict": m["no_verdict"],
                        "terminations": ", ".join(f"{r} {n}" for r, n in m["termination_reasons"].items())})
    return out


def print_report(metas: list[dict]) -> None:
    data = rows(metas)
    if not data:
        stdout.print("no simulations yet")
        return
    columns = list(dict.fromkeys(c for r in data for c in r))
    table = RichTable(title="τ²-bench")
    for col in columns:
        table.add_column(col, justify="left" if col in ("model", "user model", "domain", "terminations") else "right")
    for r in data:
        table.add_row(*[escape(fmt(r.get(c))) for c in columns])
    stdout.print(table)
    stderr.print("pass^k: all k trials succeed (τ²-bench); pass@k: at least one does (Chen et al.). The AWM paper's "
                 "\"Pass@k\" column is one of the two: compare against both.")


def markdown(metas: list[dict]) -> str:
    data = rows(metas)
    if not data:
        return "no simulations yet\n"
    columns = list(dict.fromkeys(c for r in data for c in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in data]
    return "\n".join(lines) + "\n"
