"""Task → rollout → verification → reward, in one call: what ``awm agent run`` and evaluations use."""
from __future__ import annotations

import contextlib
import inspect
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import (
    HumanPolicy,
    ImmediatePolicy,
    LLMPolicy,
    OraclePolicy,
    Policy,
    PolicyError,
    ReplayPolicy,
    TerminalHumanPolicy,
)
from awm_engine.agent.rollout import AgentConfig, Rollout, RolloutFinished
from awm_engine.data.catalog import Catalog, Scenario
from awm_engine.runtime.episode import EnvLoadError, EpisodeHandle, EpisodeLoadFailure
from awm_engine.runtime.mcp_client import McpEpisode
from awm_engine.runtime.pool import EnvPool
from awm_engine.sandbox.host import protections
from awm_engine.verify.judge import DEFAULT_PROFILE
from awm_engine.verify.rewards import RewardConfig
from awm_engine.verify.verification import VerifyReport, verify_both, verify_run

POLICIES = ("llm", "oracle", "replay", "immediate", "human")


def default_run_dir(scenario: Scenario, task_idx: int, root: Path | str = "outputs/agents") -> Path:
    return Path(root) / f"{time.strftime('%Y%m%d_%H%M%S')}_{scenario.key}_task_{task_idx}_{secrets.token_hex(2)}"


def make_policy(kind: str, scenario: Scenario, task_idx: int, mode: str = "meta", endpoint: Endpoint | None = None,
                replay_from: Path | str | None = None, style: str = "reference") -> Policy:
    if kind == "llm":
        if endpoint is None:
            raise PolicyError("the llm policy needs a model endpoint", "config")
        return LLMPolicy(endpoint)
    if kind == "oracle":
        solution = scenario.solution(task_idx)
        if solution is None:
            raise PolicyError(f"{scenario.key} has no reference solution for task {task_idx} "
                              "(reference_solutions.jsonl)", "config")
        return OraclePolicy(solution, mode, style)
    if kind == "replay":
        if replay_from is None:
            raise PolicyError("the replay policy needs a run directory or trajectory.json", "config")
        return ReplayPolicy(read_recording(replay_from), scenario.key, task_idx)
    if kind == "immediate":
        return ImmediatePolicy()
    if kind == "human":
        return HumanPolicy()
    if kind == "terminal":
        return TerminalHumanPolicy()
    raise PolicyError(f"unknown policy {kind!r} (choose from {', '.join(POLICIES)})", "config")


def read_recording(replay_from: Path | str) -> dict:
    """The trajectory a replay repeats: ``trajectory.json`` of a run directory, or that file itself. PolicyError
    (``config``) when there is none or it is not a trajectory."""
    path = Path(replay_from)
    path = path / "trajectory.json" if path.is_dir() else path
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise PolicyError(f"{replay_from}: no such run directory or trajectory.json", "config") from None
    except OSError as exc:
        raise PolicyError(f"{path}: cannot be read ({exc.strerror or exc})", "config") from None
    except (ValueError, RecursionError) as exc:
        raise PolicyError(f"{path}: not a trajectory (not JSON: {str(exc)[:200]})", "config") from None
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list) or \
            not all(isinstance(entry, dict) for entry in data["trajectory"]):
        raise PolicyError(f"{path}: not a trajectory (no list of steps under \"trajectory\")", "config")
    return data


VERIFY_MODES = ("code", "sql", "both")


@dataclass
class EpisodeOutcome:
    """What ``run_episode`` hands back: the rollout's end and the verdict, or why the episode never opened."""

    run_dir: Path
    finished: RolloutFinished | None
    verification: VerifyReport | None
    rollout: Rollout | None = None
    failure: EpisodeLoadFailure | None = None

    @property
    def reward(self) -> float | None:
        return self.verification.reward if self.verification else None

    @property
    def ok(self) -> bool:
        return self.failure is None


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


async def open_episode(scenario: Scenario, task_idx: int, run_dir: Path, backend: str = "pool",
                       pool: EnvPool | None = None, data_dirs: list[str] | None = None,
                       call_timeout: float | None = None, schema_check: str | None = None) -> EpisodeHandle:
    """An episode of ``scenario`` on the chosen backend: ``pool`` (a worker process) or ``mcp`` (a real
    ``awm env serve`` MCP server for this episode). ``schema_check`` (reference | robust; None: the
    backend's default) is how calls to tools whose input schema is not valid JSON Schema go. Raises
    EnvLoadError when it cannot be opened."""
    if backend == "mcp":
        return await McpEpisode.start(scenario.key, run_dir, data_dirs, task_idx, call_timeout, schema_check)
    if backend != "pool":
        raise ValueError(f"unknown backend {backend!r} (pool or mcp)")
    return await pool.open_episode(scenario, run_dir=run_dir, task_idx=task_idx, schema_check=schema_check)


