"""``awm eval run | report | compare | list``."""
from __future__ import annotations

import argparse
import asyncio
import json
import math
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from awm_engine.agent.endpoints import ConfigError, judge_endpoint, resolve_endpoint
from awm_engine.agent.policies import PolicyError
from awm_engine.agent.rollout import AgentConfig
from awm_engine.cli.agent_cmd import add_endpoint_args
from awm_engine.cli.common import CliError, add_data_arg, print_json, stderr, stdout
from awm_engine.data.paths import sample_envs_dir
from awm_engine.eval.batch import EvalConfig, run_evaluation, write_metadata
from awm_engine.eval.metrics import ERROR_CLASSES
from awm_engine.eval.results import ResultsIndex
from awm_engine.verify.rewards import RewardConfig


def register(verbs) -> None:
    ev = verbs.add_parser("eval", help="batch evaluation: run, resume, report, compare")
    sub = ev.add_subparsers(dest="eval_verb", metavar="ACTION")
    sub.required = True
    run = sub.add_parser("run", help="every (task, sample) of the selected scenarios; resumable")
    add_data_arg(run)
    run.add_argument("--scenario", action="append", metavar="S")
    run.add_argument("--task", action="append", type=int, metavar="N")
    run.add_argument("--policy", choices=["llm", "oracle", "immediate"], default="llm")
    add_endpoint_args(run)
    run.add_argument("--api-key")
    run.add_argument("--mode", choices=["meta", "native"], default=None)
    run.add_argument("-k", type=int, default=1, help="samples per task")
    run.add_argument("--concurrency", type=int, default=8, help="rollouts in flight")
    run.add_argument("--workers", type=int, default=None, help="environment worker processes (default: CPUs)")
    run.add_argument("--verify", choices=["code", "sql", "none"], default="code")
    add_endpoint_args(run, "judge")
    run.add_argument("--max-turns", type=int, default=20)
    run.add_argument("--window", type=int, default=None)
    run.add_argument("--temperature", type=float, default=None)
    run.add_argument("--max-tokens", type=int, default=None)
    run.add_argument("--retries", type=int, default=None, help="endpoint retries per request (default 3)")
    run.add_argument("--on-format-error", choices=["observe", "stop"], default="observe")
    run.add_argument("--pass-threshold", type=float, default=0.5)
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="RUN_DIR", help="a new run directory")
    where.add_argument("--resume", metavar="RUN_DIR", help="rerun only the missing or errored rollouts of a run")
    run.add_argument("--quiet", action="store_true")
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="metrics of a run: reward, completion, pass@k, pass^k, errors")
    report.add_argument("run_dir")
    fmt = report.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--markdown", action="store_true")
    report.set_defaults(func=cmd_report)

    compare = sub.add_parser("compare", help="two runs side by side, per scenario")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.add_argument("--json", action="store_true")
    compare.set_defaults(func=cmd_compare)

    ls = sub.add_parser("list", help="evaluation runs under a directory")
    ls.add_argument("root", nargs="?", default="outputs/eval")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)


def _config_from_args(args) -> tuple[EvalConfig, object, object]:
    endpoint = None
    try:
        if args.policy == "llm":
            endpoint = resolve_endpoint(args.endpoint, args.base_url, args.model, args.api_key, args.mode,
                                        temperature=args.temperature, max_tokens=args.max_tokens,
                                        max_retries=args.retries)
        judge = judge_endpoint(name=args.judge_endpoint, base_url=args.judge_base_url, model=args.judge_model) \
            if args.verify == "sql" else None
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    mode = args.mode or (endpoint.mode if endpoint else "meta")
    agent = AgentConfig(mode=mode, max_turns=args.max_turns, history_window=args.window,
                        on_format_error=args.on_format_error)
    data_dirs = [str(Path(d).resolve()) for d in (args.data or [sample_envs_dir()])]
    config = EvalConfig(data_dirs=data_dirs, scenarios=args.scenario, tasks=args.task, policy=args.policy,
                        endpoint=endpoint.public() if endpoint else None, k=args.k, concurrency=args.concurrency,
                        workers=args.workers, verify=args.verify, judge=judge.public() if judge else None,
                        agent=agent.to_dict(), rewards=RewardConfig().to_dict(), pass_threshold=args.pass_threshold)
    return config, endpoint, judge


