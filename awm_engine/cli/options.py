"""Options shared by several verbs. The agent settings are one group used by ``awm agent run`` and
``awm eval run`` (so the two accept the same flags and cannot drift), with one way to turn the parsed
flags into the model endpoint, the ``AgentConfig`` and the judge. The executor (``--executor``,
``--ray-address``) is one group used by every verb that runs rollouts: ``awm eval run`` and the
``awm bench … run`` verbs."""
from __future__ import annotations

import argparse
import importlib.util
from typing import TYPE_CHECKING

from awm_engine.cli.common import CliError
from awm_engine.runtime.caps import result_cap, trajectory_cap

if TYPE_CHECKING:
    from awm_engine.agent.endpoints import Endpoint
    from awm_engine.agent.rollout import AgentConfig

# the agent, endpoint and executor modules are imported where a verb uses them: ``awm env serve`` (whose cold start
# is on a user's clock) needs only the result cap

AGENT_GROUP = "agent settings"
EXECUTOR_GROUP = "executor"


def seconds(value: str) -> float:
    """A timeout on the command line: a number of seconds above 0 (``inf``: none)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not number > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be above 0, not {value}")
    return number


def add_endpoint_args(parser, prefix: str = "") -> None:
    """``--endpoint``, ``--model``, ``--base-url`` (with ``prefix``: ``--judge-endpoint`` …)."""
    dash = f"--{prefix}-" if prefix else "--"
    parser.add_argument(f"{dash}endpoint", metavar="NAME", help="a named endpoint from the awm config file")
    parser.add_argument(f"{dash}model", metavar="M")
    parser.add_argument(f"{dash}base-url", metavar="URL", help="OpenAI-compatible base URL (or OPENAI_BASE_URL)")


def add_agent_args(parser: argparse.ArgumentParser) -> None:
    """The agent settings: endpoint, protocol, limits, format errors, verification and the judge."""
    from awm_engine.agent.rollout import PROTOCOLS

    group = parser.add_argument_group(AGENT_GROUP, "the model, the tool protocol, the limits of a rollout and "
                                                   "its verification")
    add_endpoint_args(group)
    group.add_argument("--api-key", help="API key (default: endpoint config, then OPENAI_API_KEY)")
    group.add_argument("--mode", choices=["meta", "native"], default=None, help="tool protocol (default: meta)")
    group.add_argument("--protocol", choices=list(PROTOCOLS), default="reference",
                       help="reference: behave like the AWM reference agent (default); robust: awm's forgiving "
                            "variant (format errors reported to the model, any tool-name form)")
    group.add_argument("--system-prompt", metavar="FILE",
                       help="the exact system prompt to use (e.g. the one a model was trained with)")
    group.add_argument("--max-turns", type=int, default=None, help="default 30 (reference) / 20 (robust)")
    group.add_argument("--window", type=int, default=None, help="history window w (keep the last w turns)")
    group.add_argument("--temperature", type=float, default=None)
    group.add_argument("--max-tokens", type=int, default=None)
    group.add_argument("--retries", type=int, default=None,
                       help="endpoint retries per request (default 2 reference, as its client / 3 robust; the "
                            "request timeout is 600 s reference / 120 s robust)")
    group.add_argument("--call-timeout", type=seconds, default=None,
                       help="per tool call, seconds (default 60 reference / 10 robust)")
    group.add_argument("--on-timeout", choices=("finish", "interrupt"), default=None,
                       help="a handler still running when its call times out: finish (default reference: it goes on "
                            "and its writes land before the final database is taken, as the reference's server) or "
                            "interrupt (default robust: it is stopped)")
    group.add_argument("--episode-timeout", type=float, default=None,
                       help="per rollout, seconds; 0: no limit (default: none reference / 900 robust)")
    group.add_argument("--on-format-error", choices=["observe", "stop"], default="observe")
    group.add_argument("--tool-names", choices=["reference", "prefixed", "plain"], default="reference",
                       help="how list_tools shows tool names (meta mode)")
    add_result_cap_arg(group)
    group.add_argument("--trajectory-cap", metavar="BYTES",
                       help="tool-result text the run stores in total (trajectory.json, events.jsonl); past it each "
                            "result keeps its first 1 KiB and a marker (default $AWM_TRAJECTORY_CAP or 8MiB)")
    group.add_argument("--verify", choices=["code", "sql", "none"], default="code",
                       help="verify each rollout (sql uses the LLM judge when one is configured)")
    add_endpoint_args(group, "judge")


def add_result_cap_arg(parser) -> None:
    parser.add_argument("--result-cap", metavar="BYTES",
                        help="bytes of one tool result the model sees; the rest is cut, with a marker saying so "
                             "(1K to 4MiB; default $AWM_RESULT_CAP or 4MiB)")


def result_cap_from_args(args: argparse.Namespace) -> int:
    """``--result-cap`` (else ``$AWM_RESULT_CAP``, else 4 MiB) in bytes; ``CliError`` for a bad size."""
    try:
        return result_cap(getattr(args, "result_cap", None))
    except ValueError as exc:
        raise CliError(f"--result-cap: {exc}") from None


def endpoint_from_args(args: argparse.Namespace) -> Endpoint:
    """The model endpoint the agent flags name (flags over a named endpoint over OPENAI_*); ``ConfigError``. With
    ``--protocol reference`` the client's timeout and retries default to the reference agent's (600 s, 2)."""
    from awm_engine.agent.endpoints import REFERENCE_CLIENT, resolve_endpoint

    defaults = REFERENCE_CLIENT if getattr(args, "protocol", None) == "reference" else None
    return resolve_endpoint(args.endpoint, args.base_url, args.model, args.api_key, args.mode, defaults=defaults,
                            temperature=args.temperature, max_tokens=args.max_tokens, max_retries=args.retries)


def agent_config_from_args(args: argparse.Namespace, mode: str | None = None,
                           endpoint: Endpoint | None = None) -> AgentConfig:
    """The rollout settings; ``mode`` defaults to ``--mode``, then the endpoint's, then meta."""
    from awm_engine.agent.endpoints import ConfigError, read_system_prompt
    from awm_engine.agent.rollout import PROTOCOL_DEFAULT, AgentConfig

    try:
        prompt = read_system_prompt(args.system_prompt, endpoint)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    episode_timeout = PROTOCOL_DEFAULT if args.episode_timeout is None else (args.episode_timeout or None)
    try:
        trajectory = trajectory_cap(args.trajectory_cap)
    except ValueError as exc:
        raise CliError(f"--trajectory-cap: {exc}") from None
    return AgentConfig(mode=mode or args.mode or (endpoint.mode if endpoint else "meta"), protocol=args.protocol,
                       max_turns=args.max_turns, history_window=args.window, call_timeout=args.call_timeout,
                       on_timeout=getattr(args, "on_timeout", None), episode_timeout=episode_timeout, on_format_error=args.on_format_error,
                       tool_name_style=args.tool_names, system_prompt=prompt, result_cap=result_cap_from_args(args),
                       trajectory_cap=trajectory)


