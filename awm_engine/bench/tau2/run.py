"""``awm bench tau2 run``: τ²-bench tasks × trials through awm's engine, scored as τ²-bench does, into an awm run
directory.

The run directory has the formats of ``awm eval run`` (``awm_engine.data.run_formats``), so ``awm bench report`` and
the TUI's evaluation dashboard read it: ``config.json`` (``Tau2Config``, ``"benchmark": "tau2"``, plus the keys of
an evaluation's configuration), ``results.jsonl`` (one fsync'd line per
simulation, written as each finishes: the τ² messages, the termination reason, ``reward_info`` component by
component), ``metadata.json`` (τ²'s metrics per domain, the paper's columns, awm's summaries; rewritten as the run
goes), ``rollouts/<domain>/<task>_<trial>/`` (each simulation's ``trajectory.json``, ``events.jsonl``,
``simulation.json`` in τ²'s shape, ``reward.json``, and the episode's ``initial.db`` / ``final.db``). One writer at
a time; ``resume`` drops errored and torn lines and runs only what is missing (the loop is ``eval.runner``'s,
``Tau2Run`` this benchmark's adapter).

Each simulation: a pool episode of the domain opened at the task's initial state, the agent and the simulated user
(``orchestrator``), then ``evaluation.evaluate_simulation``. Trial seeds follow τ²: ``random.seed(seed)``, one
``randint(0, 10**6)`` per trial, sent as the ``seed`` of every request of that trial.
"""
from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
import re
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import LLMPolicy, PolicyError
from awm_engine.bench.report import cell
from awm_engine.bench.tau2.data import DEFAULT_SPLIT, DOMAINS, Tau2Data, domain_key, domain_of_key
from awm_engine.bench.tau2.episode import DomainScenario, domain_catalog, user_tool_schemas
from awm_engine.bench.tau2.evaluation import evaluate_simulation
from awm_engine.bench.tau2.metrics import PASS_THRESHOLD, domain_metrics, paper_columns
from awm_engine.bench.tau2.orchestrator import INFRASTRUCTURE_ERROR, Limits, Orchestrator, Participant, Simulation
from awm_engine.bench.tau2.prompts import JUDGE_SYSTEM, agent_system_prompt, judge_user_prompt, user_system_prompt
from awm_engine.bench.tau2.tasks import Task
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.run_formats import CONFIG, METADATA, TRAJECTORY, RunFormatError
from awm_engine.eval.batch import EXECUTORS
from awm_engine.eval.metrics import summarize
from awm_engine.eval.results import ResultsIndex, rollout_id
from awm_engine.eval.runner import Adapter, Progress, run_items
from awm_engine.runtime.episode import EnvLoadError
from awm_engine.runtime.pool import EnvPool
from awm_engine.sandbox.host import protections

BENCHMARK = "tau2"
DEFAULT_SEED = 300
DEFAULT_TEMPERATURE = 0.0  # τ²'s default LLM arguments for the agent and the user
COLUMN_OF = {"airline": "Airline", "retail": "Retail", "telecom": "Telecom"}


@dataclass
class Tau2Config:
    data_dir: str
    domains: list[str]
    split: str = DEFAULT_SPLIT
    task_ids: list[str] | None = None
    task_indexes: list[int] | None = None  # positions in each domain's split (awm eval run --task N), after task_ids
    airline_db: str | None = None
    k: int = 1  # trials per task
    endpoint: dict[str, Any] | None = None  # the agent's model: Endpoint.public() and max_retries (never the key)
    user_endpoint: dict[str, Any] | None = None  # the user simulator's
    judge: dict[str, Any] | None = None  # the NL-assertion judge (used only where NL_ASSERTION is in the basis)
    max_steps: int = 200
    max_errors: int = 10
    timeout: float | None = None
    seed: int = DEFAULT_SEED
    concurrency: int = 4
    workers: int | None = None
    executor: str = "local"  # local (worker processes here) | ray (Ray actors, each with its own workers)
    ray_address: str | None = None  # a running cluster (None: $RAY_ADDRESS, else a Ray started for the run)
    policy: str = "llm"
    benchmark: str = BENCHMARK
    task_versions: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))

    def to_dict(self) -> dict[str, Any]:
        """Its fields, plus the keys of an evaluation's configuration (``awm eval report | list`` read it)."""
        return CONFIG.stamp({**asdict(self), "data_dirs": [self.data_dir],
                             "scenarios": [domain_key(d) for d in self.domains], "verify": "tau2",
                             "pass_threshold": PASS_THRESHOLD})

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path | str = CONFIG.file) -> "Tau2Config":
        CONFIG.check(data, path)
        if data.get("benchmark") != BENCHMARK:
            raise ValueError(f"{path} is not a τ²-bench run")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @classmethod
    def load(cls, run_dir: Path | str) -> "Tau2Config":
        path = Path(run_dir) / CONFIG.file
        return cls.from_dict(CONFIG.read(path), path)

    @property
    def model(self) -> str:
        return (self.endpoint or {}).get("model") or self.policy

    @property
    def user_model(self) -> str | None:
        return (self.user_endpoint or self.endpoint or {}).get("model")

    def data(self) -> Tau2Data:
        return Tau2Data(Path(self.data_dir), Path(self.airline_db) if self.airline_db else None)


