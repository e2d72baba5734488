"""``awm agent run``, ``awm verify`` and ``awm fake-llm``."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from awm_engine.cli import verb_help
from awm_engine.agent.endpoints import ConfigError
from awm_engine.agent.policies import PolicyError
from awm_engine.agent.rollout import FormatError, ModelTurn, Observation, RolloutFinished, ToolCall
from awm_engine.agent.scripted_llm import DEFAULT_PORT as DEFAULT_FAKE_PORT
from awm_engine.cli.common import (
    AGENT_RUN_FILES,
    CliError,
    add_data_arg,
    echo,
    get_scenario,
    load_catalog,
    out_dir,
    print_json,
    print_warning,
    run_async,
    shown,
    stderr,
)
from awm_engine.cli.options import add_agent_args, add_endpoint_args, agent_config_from_args, endpoint_from_args
from awm_engine.cli.options import judge_from_args as _judge
from awm_engine.data.error_text import exception_line
from awm_engine.data.terminal import visible
from awm_engine.eval.episode import POLICIES, make_policy, run_episode, verification_warnings
from awm_engine.verify.judge import DEFAULT_PROFILE, PROFILES
from awm_engine.verify.rewards import RewardConfig
from awm_engine.verify.verification import verify_run


def register(verbs) -> None:
    agent = verbs.add_parser("agent", help=verb_help("agent"))
    sub = agent.add_subparsers(dest="agent_verb", metavar="ACTION")
    sub.required = True
    run = sub.add_parser("run", help="one rollout: task -> run directory (-> verification -> reward)")
    add_data_arg(run)
    run.add_argument("--scenario", required=True)
    run.add_argument("--task", type=int, required=True, help="0-based task index")
    run.add_argument("--policy", choices=list(POLICIES), default="llm",
                     help="llm, oracle, replay, immediate, or human (type the tool calls yourself)")
    run.add_argument("--replay", metavar="RUN_DIR", help="with --policy replay: the run to replay")
    add_agent_args(run)
    run.add_argument("--out", metavar="DIR", help="run directory (default outputs/agents/<time>_<scenario>_task_N)")
    run.add_argument("--json", action="store_true", help="print the outcome as JSON")
    run.add_argument("--quiet", action="store_true", help="no live transcript on stderr")
    run.add_argument("--full", action="store_true",
                     help="the live transcript shows whole tool results and turns (default: cut, with a marker)")
    run.set_defaults(func=cmd_agent_run)

    verify = verbs.add_parser("verify", help=verb_help("verify"))
    verify.add_argument("run_dir")
    verify.add_argument("--mode", choices=["code", "sql"], default="sql")
    verify.add_argument("--protocol", choices=list(PROFILES), default=DEFAULT_PROFILE,
                        help="reference: the judge sees and is read exactly as in the AWM reference (default); "
                             "robust: richer judge input, lenient parsing, retries")
    add_data_arg(verify)
    add_endpoint_args(verify, "judge")
    verify.add_argument("--timeout", type=float, default=30.0, help="verifier wall-clock limit, seconds")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(func=cmd_verify)

    replay = verbs.add_parser("replay", help=verb_help("replay"))
    replay.add_argument("run_dir")
    replay.add_argument("--step", type=int, help="print the database diff (against initial.db) after this step")
    add_data_arg(replay)
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(func=cmd_replay)

    fake = verbs.add_parser("fake-llm", help=verb_help("fake-llm"))
    fake.add_argument("--script", required=True, metavar="FILE")
    fake.add_argument("--port", type=int, default=DEFAULT_FAKE_PORT, help=f"default {DEFAULT_FAKE_PORT} (never a real "
                      "endpoint's 8000); 0: a free port (printed); a busy port exits 3 before anything is served")
    fake.set_defaults(func=cmd_fake_llm)


SHOWN_CHARS = {"turn": 600, "arguments": 300, "result": 400, "format": 200}  # what the live transcript shows


def cut(text: str, limit: int | None) -> str:
    """``text`` up to ``limit`` characters, with a visible marker saying how much was left out (None: all of it)."""
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f" … [{len(text) - limit} more characters; --full shows them]"


def _print_event(event, full: bool = False) -> None:
    limit = (lambda kind: None) if full else SHOWN_CHARS.get
    if isinstance(event, ModelTurn):
        text = cut(event.content, limit("turn"))
        stderr.print(f"[bold cyan]assistant {event.iteration}[/bold cyan] {shown(text)}")
        for call in event.native_tool_calls:
            stderr.print(f"  [cyan]tool call[/cyan] {shown(call['name'])} {shown(call['arguments'])}")
    elif isinstance(event, ToolCall):
        arguments = cut(json.dumps(event.arguments, ensure_ascii=False, default=str), limit("arguments"))
        stderr.print(f"  [green]→ {shown(event.tool or event.name)}[/green] {shown(arguments)}")
    elif isinstance(event, Observation):
        colour = "red" if event.is_error else "dim"
        stderr.print(f"  [{colour}]← {shown(cut(event.text, limit('result')))}[/{colour}]")
        if event.traceback:  # the environment's exception first (type and message), then its traceback
            stderr.print(f"  [bold magenta]{shown(exception_line(event.traceback))}[/bold magenta]", highlight=False)
            stderr.print(f"[dim]{shown(event.traceback.rstrip())}[/dim]", highlight=False)
    elif isinstance(event, FormatError):
        stderr.print(f"  [yellow]format error ({shown(event.kind)}): {shown(cut(event.detail, limit('format')))}[/yellow]")
    elif isinstance(event, RolloutFinished):
        stderr.print(f"[bold]stop: {shown(event.stop_reason)}[/bold] after {event.iterations} turns"
                     + (f" ({shown(event.error)})" if event.error else ""))


async def _agent_run(args: argparse.Namespace) -> int:
    out_dir(args.out, holds=AGENT_RUN_FILES)  # before anything starts
    catalog = load_catalog(args, quiet=True)
    scenario = get_scenario(catalog, args.scenario)
    if not 0 <= args.task < len(scenario.tasks):
        raise CliError(f"{scenario.key} has {len(scenario.tasks)} tasks; no task {args.task}")
    endpoint = None
    try:
        if args.policy == "llm":
            endpoint = endpoint_from_args(args)
        mode = args.mode or (endpoint.mode if endpoint else "meta")
        if args.policy == "human":
            mode = "native"  # the person's calls are structured; no <tool_call> text to write
            stderr.print("type a tool call as  TOOL {\"arg\": value}, 'tools' to list them, 'answer TEXT' to finish")
        policy = make_policy("terminal" if args.policy == "human" else args.policy, scenario, args.task, mode,
                             endpoint, args.replay, args.tool_names)
    except (ConfigError, PolicyError) as exc:
        raise CliError(str(exc)) from None
    if getattr(policy, "mismatch", None):
        print_warning(policy.mismatch)
    recorded = getattr(policy, "mode", None) if args.policy == "replay" else None
    if recorded and recorded != mode:
        if args.mode is None:  # replayed in another mode, its calls would be read as a final answer and never made
            mode = recorded
        else:
            print_warning(f"the recording was made in {recorded} mode, replayed here in {mode} mode: its calls are "
                          f"read as {mode} turns (leave out --mode to replay it in {recorded} mode)")
    config = agent_config_from_args(args, mode)
    meta = {"model": endpoint.model if endpoint else args.policy, "api_url": endpoint.base_url if endpoint else "",
            "temperature": endpoint.temperature if endpoint else 1.0, "endpoint": endpoint.public() if endpoint else None}
    verify_mode = None if args.verify == "none" else args.verify
    judge = _judge(args) if verify_mode == "sql" else None
    for warning in verification_warnings(catalog, [(scenario.key, args.task)], verify_mode, judge is not None):
        print_warning(warning)
    if not args.quiet and not args.json:
        stderr.print(f"[bold]{shown(scenario.key)}[/bold] task {args.task}: {shown(scenario.tasks[args.task])}")
    try:
        outcome = await run_episode(catalog, scenario, args.task, policy, config, args.out, verify_mode=verify_mode,
                                    judge=judge, rewards=RewardConfig(),
                                    meta=meta, on_event=None if (args.quiet or args.json) else
                                    (lambda event: _print_event(event, args.full)))
    finally:
        if hasattr(policy, "aclose"):
            await policy.aclose()
    if outcome.failure is not None:
        raise CliError(str(outcome.failure), 1)
    v = outcome.verification
    if args.json:
        print_json({"run_dir": str(outcome.run_dir), "rollout": outcome.finished.to_dict(),
                    "verification": v.to_dict() if v else None})
    else:
        echo(f"run directory: {outcome.run_dir}")
        if v:
            echo(f"label: {v.label}  reward: {v.reward}" + (f"  ({v.note})" if v.note else ""))
    if outcome.finished.stop_reason == "llm_error":  # the model never answered: no verdict, not a failed task
        stderr.print(f"[red]the model endpoint failed: {shown(outcome.finished.error)}; not verified[/red]")
        return 1
    return 0


def cmd_agent_run(args: argparse.Namespace) -> int:
    return run_async(_agent_run(args))


def cmd_verify(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    if not (run_dir / "trajectory.json").is_file():
        from awm_engine.agent.replay import no_trajectory

        raise CliError(no_trajectory(run_dir))
    try:
        awm = json.loads((run_dir / "trajectory.json").read_bytes()).get("awm")
    except (OSError, ValueError, AttributeError, RecursionError):
        awm = None  # verify_run says what is wrong with it
    stop = awm.get("stop_reason") if isinstance(awm, dict) else None
    if stop in ("llm_error", "abandoned"):  # as a rollout: never verified, no answer to judge (nothing is written)
        raise CliError(f"{run_dir}: no verdict: the episode stopped before it ended ({stop}: "
                       f"{visible(str(awm.get('error') or '-'))[:200]}), so it has no final answer to verify", 1)
    catalog = load_catalog(args, quiet=True) if args.data else None
    try:
        report = run_async(verify_run(run_dir, args.mode, catalog, _judge(args) if args.mode == "sql" else None,
                                      timeout=args.timeout, profile=args.protocol))
    except (ValueError, KeyError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(report.to_dict())
    else:
        echo(f"{report.scenario} task {report.task_id}: label {report.label}, reward {report.reward}"
             + (f" ({report.note})" if report.note else ""))
        from awm_engine.agent.replay import traced_steps

        for step in traced_steps(run_dir):  # the environment's errors during the run: each one's exception first
            echo(f"environment error: turn {step.iteration} · {step.tool or '?'} → "
                 f"{step.status or step.error_kind or 'error'} · {exception_line(step.traceback)}")
        reasoning = ((report.judge or {}).get("judge_result") or {}).get("reasoning")
        if reasoning:  # the judge model's words: its control characters made visible
            echo(f"judge: {str(reasoning)[:500]}")
    return 0 if report.has_verdict else 1  # no verdict (judge_error): nothing was scored


def cmd_fake_llm(args: argparse.Namespace) -> int:
    from awm_engine.agent.scripted_llm import ScriptError, load_script, serve

    try:
        load_script(args.script)
    except ScriptError as exc:
        raise CliError(str(exc)) from None
    from awm_engine.cli.env_cmd import PORT_BUSY, port_is_free
    from awm_engine.runtime.ports import free_port

    port = args.port or free_port()
    if not port_is_free(port):  # never print a URL another process answers at
        raise CliError(f"port {port} on 127.0.0.1 is already in use (pick another with --port, or --port 0)",
                       PORT_BUSY)
    stderr.print(f"scripted OpenAI-compatible API at http://127.0.0.1:{port}/v1", markup=False)
    serve(args.script, port)
    return 0


async def _replay(args: argparse.Namespace) -> int:
    from awm_engine.agent.replay import RunReplay
    from awm_engine.bench.tau2.episode import DomainCatalog, run_tau2_data
    from awm_engine.runtime.episode import SnapshotLocked
    from awm_engine.runtime.pool import EnvPool
    from awm_engine.sandbox.safe_fs import UnsafeEntry

    try:
        run = RunReplay(args.run_dir)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    steps = [{"step": s.index, "iteration": s.iteration, "tool": s.tool, "name": s.name, "arguments": s.arguments,
              "is_error": s.is_error, "is_final": s.is_final, "observation": (s.observation or "")[:300],
              "error_kind": s.error_kind, "status": s.status, "traceback": s.traceback,
              "exception": exception_line(s.traceback) or None,
              "format_errors": s.format_errors, "answer": (s.content or "")[:300] if s.is_final else None}
             for s in run.steps]
    data = {"run_dir": str(run.run_dir), "scenario": run.scenario, "task_id": run.task_id,
            "stop_reason": run.stop_reason, "steps": steps}
    if args.step is not None:
        if not 0 <= args.step < len(run.steps):
            raise CliError(f"the run has steps 0..{len(run.steps) - 1}")
        tau2 = None if args.data else run_tau2_data(args.run_dir)  # a τ²-bench rollout: replayed on its domain
        catalog = load_catalog(args, quiet=True) if args.data else DomainCatalog(tau2) if tau2 else None
        try:
            async with EnvPool(workers=1) as pool:
                try:
                    await run.materialize(pool, catalog)
                except (SnapshotLocked, UnsafeEntry) as exc:
                    raise CliError(f"could not rebuild the intermediate states: {exc}") from None
            data["diff"] = run.diff_at(args.step).to_dict()
            data["final_matches"] = run.final_matches()
        finally:
            run.cleanup()
        # the replayed state was a temporary file, removed by cleanup: the JSON points only at files that exist
        for side in ("before", "after"):
            if not Path(data["diff"].get(side) or "").is_file():
                data["diff"].pop(side, None)
        data["diff"]["step"] = args.step
    if args.json:
        print_json(data)
        return 0
    if not steps:
        echo(f"0 steps: {run.run_dir} recorded no turn (stop reason: {run.stop_reason or 'none: not finished'})")
    for s in steps:  # a run's record (tool names, arguments, tracebacks): echo makes its control characters visible
        what = "final answer" if s["is_final"] else (s["tool"] or s["name"] or "format error")
        shown_args = json.dumps(s["arguments"], ensure_ascii=False) if s["tool"] else ""
        if s["is_final"]:
            shown_args = cut_line(s["answer"] or "")
        echo(f"{s['step']:>3}  {what}  {shown_args}")
        if s["is_error"] and not s["traceback"]:  # an error the environment answered (unknown tool, bad arguments …)
            echo(f"       → {s['error_kind'] or 'error'} · {cut_line(s['observation'])}")
        if s["traceback"]:  # the environment's exception behind this step's error: its line, then the traceback
            echo(f"       → {s['status'] or s['error_kind'] or 'error'} · {s['exception']}")
            echo("\n".join("       " + line for line in s["traceback"].rstrip().splitlines()))
    if "diff" in data:
        c = data["diff"]["summary"]
        echo(f"after step {args.step}: {c['tables']} {'table' if c['tables'] == 1 else 'tables'} changed, "
             f"+{c['inserted']} -{c['deleted']} ~{c['updated']}")
        for t in data["diff"]["tables"]:
            echo(f"  {t['table']}: +{len(t['inserted'])} -{len(t['deleted'])} ~{len(t['updated'])}")
        if data["diff"].get("incomplete"):
            echo(f"  incomplete: {data['diff']['incomplete']}")
    return 0


def cut_line(text: str, limit: int = 160) -> str:
    """``text`` on one line (whitespace runs made single spaces), cut at ``limit`` with a marker."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit] + " …"


def cmd_replay(args: argparse.Namespace) -> int:
    return run_async(_replay(args))