def _resume_config(args) -> tuple[EvalConfig, object, object]:
    path = Path(args.resume) / "config.json"
    if not path.is_file():
        raise CliError(f"{args.resume} is not an evaluation run (no config.json)")
    config = EvalConfig.from_dict(json.loads(path.read_text()))
    endpoint = judge = None
    try:
        if config.policy == "llm":
            ep = config.endpoint or {}
            endpoint = resolve_endpoint(ep.get("name"), args.base_url or ep.get("base_url"), ep.get("model"),
                                        args.api_key, ep.get("mode"), temperature=ep.get("temperature"),
                                        max_tokens=ep.get("max_tokens"), max_retries=args.retries)
        if config.verify == "sql" and config.judge:
            jd = config.judge
            judge = judge_endpoint(name=jd.get("name"), base_url=jd.get("base_url"), model=jd.get("model"))
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return config, endpoint, judge


def cmd_run(args: argparse.Namespace) -> int:
    config, endpoint, judge = _resume_config(args) if args.resume else _config_from_args(args)
    out = Path(args.resume or args.out)
    if args.out and (out / "results.jsonl").exists():
        raise CliError(f"{out} already holds a run; use --resume {out} to continue it")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[stats]}"), console=stderr, disable=args.quiet) as bar:
        job = bar.add_task("evaluating", total=None, stats="")

        def on_progress(p, record) -> None:
            mean = f"{p.mean_reward:.3f}" if p.mean_reward is not None else "-"
            bar.update(job, total=p.total, completed=p.done,
                       stats=f"mean reward {mean} · errors {p.errors}" + (f" · resumed {p.skipped}" if p.skipped else ""))

        try:
            meta = asyncio.run(run_evaluation(config, out, endpoint, judge, resume=bool(args.resume),
                                              on_progress=on_progress))
        except PolicyError as exc:
            raise CliError(str(exc)) from None
        except KeyboardInterrupt:
            stderr.print(f"interrupted: finished rollouts are in {out / 'results.jsonl'}; "
                         f"continue with: awm eval run --resume {out}")
            return 130
    _print_report(meta)
    stderr.print(f"run directory: {out.resolve()}")
    return 0