def is_tau2_run(run_dir: Path | str) -> bool:
    try:
        return json.loads((Path(run_dir) / CONFIG.file).read_text()).get("benchmark") == BENCHMARK
    except (OSError, ValueError, AttributeError):
        return False


def trial_seeds(seed: int, k: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(0, 10 ** 6) for _ in range(k)]


def task_dir_name(task_id: str, trial: int) -> str:
    """A file-system-safe directory name for a task's trial (telecom ids hold '|', '[' …)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", task_id).strip("_")[:60] or "task"
    if safe != task_id:
        safe += "-" + hashlib.sha1(task_id.encode()).hexdigest()[:8]
    return f"{safe}_{trial}"


class RunRefused(ValueError):
    """The run cannot start (unknown domain, split or task ids, no database, no policy)."""


def preflight(config: Tau2Config, skipped: dict[str, str] | None = None) -> tuple[Tau2Data, dict[str, list[Task]]]:
    """The tasks of each domain (``RunRefused`` with the reason when the run cannot start). Given a ``skipped``
    dict, a domain that cannot run (no database, policy or usable split) is put there with the reason and the
    others run; the run is refused only when no domain can."""
    if not config.domains:
        raise RunRefused("no domain chosen (--domain airline|retail|telecom)")
    unknown = [d for d in config.domains if d not in DOMAINS]
    if unknown:
        raise RunRefused(f"unknown domain(s) {', '.join(unknown)} (choose from {', '.join(DOMAINS)})")
    if config.k < 1 or config.max_steps < 1 or config.max_errors < 1 or config.concurrency < 1:
        raise RunRefused("-k, --max-steps, --max-errors and --concurrency must be at least 1")
    if config.executor not in EXECUTORS:
        raise RunRefused(f"unknown executor {config.executor!r} (choose from {', '.join(EXECUTORS)})")
    data = config.data()
    if not data.root.is_dir():
        raise RunRefused(f"no τ² data directory at {data.root} (--tau2-data DIR)")
    chosen: dict[str, list[Task]] = {}
    wanted = set(config.task_ids or [])
    unusable: dict[str, str] = {}
    for name in config.domains:
        domain = data.domain(name)
        try:
            tasks = domain.split_tasks(config.split)
        except KeyError as exc:
            unusable[name] = str(exc.args[0])
            continue
        if wanted:
            tasks = [t for t in tasks if t.id in wanted]
        if config.task_indexes is not None:  # as awm eval run's --task: positions in the split, others skipped
            tasks = [tasks[i] for i in dict.fromkeys(config.task_indexes) if isinstance(i, int) and 0 <= i < len(tasks)]
        if not tasks:
            continue
        lacking = [what for what, value in (("policy", domain.policy), ("user-simulator guidelines",
                                                                          domain.guidelines())) if value is None]
        if lacking:
            unusable[name] = f"{name}: no {' and no '.join(lacking)} in {domain.dir}"
        elif (problem := domain.db_problem()) is not None:
            unusable[name] = problem
        else:
            chosen[name] = tasks
    if unusable and (skipped is None or not chosen):
        raise RunRefused("; ".join(unusable.values()))
    if skipped is not None:
        skipped.update(unusable)
    if wanted:
        found = {t.id for tasks in chosen.values() for t in tasks}
        missing = sorted(wanted - found)
        if missing:
            raise RunRefused(f"task ids not in split {config.split!r} of {', '.join(config.domains)}: "
                             f"{', '.join(map(repr, missing[:5]))}")
    if not chosen:
        if config.task_indexes is not None:
            raise RunRefused(f"no task at position(s) {', '.join(map(str, config.task_indexes))} of split "
                             f"{config.split!r} of {', '.join(config.domains)}")
        raise RunRefused("no tasks selected")
    return data, chosen


def make_pool(config: Tau2Config):
    """Where the domains' episodes live: worker processes here, or Ray actors (``--executor ray``) that build the
    domains from the same data directory on their nodes."""
    if config.executor == "ray":
        from awm_engine.runtime.ray_pool import RayEnvPool

        factory = functools.partial(domain_catalog, config.data_dir, config.airline_db, config.split)
        return RayEnvPool(catalog=factory, actors=config.workers, address=config.ray_address)
    if config.executor not in EXECUTORS:
        raise RunRefused(f"unknown executor {config.executor!r} (choose from {', '.join(EXECUTORS)})")
    return EnvPool(workers=config.workers or min(2, max(1, config.concurrency)))


def make_nl_judge(endpoint: Endpoint):
    """An NL-assertion judge on ``endpoint`` (temperature 0, one request, the reply read with a plain
    ``json.loads``; results with ``met`` from ``metExpectation``)."""
    judge = LLMPolicy(replace(endpoint, temperature=0.0))

    async def grade(messages: list[dict[str, Any]], assertions: list[str]) -> list[dict[str, Any]]:
        turn = await judge.next_turn([{"role": "system", "content": JUDGE_SYSTEM},
                                      {"role": "user", "content": judge_user_prompt(messages, assertions)}],
                                     [], "meta")
        data = json.loads(turn.content)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise ValueError("the judge's reply has no 'results' list")
        return [{"assertion": r.get("expectedOutcome"), "reasoning": r.get("reasoning"),
                 "met": r.get("metExpectation") is True} for r in results if isinstance(r, dict)]

    grade.policy = judge  # closed by the caller
    return grade


def simulation_record(domain: str, task: Task, trial: int, config: Tau2Config) -> dict[str, Any]:
    key = domain_key(domain)
    return {"id": rollout_id(key, task.id, trial), "scenario": key, "domain": domain, "task_id": task.id,
            "sample": trial, "trial": trial, "task": task.summary, "model": config.model,
            "user_model": config.user_model, "policy": config.policy, "time": time.time(), "run_dir": None}


def _trajectory(run_dir: Path, domain: str, task: Task, trial: int, config: Tau2Config, sim: Simulation,
                reward: dict[str, Any] | None) -> None:
    """``trajectory.json`` in awm's rollout format (replays, the TUI), with the τ² messages."""
    data = TRAJECTORY.stamp({
        "scenario": domain_key(domain), "task_id": task.id, "task": task.summary, "model": config.model,
        "api_url": (config.endpoint or {}).get("base_url", ""), "max_iterations": config.max_steps,
        "temperature": (config.endpoint or {}).get("temperature"), "total_iterations": sim.step_count,
        "timestamp": time.strftime("%Y%m%d_%H%M%S"), "trajectory": [], "messages": sim.messages,
        "awm": {"policy": "tau2", "benchmark": BENCHMARK, "domain": domain, "trial": trial, "seed": sim.seed,
                "stop_reason": sim.termination_reason, "final_answer": None, "error": sim.error,
                "usage": sim.usage, "data_dirs": [config.data_dir], "airline_db": config.airline_db,
                "reward": (reward or {}).get("reward"),
                "user_model": config.user_model}})
    (run_dir / TRAJECTORY.file).write_text(dumps_text(data, indent=2, default=str), encoding="utf-8")