def judge_from_args(args: argparse.Namespace, prefix: str = "judge") -> Endpoint | None:
    """The judge the ``--judge-*`` flags name (else the configured one; None when there is none)."""
    from awm_engine.agent.endpoints import ConfigError, judge_endpoint

    try:
        return judge_endpoint(name=getattr(args, f"{prefix}_endpoint"), base_url=getattr(args, f"{prefix}_base_url"),
                              model=getattr(args, f"{prefix}_model"))
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def add_executor_args(parser: argparse.ArgumentParser, local_only: str | None = None) -> None:
    """``--executor local|ray`` and ``--ray-address``. ``local_only``: why this verb's environments cannot run
    on Ray (said in ``--help``; ``executor_from_args`` refuses ``--executor ray`` with it)."""
    from awm_engine.eval.batch import EXECUTORS

    if local_only:
        group = parser.add_argument_group(EXECUTOR_GROUP, f"local only: {local_only}")
        group.add_argument("--executor", choices=list(EXECUTORS), default=None,
                           help="local (the only one that applies here; ray is refused)")
        group.add_argument("--ray-address", metavar="ADDR", help="refused: see --executor")
        return
    group = parser.add_argument_group(EXECUTOR_GROUP, "where the environments run: worker processes on this "
                                                      "machine (local), or Ray actors each hosting a pool of "
                                                      "workers (ray), locally or on a cluster")
    group.add_argument("--executor", choices=list(EXECUTORS), default=None,
                       help="local (default) or ray (needs pip install 'awm[ray]'); --resume keeps the run's own "
                            "unless given")
    group.add_argument("--ray-address", metavar="ADDR",
                       help="with --executor ray: a running cluster (ray://HOST:10001 or HOST:6379; default: "
                            "$RAY_ADDRESS, else a Ray instance started on this machine for the run)")


def executor_from_args(args: argparse.Namespace, recorded: tuple[str, str | None] | None = None,
                       local_only: str | None = None) -> tuple[str, str | None]:
    """(executor, ray address) from the flags, else from ``recorded`` (a resumed run's own), else local.
    ``CliError`` for ``--ray-address`` without the ray executor, and for ray where ``local_only`` says why not."""
    executor = args.executor or (recorded[0] if recorded and recorded[0] else "local")
    if args.executor is None and args.ray_address is None and recorded:
        address = recorded[1]
    else:
        address = args.ray_address
    if local_only and (args.executor == "ray" or args.ray_address):
        raise CliError(f"--executor ray does not apply here: {local_only}")
    if address and executor != "ray":
        raise CliError("--ray-address needs --executor ray")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise CliError("--executor ray needs Ray: pip install 'awm[ray]' (or make setup-ray)")
    return executor, address
