"""``awm train export`` (history-aware training samples from recorded rollouts) and ``awm train tasks`` (the task
rows an online trainer's dataset holds)."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from awm_engine.cli import verb_help
from awm_engine.cli.common import CliError, add_data_arg, echo, load_catalog, print_json, print_warning, stderr
from awm_engine.train.export import FORMATS, MissingDependency, format_for, write_records
from awm_engine.train.grpo import assign_advantages
from awm_engine.train.samples import DEFAULT_WINDOW, ROW_KINDS, TrainingDataError, build_samples, rollout_records
from awm_engine.train.tasks import NoTaskRows, task_rows
from awm_engine.train.tool_schemas import ToolSchemaError, endpoint_tools


def _window(value: str) -> int | None:
    if value in ("none", "full"):
        return None
    try:
        w = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a window is a number of turns or 'none', not {value!r}") from None
    if w < 1:
        raise argparse.ArgumentTypeError("a window keeps at least one turn (or 'none': the whole history)")
    return w


def register(verbs) -> None:
    train = verbs.add_parser("train", help=verb_help("train"))
    sub = train.add_subparsers(dest="train_verb", metavar="ACTION")
    sub.required = True
    export = sub.add_parser("export", help="one training sample per action turn of each rollout (history window, "
                                           "loss mask, step reward; GRPO advantages with --grpo)")
    export.add_argument("run_dir", metavar="RUN_DIR", nargs="+",
                        help="a rollout run directory, an evaluation run (awm eval run -k G), or a directory of runs "
                             "(repeatable); rollout ids are <run>/<scenario>/<task>/<sample>, a GRPO group is one task "
                             "of one evaluation run, and two rollouts with one id are refused")
    export.add_argument("--window", type=_window, default=DEFAULT_WINDOW,
                        help=f"history window w: the last w turns before each turn (default {DEFAULT_WINDOW}, as the "
                             "paper trains; 'none': the whole history)")
    export.add_argument("--out", required=True, metavar="FILE", help="the output file (.jsonl or .parquet)")
    export.add_argument("--format", choices=list(FORMATS), default=None,
                        help="jsonl or parquet (default: by the file's extension; parquet needs pyarrow)")
    export.add_argument("--grpo", action="store_true",
                        help="group the rollouts by task and add advantages (R - mean) / std per group")
    export.add_argument("--rows", choices=list(ROW_KINDS), default="turn",
                        help="turn (default): one row per action turn, trained on that turn only (TRL: prompt/"
                             "completion); rollout: one row per rollout, every assistant turn trained (verl's "
                             "multi-turn SFT, TRL's messages) — needs --window none and rollouts run without one")
    export.add_argument("--force", action="store_true", help="replace FILE if it exists")
    export.add_argument("--json", action="store_true", help="print a summary as JSON")
    export.set_defaults(func=cmd_export)

    tasks = sub.add_parser("tasks", help="the task rows of an online trainer's dataset (verl agent loop, TRL env)")
    add_data_arg(tasks)
    tasks.add_argument("--scenario", action="append", help="only these scenarios (repeatable)")
    tasks.add_argument("--task", type=int, action="append", help="only these task indices (repeatable)")
    tasks.add_argument("--system-prompt", metavar="FILE", help="the system prompt of the rows (default: awm's own)")
    tasks.add_argument("--tools-in-template", action="store_true",
                       help="for a trainer whose chat template describes list_tools and call_tool (TRL's "
                            "environment_factory): a system prompt without awm's <tools> block and call format")
    tasks.add_argument("--out", required=True, metavar="FILE", help="the output file (.jsonl or .parquet)")
    tasks.add_argument("--format", choices=list(FORMATS), default=None)
    tasks.add_argument("--force", action="store_true", help="replace FILE if it exists")
    tasks.set_defaults(func=cmd_tasks)


def output_format(args: argparse.Namespace) -> str:
    """The format to write ``--out`` in, once ``--out`` is known to be writable: never a directory, never a path under
    a file, never an existing file unless ``--force`` (an export is not overwritten by accident)."""
    out = Path(args.out)
    if out.is_dir():
        raise CliError(f"--out {args.out} is a directory: give a file name (.jsonl or .parquet)")
    try:
        fmt = format_for(args.out, args.format)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if out.exists() and not args.force:
        raise CliError(f"--out {args.out} exists: give --force to replace it, or another file name")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise CliError(f"--out {args.out}: {parent} is not a directory")
            break
    return fmt


def cmd_export(args: argparse.Namespace) -> int:
    fmt = output_format(args)
    if args.rows == "rollout" and args.window is not None:
        raise CliError("--rows rollout trains every turn on the whole conversation: give --window none (and export "
                       "rollouts that ran without a history window)")
    try:
        result = build_samples(args.run_dir, args.window)
    except TrainingDataError as exc:
        raise CliError(str(exc)) from None
    kept = {s.rollout_id for s in result.samples}
    try:
        tools = endpoint_tools([r for r in result.rollouts if r.rollout_id in kept])
    except ToolSchemaError as exc:
        raise CliError(str(exc), 1) from None
    for s in result.samples:
        s.tools = tools.get(s.rollout_id, [])
    groups = assign_advantages(result.samples) if args.grpo else []
    left_out: list[tuple[str, str]] = []
    if args.rows == "rollout":
        records, left_out = rollout_records(result)
    else:
        records = [s.to_record() for s in result.samples]
    if not records:  # no file is written: nothing there could be mistaken for an export
        for rid, why in result.skipped + left_out:
            stderr.print(f"skipped {escape(rid)}: {escape(why)}")
        reasons = "; ".join(f"{r}: {w}" for r, w in (result.skipped + left_out)[:3]) or "no rollout gave a sample"
        kind = "whole-rollout row" if args.rows == "rollout" else "sample"
        # 2 where the rollouts do not fit --rows rollout (they ran with a history window), 1 where none gave anything
        raise CliError(f"nothing was exported (no rollout gave a {kind}; {args.out} was not written): {reasons}",
                       2 if left_out else 1)
    try:
        written = write_records(records, args.out, fmt)
    except MissingDependency as exc:
        raise CliError(str(exc)) from None
    if result.window_mismatch:
        print_warning(f"{len(result.window_mismatch)} of {len(result.rollouts) - len(result.skipped)} rollouts "
                      "exported ran with another history "
                      f"window than --window {'none' if args.window is None else args.window}: their samples show a context the model did not see "
                      "(their token ids are left out); roll out with --window to train on what inference sees")
    for rid, why in result.skipped + left_out:
        stderr.print(f"skipped {escape(rid)}: {escape(why)}")
    zero = [g for g in groups if g.zero_variance]
    summary = {"out": str(args.out), "format": fmt, "window": args.window, "rows": args.rows, "samples": written,
               "rollouts": len(result.rollouts) - len(result.skipped) - len(left_out),
               "skipped": len(result.skipped) + len(left_out),
               "groups": len(groups) if args.grpo else None,
               "zero_variance_groups": [g.group_id for g in zero] if args.grpo else None}
    if args.json:
        print_json({**summary, "group_stats": [g.to_dict() for g in groups]})
    else:
        echo(f"{written} {'samples' if args.rows == 'turn' else 'rollout rows'} from {summary['rollouts']} rollouts -> "
             f"{args.out} ({fmt})"
              + (f"; {len(groups)} groups, {len(zero)} with zero variance" if args.grpo else ""))
    if not written:
        stderr.print("nothing was exported: no rollout gave a sample", markup=False)
        return 1
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    fmt = output_format(args)
    catalog = load_catalog(args, quiet=True)
    system = None
    if args.system_prompt:
        try:
            with open(args.system_prompt, encoding="utf-8") as fh:
                system = fh.read()
        except OSError as exc:
            raise CliError(f"cannot read the system prompt {args.system_prompt}: {exc}") from None
    try:
        rows = task_rows(catalog, args.scenario, args.task, system, args.tools_in_template)
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from None
    except NoTaskRows as exc:
        raise CliError(str(exc)) from None
    try:
        written = write_records(rows, args.out, fmt)
    except MissingDependency as exc:
        raise CliError(str(exc)) from None
    stderr.print(f"{written} task rows -> {escape(str(args.out))}")
    return 0