async def run_simulation(scenario: DomainScenario, task: Task, trial: int, seed: int | None, pool: EnvPool,
                         agent_policy, user_policy, config: Tau2Config, run_dir: Path, nl_judge=None,
                         on_event=None, on_open=None) -> tuple[Simulation | None, Any, str | None]:
    """One simulation and its score: (simulation, reward info or None, why the episode could not open)."""
    domain = scenario.domain
    data = scenario.domain_data
    try:
        episode = await pool.open_episode(scenario, run_dir=run_dir, options={"task_id": task.id})
    except EnvLoadError as exc:
        return None, None, str(exc)
    try:
        if on_open is not None:
            result = on_open(episode)
            if asyncio.iscoroutine(result):
                await result
        agent = Participant(agent_policy, agent_system_prompt(data.policy), episode.list_tools())
        user = Participant(user_policy, user_system_prompt(data.guidelines(), str(task.user_scenario)),
                           user_tool_schemas(domain))
        limits = Limits(config.max_steps, config.max_errors, config.timeout)
        sim = await Orchestrator(episode, agent, user, task.id, trial, seed, limits, on_event=on_event,
                                 events_path=run_dir / "events.jsonl", scenario=scenario.key,
                                 task_text=task.summary).run()
    finally:
        await episode.close()
    reward = None
    if sim.termination_reason != INFRASTRUCTURE_ERROR:
        reward = await evaluate_simulation(data, task, sim.messages, sim.termination_reason, nl_judge)
    reward_dict = reward.to_dict() if reward is not None else None
    (run_dir / "simulation.json").write_text(dumps_text({**sim.to_dict(), "reward_info": reward_dict}, indent=2,
                                                        default=str), encoding="utf-8")
    if reward_dict is not None:
        (run_dir / "reward.json").write_text(dumps_text(reward_dict, indent=2, default=str), encoding="utf-8")
    _trajectory(run_dir, domain, task, trial, config, sim, reward_dict)
    return sim, reward, None


