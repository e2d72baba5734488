"""``awm gen scenario|task|db|sample|spec|env|verifier|all`` (synthesis with self-correction) and
``awm gen status`` (a run's scenarios × stages)."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from awm_engine.cli import verb_help
from awm_engine.agent.endpoints import ConfigError, resolve_endpoint
from awm_engine.cli.common import CliError, print_json, print_warning, run_async, stderr, stdout
from awm_engine.cli.options import add_endpoint_args
from awm_engine.gen.records import SCENARIO_STAGES, GenConfig
from awm_engine.gen.stage_scenario import SeedError, read_seeds
from awm_engine.gen.status import GenStatus, load_status
from awm_engine.gen.store import GenStoreError, is_gen_run

STAGE_VERBS = ("scenario", *SCENARIO_STAGES)
STATE_COLOURS = {"done": "green", "kept": "yellow", "failed": "red", "running": "cyan", "pending": "dim"}


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return n


def _at_least_one(value: str) -> int:
    n = _positive(value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return n


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the output directory (AWM files gen_*.jsonl, databases/, .awm-gen/ records)")
    group = parser.add_argument_group("model")
    add_endpoint_args(group)
    group.add_argument("--api-key", help="API key (default: endpoint config, then OPENAI_API_KEY)")
    group.add_argument("--temperature", type=float, help="default 1.0, as the reference")
    group.add_argument("--max-requests", type=_at_least_one, help="LLM requests in flight (default 16)")
    group.add_argument("--endpoint-waits", type=_positive, metavar="N",
                       help="waits (2, 4, 8 … s) for a rate-limited, overloaded or unreachable endpoint before a "
                            "request counts as a failed attempt (default 5)")
    group.add_argument("--price-in", type=float, metavar="USD", help="price per million prompt tokens (for cost)")
    group.add_argument("--price-out", type=float, metavar="USD", help="price per million completion tokens")
    run = parser.add_argument_group("run")
    run.add_argument("--retries", type=_positive, help="retries per stage (default 4: 5 attempts)")
    run.add_argument("--concurrency", "-j", type=_at_least_one, help="scenarios in flight (default 4)")
    run.add_argument("--tasks", type=int, dest="num_tasks", help="tasks per scenario (default 10)")
    run.add_argument("--verifier-mode", choices=["sql", "code", "both"],
                     help="sql (gen_verifier.jsonl, judged; the reference's default), code "
                          "(gen_verifier.pure_code.jsonl, complete/others without a judge) or both")
    run.add_argument("--scenario", action="append", metavar="NAME", help="only these scenarios (repeatable)")
    run.add_argument("--no-summaries", action="store_true",
                     help="feed the raw errors back instead of the model's summary of them")
    run.add_argument("--no-doctor", action="store_true", help="skip the Problems list at the end of each scenario")
    run.add_argument("--json", action="store_true", help="print the final status as JSON")


def _scenario_args(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--seeds", required=required, metavar="FILE",
                        help="seed scenarios: JSONL rows {name, description} or one name per line")
    parser.add_argument("-n", type=_positive, default=0, dest="new", metavar="N",
                        help="how many new scenarios to generate from the seeds (default 0)")
    parser.add_argument("--include-seeds", action="store_true",
                        help="also build environments for the seed scenarios themselves (as the reference does)")
    parser.add_argument("--resume", action="store_true", help="continue a run in --out (nothing finished is redone)")
    parser.add_argument("--embedding-model", metavar="M",
                        help="diversity by embeddings (cosine > 0.85 rejects); default: a lexical fallback")
    parser.add_argument("--embedding-base-url", metavar="URL",
                        help="the embedding endpoint (default: --base-url; key: EMBEDDING_OPENAI_API_KEY, else the "
                             "model's)")
    parser.add_argument("--similarity", type=float, metavar="X",
                        help="the diversity threshold (default 0.85 embeddings / 0.6 lexical)")


def register(verbs) -> None:
    gen = verbs.add_parser("gen", help=verb_help("gen"))
    sub = gen.add_subparsers(dest="gen_verb", metavar="STAGE")
    sub.required = True
    every = sub.add_parser("all", help="every stage, scenarios streaming through them independently")
    _scenario_args(every, required=False)
    _common(every)
    every.set_defaults(func=cmd_gen, stages=STAGE_VERBS)
    scenario = sub.add_parser("scenario", help="new scenarios from seeds, diversity-filtered")
    _scenario_args(scenario, required=True)
    _common(scenario)
    scenario.set_defaults(func=cmd_gen, stages=("scenario",))
    helps = {"task": "tasks for every scenario in --out that has none",
             "db": "a database schema (built and repaired in the sandbox)",
             "sample": "sample data (inserted and repaired in the sandbox)",
             "spec": "the API specification", "env": "the environment code (started, every tool called, repaired)",
             "verifier": "verifiers for every task (run on the initial database, repaired)"}
    for stage, text in helps.items():
        parser = sub.add_parser(stage, help=text + " — for the scenarios already in --out")
        _common(parser)
        parser.set_defaults(func=cmd_gen, stages=(stage,), seeds=None, new=0, include_seeds=False, resume=True,
                            embedding_model=None, embedding_base_url=None, similarity=None)
    status = sub.add_parser("status", help="a generation run: scenarios × stages, attempts, last errors, tokens")
    status.add_argument("out", metavar="DIR")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)


class StageBars:
    """One progress bar per stage on stderr, advanced as scenarios finish stages."""

    def __init__(self, progress: Progress, stages: tuple[str, ...], new: int):
        self.progress = progress
        self.bars = {s: progress.add_task(f"{s:<9}", total=(new or None) if s == "scenario" else 0) for s in stages}
        self.known: set[str] = set()

    def __call__(self, event: dict) -> None:
        stage, scenario = str(event.get("stage", "")), str(event.get("scenario", ""))
        if event.get("kind") == "stage" and stage == "scenario":
            self.progress.advance(self.bars["scenario"])
        if scenario and scenario != "*" and scenario not in self.known and event.get("kind") in ("attempt", "stage"):
            self.known.add(scenario)
            for s, bar in self.bars.items():
                if s != "scenario":
                    self.progress.update(bar, total=len(self.known))
        if event.get("kind") == "stage" and stage in self.bars and stage != "scenario":
            self.progress.advance(self.bars[stage])


def _saved_config(out: Path) -> dict:
    """The model of the run being resumed (so ``--resume`` needs no --model/--base-url again)."""
    import json

    try:
        saved = json.loads((out / ".awm-gen" / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def cmd_gen(args: argparse.Namespace) -> int:
    from awm_engine.eval.batch import RunLocked
    from awm_engine.gen.pipeline import run_generation

    saved = _saved_config(Path(args.out)) if args.resume else {}
    saved.pop("format_version", None)
    try:
        endpoint = resolve_endpoint(args.endpoint, args.base_url or saved.get("base_url"),
                                    args.model or saved.get("model"), args.api_key)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    seeds = None
    if args.seeds:
        notes: list[str] = []
        try:
            seeds = read_seeds(args.seeds, notes)
        except SeedError as exc:
            raise CliError(str(exc)) from None
        for note in notes:
            print_warning(note)
    if "scenario" in args.stages and args.new == 0 and not args.include_seeds and not args.resume:
        raise CliError("nothing to generate: pass -n N (new scenarios) and/or --include-seeds")
    # settings not given keep the resumed run's (a fresh run: GenConfig's defaults)
    given = {"retries": args.retries, "num_tasks": args.num_tasks, "verifier_mode": args.verifier_mode,
             "concurrency": args.concurrency, "max_requests": args.max_requests, "temperature": args.temperature,
             "endpoint_waits": args.endpoint_waits,
             "embedding_model": args.embedding_model, "embedding_base_url": args.embedding_base_url,
             "similarity": args.similarity, "price_in": args.price_in, "price_out": args.price_out}
    config = GenConfig.from_dict({**saved, "model": endpoint.model, "base_url": endpoint.base_url,
                                  **{k: v for k, v in given.items() if v is not None}})
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=stderr, transient=True) as progress:
        bars = StageBars(progress, tuple(args.stages), args.new)
        try:
            summary = run_async(run_generation(
                Path(args.out), config, seeds=seeds, new_scenarios=args.new, include_seeds=args.include_seeds,
                stages=tuple(args.stages), resume=args.resume, api_key=endpoint.api_key, on_event=bars,
                only=args.scenario, doctor=not args.no_doctor, summarize=not args.no_summaries))
        except (GenStoreError, RunLocked) as exc:
            raise CliError(str(exc)) from None
    status = load_status(args.out)
    if args.json:
        print_json({**status.to_dict(), "failed": summary.failed})
    else:
        print_status(status)
        for name, why in summary.failed.items():
            stderr.print(f"[red]{escape(name)}: {escape(why)}[/red]")
        if summary.failed:
            stderr.print(f"{len(summary.failed)} scenario(s) stopped at a stage; rerun with --resume to retry them "
                         "(finished stages are kept)", markup=False)
    short = summary.have_new < summary.wanted_new
    if short:
        stderr.print(f"[yellow]only {summary.have_new} of the {summary.wanted_new} new scenarios asked for were "
                     f"kept: {config.retries} + 1 batches in a row kept none; last reasons:[/yellow]")
        for reason in summary.scenario_errors:
            stderr.print(f"  {escape(reason[:300])}")
        if any("request to" in r for r in summary.scenario_errors):
            stderr.print(f"the model endpoint {config.base_url} failed; rerun with --resume once it answers",
                         markup=False)
        else:
            stderr.print("rerun with --resume to try again (e.g. with --similarity higher, or more varied seeds)")
    # a stage that wrote its best attempt although none passed is not a success: say which, and exit 1
    kept = [(s.name, stage, cell.last_error) for s in status.scenarios if s.name not in summary.failed
            for stage, cell in s.cells.items() if cell.state == "kept"]
    if kept and not args.json:
        stderr.print(f"[yellow]{len(kept)} stage(s) kept their best attempt although none passed (written, as the "
                     "reference does; check them with awm env doctor):[/yellow]")
        for name, stage, error in kept:
            stderr.print(f"  {escape(name)} · {stage}: {escape((error or '')[:300])}")
    return 1 if summary.failed or short or kept else 0


def print_status(status: GenStatus) -> None:
    if status.warning:
        print_warning(status.warning)
    table = Table(title=f"generation run {escape(str(status.out))}")
    table.add_column("scenario")
    for stage in SCENARIO_STAGES:
        table.add_column(stage)
    table.add_column("tokens", justify="right")
    table.add_column("problems")
    for s in status.scenarios:
        cells = []
        for stage in SCENARIO_STAGES:
            cell = s.cells[stage]
            colour = STATE_COLOURS.get(cell.state, "white")
            tries = f" ×{cell.attempts}" if cell.attempts > 1 else ""
            cells.append(f"[{colour}]{cell.state}{tries}[/{colour}]")
        tokens = s.usage.prompt_tokens + s.usage.completion_tokens
        table.add_row(escape(s.name), *cells, f"{tokens:,}", escape(s.problems_summary or ("—" if s.problems is None
                                                                                             else "clean")))
    stdout.print(table)
    usage = Table(title="tokens per stage")
    for col in ("stage", "requests", "prompt", "completion", "cost (USD)"):
        usage.add_column(col, justify="left" if col == "stage" else "right")
    for stage, u in status.stage_usage.items():
        if u.requests:
            cost = status.cost(u)
            usage.add_row(stage, str(u.requests), f"{u.prompt_tokens:,}", f"{u.completion_tokens:,}",
                          "—" if cost is None else f"{cost:.4f}")
    stdout.print(usage)
    for s in status.scenarios:
        for stage, cell in s.cells.items():
            if cell.state in ("failed", "kept") and cell.last_error:
                stdout.print(f"[yellow]{escape(s.name)} · {stage}: {escape(cell.last_error[:300])}[/yellow]")


def cmd_status(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.is_dir() and not is_gen_run(out) and not (out / "gen_scenario.jsonl").is_file():
        raise CliError(f"no generation run at {out} (neither .awm-gen/config.json nor gen_scenario.jsonl is there)")
    try:
        status = load_status(args.out)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(status.to_dict())
    else:
        print_status(status)
    return 0