async def verify_episode(run_dir: Path, verify_mode: str, catalog: Catalog, judge: Endpoint | None = None,
                         rewards: RewardConfig | None = None, profile: str = DEFAULT_PROFILE) -> VerifyReport:
    """One verification policy for every front end: ``code``, ``sql`` (judge, else code fallback) or
    ``both`` (code always, plus sql + judge when a judge is configured, merged). ``profile`` is the
    verification profile (reference | robust: how the judge is asked and read)."""
    if verify_mode == "both":
        return await verify_both(run_dir, catalog, judge, rewards, profile=profile)
    if verify_mode not in VERIFY_MODES:
        raise ValueError(f"unknown verification mode {verify_mode!r} (choose from {', '.join(VERIFY_MODES)})")
    return await verify_run(run_dir, verify_mode, catalog, judge, rewards, profile=profile)


def _where(tasks: list[tuple[str, int]]) -> str:
    """``gofundme (10 tasks), rover (task 3)``: at most five scenarios named."""
    by_scenario: dict[str, list[int]] = {}
    for key, task in tasks:
        by_scenario.setdefault(key, []).append(task)
    names = [f"{key} (task {ts[0]})" if len(ts) == 1 else f"{key} ({len(ts)} tasks)" for key, ts in by_scenario.items()]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more scenarios" if len(names) > 5 else "")


def verification_warnings(catalog: Catalog, tasks: Iterable[tuple[str, int]], verify_mode: str | None,
                          judge: bool) -> list[str]:
    """Before a run: the selected (scenario key, task) pairs that the chosen verification cannot verify as asked
    (``judge``: a judge is configured). Verifiers count by the mode their code defines (``Scenario.verifier``)."""
    if verify_mode in (None, "none"):
        return []
    tasks = sorted(set(tasks))

    def has(mode: str, key: str, task: int) -> bool:
        return bool(catalog.get(key).verifier_has_code[mode].get(task))

    warnings = []
    judged = verify_mode in ("sql", "both") and judge
    if judged:
        no_sql = [t for t in tasks if not has("sql", *t)]
        fallback = [t for t in no_sql if has("code", *t)]
        if fallback:
            warnings.append(f"--verify {verify_mode} with a judge: {len(fallback)} of {len(tasks)} selected tasks have "
                            f"no sql-mode verifier (verify_task) for the judge ({_where(fallback)}); their code-mode "
                            "verifier decides instead")
        no_verdict = [t for t in no_sql if not has("code", *t)]
    else:
        no_verdict = [t for t in tasks if not has("code", *t)]
    if no_verdict:
        what = "no verifier in either mode" if judged else "no code-mode verifier (verify_task_completion)" + (
            "" if verify_mode == "code" else ", which sql mode uses when no judge is configured")
        with_sql = sum(has("sql", *t) for t in no_verdict)
        hint = (f"; {with_sql} of them have an sql-mode verifier: use --verify sql with a judge (--judge-endpoint)"
                if with_sql and not judged else "")
        warnings.append(f"--verify {verify_mode}: {len(no_verdict)} of {len(tasks)} selected tasks have {what} "
                        f"({_where(no_verdict)}); they will end judge_error (no verdict){hint}")
    return warnings


def environment_warnings(catalog: Catalog, tasks: Iterable[tuple[str, int]]) -> list[str]:
    """Before a run: selected scenarios whose episodes cannot open (no environment code), whose database is empty
    or cannot be built (no schema, no sample rows), and selected tasks the doctor found solved at start (a
    do-nothing agent scores them). The last comes from ``awm env doctor``'s cached diagnosis: nothing is run."""
    from awm_engine.db.templates import TemplateCache
    from awm_engine.verify.doctor import cached_diagnosis

    tasks = sorted(set(tasks))
    keys = list(dict.fromkeys(key for key, _ in tasks))
    scenarios = [catalog.get(key) for key in keys]
    no_code = [s.key for s in scenarios if not s.extras.get("envs", {}).get("has_code")]
    warnings = []
    if no_code:
        warnings.append(f"{len(no_code)} of {len(keys)} selected scenarios have no environment code "
                        f"({', '.join(no_code[:5])}{' …' if len(no_code) > 5 else ''}): their rollouts will error "
                        "(environment_error)")
    cache = TemplateCache()
    empty = []
    for s in scenarios:
        if s.key in no_code:
            continue
        if "db" not in s.refs:
            empty.append(f"{s.key}: no database schema")
            continue
        rows = cache.built_rows(s)
        if rows == 0 or (rows is None and not s.insert_count):
            empty.append(f"{s.key}: {'no sample data' if 'sample' not in s.refs else 'no rows'}")
    if empty:
        warnings.append(f"{len(empty)} of {len(keys)} selected scenarios start with an empty database "
                        f"({'; '.join(empty[:5])}{' …' if len(empty) > 5 else ''}): their tasks have nothing to "
                        "work on")
    wanted = set(tasks)
    solved = []
    for s in scenarios:
        diagnosis = cached_diagnosis(s)
        if diagnosis is None:
            continue
        solved += sorted({(s.key, p.task) for p in diagnosis.problems
                          if p.kind == "solved_at_start" and (s.key, p.task) in wanted})
    if solved:
        warnings.append(f"{len(solved)} of {len(tasks)} selected tasks are solved at start ({_where(solved)}): "
                        "awm env doctor found their code-mode verifier says complete on the untouched database, so "
                        "they score without the agent doing anything")
    return warnings