def outcome_fields(sim: Simulation | None, reward, failure: str | None) -> dict[str, Any]:
    """A results line's outcome: τ²'s fields plus awm's (label, reward, has_verdict, status)."""
    if sim is None:
        return {"status": "error", "error": failure, "error_kind": "environment_error", "label": None,
                "reward": None, "has_verdict": False, "stop_reason": None, "termination_reason": None}
    out = {"termination_reason": sim.termination_reason, "stop_reason": sim.termination_reason,
           "messages": sim.messages, "step_count": sim.step_count, "num_errors": sim.num_errors,
           "seed": sim.seed, "usage": sim.usage, "start_time": sim.start_time, "end_time": sim.end_time,
           "duration": sim.duration}
    if sim.termination_reason == INFRASTRUCTURE_ERROR:
        out.update(status="error", error=sim.error, error_kind=sim.error_kind or "internal_error", label=None,
                   reward=None, has_verdict=False, reward_info=None)
        return out
    info = reward.to_dict()
    has_verdict = reward.reward is not None
    label = ("complete" if abs(reward.reward - 1.0) <= 1e-6 else "incomplete") if has_verdict else "judge_error"
    out.update(status="ok", error=None, error_kind=None, reward=reward.reward, has_verdict=has_verdict, label=label,
               reward_info=info, reward_breakdown=info["reward_breakdown"],
               db_match=(info.get("db_check") or {}).get("db_match"))
    return out


def _summaries(index: ResultsIndex) -> list[dict[str, Any]]:
    out = []
    for s in index.summaries():
        out.append({**s, "domain": domain_of_key(s.get("scenario")) or s.get("scenario"),
                    "termination_reason": s.get("stop_reason")})
    return out


def tau2_summary(records: list[dict[str, Any]], k: int = 4) -> dict[str, Any]:
    """τ²'s metrics per domain and the paper's columns."""
    domains: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        domains.setdefault(str(r.get("domain")), []).append(r)
    metrics = {d: domain_metrics(rs) for d, rs in sorted(domains.items())}
    return {"domains": metrics, "paper": {d: paper_columns(m, k) for d, m in metrics.items()}}


def columns_from(tau2: dict[str, Any]) -> dict[str, Any]:
    """``awm bench report``'s τ² columns: each domain's pass^1 over its scored simulations, and their mean."""
    columns = {}
    for domain, m in tau2["domains"].items():
        if domain in COLUMN_OF and m.get("avg_reward") is not None:
            columns[COLUMN_OF[domain]] = cell(m["avg_reward"], m["scored"], proportion=True)
    values = [c["value"] for c in columns.values()]
    if values:
        columns["Avg"] = cell(sum(values) / len(values))
    return columns