def _fmt(v, digits=3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _print_report(meta: dict) -> None:
    ks = sorted({k for agg in [meta["overall"], *meta["scenarios"].values()] for k in agg["pass_at_k"]}, key=int)
    table = RichTable(title=f"{meta.get('model')} · k={meta.get('k')} · {meta['overall']['rollouts']} rollouts")
    for col in ["scenario", "rollouts", "mean reward", "completion"] + [f"pass@{k}" for k in ks] + \
            [f"pass^{k}" for k in ks] + ["errors"]:
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for name, agg in [*meta["scenarios"].items(), ("overall", meta["overall"])]:
        errors = ", ".join(f"{c} {n}" for c, n in agg["errors"].items() if n) or "-"
        table.add_row(name, str(agg["rollouts"]), _fmt(agg["mean_reward"]), _fmt(agg["completion_rate"]),
                      *[_fmt(agg["pass_at_k"].get(k)) for k in ks], *[_fmt(agg["pass_hat_k"].get(k)) for k in ks],
                      errors, style="bold" if name == "overall" else None)
    stdout.print(table)


def _meta(run_dir: str) -> dict:
    path = Path(run_dir)
    config_path = path / "config.json"
    if not config_path.is_file():
        raise CliError(f"{run_dir} is not an evaluation run (no config.json)")
    config = EvalConfig.from_dict(json.loads(config_path.read_text()))
    if (path / "metadata.json").is_file():
        meta = json.loads((path / "metadata.json").read_text())
        index = ResultsIndex(path / "results.jsonl")
        index.refresh()
        if meta.get("rollouts") == len(index):
            return meta
    return write_metadata(path, config)


def markdown(meta: dict) -> str:
    ks = sorted(meta["overall"]["pass_at_k"], key=int)
    head = ["scenario", "rollouts", "mean reward", "completion"] + [f"pass@{k}" for k in ks] + \
        [f"pass^{k}" for k in ks] + list(ERROR_CLASSES)
    lines = [f"# {meta.get('model')} (k = {meta.get('k')})", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for name, agg in [*meta["scenarios"].items(), ("**overall**", meta["overall"])]:
        row = [name, str(agg["rollouts"]), _fmt(agg["mean_reward"]), _fmt(agg["completion_rate"])]
        row += [_fmt(agg["pass_at_k"].get(k)) for k in ks] + [_fmt(agg["pass_hat_k"].get(k)) for k in ks]
        row += [str(agg["errors"][c]) for c in ERROR_CLASSES]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def cmd_report(args: argparse.Namespace) -> int:
    meta = _meta(args.run_dir)
    if args.json:
        print_json(meta)
    elif args.markdown:
        print(markdown(meta), end="")
    else:
        _print_report(meta)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    a, b = _meta(args.run_a), _meta(args.run_b)
    rows = []
    for name in sorted(set(a["scenarios"]) | set(b["scenarios"])) + ["overall"]:
        aa = a["overall"] if name == "overall" else a["scenarios"].get(name)
        bb = b["overall"] if name == "overall" else b["scenarios"].get(name)
        row = {"scenario": name}
        for key in ("mean_reward", "completion_rate"):
            va, vb = (aa or {}).get(key), (bb or {}).get(key)
            row[key] = {"a": va, "b": vb, "delta": (vb - va) if va is not None and vb is not None else None}
        pa, pb = (aa or {}).get("pass_at_k", {}).get("1"), (bb or {}).get("pass_at_k", {}).get("1")
        row["pass@1"] = {"a": pa, "b": pb, "delta": (pb - pa) if pa is not None and pb is not None else None}
        rows.append(row)
    if args.json:
        print_json({"a": {"run": args.run_a, "model": a.get("model")}, "b": {"run": args.run_b,
                                                                             "model": b.get("model")}, "rows": rows})
        return 0
    table = RichTable(title=f"A = {a.get('model')} ({args.run_a})   B = {b.get('model')} ({args.run_b})")
    for col in ("scenario", "reward A", "reward B", "Δ", "completion A", "completion B", "Δ", "pass@1 A",
                "pass@1 B", "Δ"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for r in rows:
        cells = []
        for key in ("mean_reward", "completion_rate", "pass@1"):
            d = r[key]["delta"]
            cells += [_fmt(r[key]["a"]), _fmt(r[key]["b"]),
                      ("[green]+" if d and d > 0 else "[red]" if d and d < 0 else "") + _fmt(d)]
        table.add_row(r["scenario"], *cells, style="bold" if r["scenario"] == "overall" else None)
    stdout.print(table)
    return 0


def list_runs(root: Path) -> list[dict]:
    runs = []
    for config_path in sorted(list(root.glob("*/config.json")) + list(root.glob("*/*/config.json"))):
        run = config_path.parent
        if not (run / "results.jsonl").exists() and not (run / "metadata.json").exists():
            continue
        config = json.loads(config_path.read_text())
        meta = json.loads((run / "metadata.json").read_text()) if (run / "metadata.json").is_file() else {}
        runs.append({"run_dir": str(run), "model": (config.get("endpoint") or {}).get("model") or config.get("policy"),
                     "k": config.get("k"), "created": config.get("created"), "rollouts": meta.get("rollouts", 0),
                     "running": meta.get("running"), "mean_reward": (meta.get("overall") or {}).get("mean_reward")})
    return runs


def cmd_list(args: argparse.Namespace) -> int:
    runs = list_runs(Path(args.root))
    if args.json:
        print_json(runs)
        return 0
    table = RichTable(title=f"evaluation runs under {args.root}")
    for col in ("run", "model", "k", "rollouts", "mean reward", "created"):
        table.add_column(col)
    for r in runs:
        table.add_row(r["run_dir"], str(r["model"]), str(r["k"]), str(r["rollouts"]), _fmt(r["mean_reward"]),
                      str(r["created"]))
    stdout.print(table)
    return 0