def missing_solutions(catalog: Catalog, tasks: Iterable[tuple[str, int]]) -> str | None:
    """Why ``--policy oracle`` cannot run the selected (scenario key, task) pairs, or None when it can."""
    tasks = sorted(set(tasks))
    missing = [(key, task) for key, task in tasks if task not in catalog.get(key).solution_refs]
    if not missing:
        return None
    return (f"--policy oracle plays reference solutions (reference_solutions.jsonl), and {len(missing)} of "
            f"{len(tasks)} selected tasks have none ({_where(missing)}); select tasks that have one (--scenario, "
            "--task) or use another policy")


async def run_episode(catalog: Catalog, scenario: Scenario, task_idx: int, policy: Policy,
                      config: AgentConfig | None = None, run_dir: Path | str | None = None,
                      pool: EnvPool | None = None, verify_mode: str | None = "code",
                      judge: Endpoint | None = None, rewards: RewardConfig | None = None,
                      meta: dict[str, Any] | None = None, on_event=None, on_open=None,
                      backend: str = "pool") -> EpisodeOutcome:
    """Task → episode → rollout → verification → reward: the one episode lifecycle of the CLI, batch
    evaluation and the TUI.

    ``backend`` chooses where the environment runs (``pool``: a worker of ``pool``, or a private one;
    ``mcp``: a real MCP server started for this episode). ``on_open(episode)`` runs once the episode is
    open, ``on_event(event)`` for every step event; either may be a coroutine function (awaiting in
    ``on_event`` pauses the agent: the TUI's step mode). ``verify_mode`` is code | sql | both | None (no
    verification). An episode that cannot be opened comes back as ``outcome.failure`` (nothing raised).
    """
    config = config or AgentConfig()
    run_dir = (Path(run_dir) if run_dir else default_run_dir(scenario, task_idx)).resolve()
    data_dirs = [str(Path(d).resolve()) for d in catalog.dirs]
    try:
        task = scenario.task(task_idx).text
    except IndexError:
        return EpisodeOutcome(run_dir, None, None, failure=EpisodeLoadFailure(
            scenario.key, f"{scenario.key} has {len(scenario.tasks)} tasks; no task {task_idx}", "bad_task"))
    own_pool = pool is None and backend == "pool"
    if own_pool:
        pool = EnvPool(workers=1)
        await pool.start()
    rollout = finished_event = None
    try:
        try:
            episode = await open_episode(scenario, task_idx, run_dir, backend, pool, data_dirs, config.call_timeout,
                                         getattr(config, "protocol", "reference"))
        except EnvLoadError as exc:
            return EpisodeOutcome(run_dir, None, None, failure=EpisodeLoadFailure(scenario.key, str(exc)))
        try:
            if on_open is not None:
                await _maybe_await(on_open(episode))
            info = {"data_dirs": data_dirs, "backend": backend, "template": getattr(episode, "template", None),
                    "sandbox": protections().to_dict(),
                    **(meta or {})}
            rollout = Rollout(episode, scenario.key, task_idx, task, policy, config, info)
            # closed here even when this is cancelled while on_event waits (the TUI's step mode): the rollout
            # records how it ended before the episode closes, not whenever the generator is collected
            async with contextlib.aclosing(rollout.events()) as events:
                async for event in events:
                    if isinstance(event, RolloutFinished):
                        finished_event = event  # handed on once the databases are in run_dir (after close)
                    elif on_event is not None:
                        await _maybe_await(on_event(event))
        finally:
            await episode.close()
    finally:
        if own_pool:
            await pool.close()
    if finished_event is not None and on_event is not None:
        await _maybe_await(on_event(finished_event))
    report = None
    if verify_mode and rollout.finished.stop_reason not in ("llm_error", "abandoned"):  # no answer: nothing to judge
        report = await verify_episode(run_dir, verify_mode, catalog, judge, rewards,
                                      getattr(config, "protocol", DEFAULT_PROFILE))
    return EpisodeOutcome(run_dir, rollout.finished, report, rollout)