def write_metadata(out: Path, config: Tau2Config, extra: dict[str, Any] | None = None,
                   index: ResultsIndex | None = None) -> dict[str, Any]:
    index = index or ResultsIndex(out / "results.jsonl")
    index.refresh()
    records = _summaries(index)
    tau2 = tau2_summary(records, max(4, config.k))
    run = [d for d in config.domains if d not in ((extra or {}).get("skipped_domains") or {})]
    notes = [] if set(run) >= set(DOMAINS) else ["τ²-bench: Avg over " + ", ".join(run) + " only"]
    notes += [f"τ²-bench: not run: {why}" for why in ((extra or {}).get("skipped_domains") or {}).values()]
    meta = METADATA.stamp({
        "benchmark": BENCHMARK, "model": config.model, "user_model": config.user_model, "policy": config.policy,
        "k": config.k, "domains": config.domains, "split": config.split, "task_versions": config.task_versions,
        "rollouts": len(records), "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **summarize(records, PASS_THRESHOLD), "tau2": tau2,
        "report_columns": {"benchmark": BENCHMARK, "model": config.model, "columns": columns_from(tau2),
                           "notes": notes}, **(extra or {})})
    tmp = out / (METADATA.file + ".tmp")
    tmp.write_text(dumps_text(meta, indent=2, default=str), encoding="utf-8")
    tmp.replace(out / METADATA.file)
    return meta


def current_metadata(run_dir: Path | str) -> dict[str, Any]:
    """The run's metadata with its metrics recomputed from ``results.jsonl`` (read-only; fresh while it runs)."""
    run_dir = Path(run_dir)
    config = Tau2Config.load(run_dir)
    path = run_dir / METADATA.file
    meta = _recorded_metadata(path) if path.is_file() else {"running": None}
    index = ResultsIndex(run_dir / "results.jsonl")
    index.refresh()
    records = _summaries(index)
    tau2 = tau2_summary(records, max(4, config.k))
    full = [index.record(rid) for rid in index.order]
    for domain, m in tau2["domains"].items():  # the DB match rate needs the full lines
        db = [r.get("db_match") for r in full if str(r.get("domain")) == domain and isinstance(r.get("db_match"), bool)]
        m["db_match_rate"] = sum(db) / len(db) if db else None
    return {**meta, "benchmark": BENCHMARK, "model": config.model, "user_model": config.user_model,
            "k": config.k, "domains": config.domains, "split": config.split, "rollouts": len(records),
            **summarize(records, PASS_THRESHOLD), "tau2": tau2,
            "report_columns": {"benchmark": BENCHMARK, "model": config.model, "columns": columns_from(tau2),
                               "notes": _recorded_notes(meta)}}


def _recorded_metadata(path: Path) -> dict[str, Any]:
    """``metadata.json`` as recorded, or {} when it is not JSON or not an object (everything in it is recomputed
    from ``results.jsonl``; a newer format still says so)."""
    try:
        meta = METADATA.read(path)
    except RunFormatError:
        raise
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _recorded_notes(meta: dict[str, Any]) -> list[str]:
    columns = meta.get("report_columns")
    notes = columns.get("notes") if isinstance(columns, dict) else None
    return [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []


def report_columns(run_dir: Path | str) -> dict[str, Any]:
    """``awm bench report``'s interface (``awm_engine.bench.report``)."""
    meta = current_metadata(run_dir)
    result = dict(meta["report_columns"])
    if meta.get("running"):
        result["notes"] = [*result.get("notes", []), "τ²-bench: still running"]
    return result


async def run_tau2(config: Tau2Config, out: Path | str, agent: Endpoint | None, user: Endpoint | None = None,
                   judge: Endpoint | None = None, resume: bool = False,
                   on_progress: Callable[[Progress, dict | None], None] | None = None,
                   policies: tuple[Callable[[int], Any], Callable[[int], Any]] | None = None) -> dict[str, Any]:
    """Run (or resume) ``config`` into ``out``; returns the final metadata. ``policies`` = (agent, user) factories
    by trial replace the endpoints (tests, people)."""
    out = Path(out).resolve()
    skipped: dict[str, str] = {}
    data, chosen = preflight(config, skipped)
    if policies is None and agent is None:
        raise PolicyError("a τ²-bench run needs the agent's model endpoint", "config")
    config = replace(config, task_versions={d: (data.domain(d).version.name if data.domain(d).version else "unknown")
                                            for d in chosen})
    run = Tau2Run(config, out, data, chosen, agent, user or agent, judge, policies, skipped)
    return await run_items(run, out, config.to_dict(), resume, on_progress)


class Tau2Run(Adapter):
    """The shared loop's adapter: one item per (domain, task, trial), trial by trial."""

    def __init__(self, config: Tau2Config, out: Path, data: Tau2Data, chosen: dict[str, list[Task]],
                 agent: Endpoint | None, user: Endpoint | None, judge: Endpoint | None,
                 policies: tuple[Callable[[int], Any], Callable[[int], Any]] | None, skipped: dict[str, str]):
        self.config, self.out, self.data, self.chosen = config, out, data, chosen
        self.agent, self.user, self.judge, self.policies = agent, user, judge, policies
        self.concurrency = config.concurrency
        self.facts = {"sandbox": protections().to_dict(), "skipped_domains": dict(skipped or {})}
        self.owned: list[Any] = []

    def items(self) -> list[tuple[str, Task, int]]:
        return [(d, t, trial) for d, tasks in self.chosen.items() for trial in range(self.config.k) for t in tasks]

    def item_id(self, item: tuple[str, Task, int]) -> str:
        return rollout_id(domain_key(item[0]), item[1].id, item[2])

    async def start(self) -> None:
        config = self.config
        self.seeds = trial_seeds(config.seed, config.k)
        self.scenarios = {d: DomainScenario(self.data, d, config.split) for d in self.chosen}

        def llm(endpoint: Endpoint, seed: int) -> LLMPolicy:
            policy = LLMPolicy(endpoint)
            policy.request_extras = {"seed": seed}
            self.owned.append(policy)
            return policy

        if self.policies is not None:
            self.agents = {t: self.policies[0](t) for t in range(config.k)}
            self.users = {t: self.policies[1](t) for t in range(config.k)}
        else:
            self.agents = {t: llm(self.agent, self.seeds[t]) for t in range(config.k)}
            self.users = {t: llm(self.user, self.seeds[t]) for t in range(config.k)}
        self.nl_judge = make_nl_judge(self.judge) if self.judge is not None else None
        if self.nl_judge is not None:
            self.owned.append(self.nl_judge.policy)
        self.pool = make_pool(config)
        await self.pool.start()

    async def close(self) -> None:
        for policy in self.owned:
            await policy.aclose()
        await self.pool.close()

    def _record(self, domain: str, task: Task, trial: int) -> tuple[dict[str, Any], Path]:
        record = simulation_record(domain, task, trial, self.config)
        run_dir = self.out / "rollouts" / domain / task_dir_name(task.id, trial)
        record.update(run_dir=str(run_dir), initial_db=str(run_dir / "initial.db"), final_db=str(run_dir / "final.db"))
        return record, run_dir

    async def run_one(self, item: tuple[str, Task, int]) -> dict[str, Any]:
        domain, task, trial = item
        record, run_dir = self._record(domain, task, trial)
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        sim, reward, failure = await run_simulation(self.scenarios[domain], task, trial, self.seeds[trial], self.pool,
                                                    self.agents[trial], self.users[trial], self.config, run_dir,
                                                    self.nl_judge)
        record.update(outcome_fields(sim, reward, failure))
        record["timing"] = {"total_s": time.perf_counter() - started}
        return record

    def error_record(self, item: tuple[str, Task, int], error: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
        record, _ = self._record(*item)
        record.update(status="error", error=error["error"], error_kind=error["error_kind"], label=None, reward=None,
                      has_verdict=False, stop_reason=None, traceback=error["traceback"])
        record["timing"] = {"total_s": elapsed_s}
        return record

    def metadata(self, progress: Progress, index: ResultsIndex, running: bool) -> dict[str, Any]:
        extra = {"running": True} if running else {"running": False, "complete": progress.done == progress.total,
                                                   "elapsed_s": time.time() - progress.started}
        return write_metadata(self.out, self.config, {**extra, **self.facts}, index)
