"""``awm bench mcp-universe run | score``: MCP-Universe tasks through awm's rollout engine, into a run directory.

The run directory has the formats of ``awm eval run`` (``awm_engine.data.run_formats``): ``config.json``
(``McpuConfig``, ``"benchmark": "mcp-universe"``), ``results.jsonl`` (one fsync'd line per task, via
``eval.results.ResultsWriter``), ``metadata.json`` (success rates, rewritten as the run goes), one writer at a
time, resume (errored and torn lines dropped, only what is missing is run; the loop is ``eval.runner``'s,
``McpuRun`` this benchmark's adapter), and one rollout directory per task under ``rollouts/<folder>/<task>/``
(``events.jsonl``, ``trajectory.json``, the servers' logs).

Two agent modes, both through ``agent.rollout.Rollout`` over a ``McpServersEpisode``:

- ``function_call``: native OpenAI tool calls; every server's tools named ``server__tool`` with their MCP input
  schemas; the final answer is the assistant's reply without a call.
- ``react``: text tool calls, one per step (awm's meta protocol: ``call_tool`` with ``tool_name`` and JSON
  ``arguments``), the tool descriptions in the system prompt, a thought before each action.

In both, the model is asked to finish with ``{"thought": …, "answer": …}``; the ``answer`` (JSON-encoded when it is
an object or a list) is what the evaluators read, else the reply as it is.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.meta_protocol import robust_json
from awm_engine.agent.policies import LLMPolicy, PolicyError
from awm_engine.agent.rollout import AgentConfig, Rollout
from awm_engine.bench.mcp_universe import official, scores, tasks
from awm_engine.bench.mcp_universe.episode import McpServersEpisode
from awm_engine.bench.mcp_universe.servers import ServerDef
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.run_formats import CONFIG, METADATA, RunFormatError
from awm_engine.eval.results import ResultsIndex, ResultsWriter, read_records
from awm_engine.eval.runner import Adapter, internal_error, locked, run_items
from awm_engine.eval.runner import Progress as EvalProgress
from awm_engine.runtime.episode import EnvLoadError
from awm_engine.sandbox.host import protections

BENCHMARK = "mcp-universe"
MODES = ("function_call", "react")
DEFAULT_MAX_STEPS = 20
SIMULATION_NOTE = ("offline simulation against stand-in MCP servers with fixed data: not comparable with the "
                   "paper, the leaderboard or AWM")

FORMAT_TEXT = ("Give your final answer as JSON in exactly this shape (valid JSON only, no code fences, no text "
               "around it):\n{format}")
FINISH_TEXT = ('When you are done, reply without any tool call with a JSON object {{"thought": "...", "answer": ...}} '
               "whose answer is your final answer.")


def user_prompt(task: tasks.Task) -> str:
    """The question, then the required answer format (MCP-Universe's structure, our own words)."""
    text = task.question
    if task.output_format is not None:
        text += "\n\n" + FORMAT_TEXT.format(format=json.dumps(task.output_format, indent=2, ensure_ascii=False))
    return text


def system_prompt(mode: str, tools: list[dict[str, Any]], max_steps: int, instruction: str = "",
                  today: str | None = None) -> str:
    """Today's date, the suite agent's instruction, the step budget, (react) the tools and the call format, and the
    final-answer format."""
    today = today or time.strftime("%Y-%m-%d")
    head = (f"{instruction or 'You are an agent that solves the user task with the tools of MCP servers.'}\n"
            f"Today is {today}. You have at most {max_steps} steps; use one tool per step.")
    if mode == "function_call":
        return head + "\n\n" + FINISH_TEXT.format()
    listing = "\n".join(f"- {t['name']}: {t.get('description') or ''}\n  input schema: "
                        f"{json.dumps(t.get('inputSchema') or {}, ensure_ascii=False)}" for t in tools)
    return (head + "\n\nTools (server__tool):\n" + listing + "\n\nEach step: first write your thought, then call one "
            "tool by writing a JSON object between <tool_call> and </tool_call>:\n<tool_call>\n"
            '{"name": "call_tool", "arguments": {"tool_name": "SERVER__TOOL", "arguments": "{\\"key\\": \\"value\\"}"}}'
            "\n</tool_call>\nThe tool's result comes back in the next message. " + FINISH_TEXT.format())


def final_answer(text: str, output_format: Any = None) -> str:
    """The ``answer`` of a ``{"thought", "answer"}`` reply (objects and lists JSON-encoded), else the reply. A bare
    ``{"answer": …}`` is unwrapped only when the task's own format has no ``answer`` key."""
    stripped = (text or "").strip()
    parsed = None
    if stripped.startswith(("{", "`")):
        try:
            parsed = official.decode_answer(stripped)
        except ValueError:
            parsed = robust_json(stripped)
    own = isinstance(output_format, dict) and "answer" in output_format
    if isinstance(parsed, dict) and "answer" in parsed and ("thought" in parsed or not own):
        answer = parsed["answer"]
        return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
    return text or ""


@dataclass
class McpuConfig:
    mcp_universe: str  # the configs folder of the checkout
    domains: list[str]
    servers_file: str | None = None
    servers: dict[str, Any] = field(default_factory=dict)  # ServerDef.to_dict() per server (no secrets)
    endpoint: dict[str, Any] | None = None  # Endpoint.public() (never the key)
    mode: str = "function_call"
    max_steps: int = DEFAULT_MAX_STEPS
    limit: int | None = None  # the first N tasks of each domain
    task_ids: list[str] | None = None
    concurrency: int = 1  # MCP-Universe runs its tasks one after another
    simulation: bool = False  # stand-in servers: the report says so
    benchmark: str = BENCHMARK
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))

    def to_dict(self) -> dict[str, Any]:
        return CONFIG.stamp(asdict(self))

    @classmethod
    def load(cls, run_dir: Path | str) -> "McpuConfig":
        path = Path(run_dir) / CONFIG.file
        data = CONFIG.read(path)
        if not isinstance(data, dict) or data.get("benchmark") != BENCHMARK:
            raise ValueError(f"{run_dir} is not an MCP-Universe run")
        missing = [k for k in ("mcp_universe", "domains") if k not in data]
        if missing:
            raise ValueError(f"{path}: an MCP-Universe run's configuration without {', '.join(missing)}")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @property
    def model(self) -> str:
        return (self.endpoint or {}).get("model") or "unknown"


def rollout_record(rollout_dir: Path | str) -> dict[str, Any] | None:
    """The results line of an MCP-Universe rollout directory (``<run>/rollouts/<folder>/<task>/``), so that
    opening the rollout shows its task with the verdict; a minimal record when the run's results do not have it;
    None when the directory is not an MCP-Universe rollout."""
    rollout_dir = Path(rollout_dir)
    try:
        awm = json.loads((rollout_dir / "trajectory.json").read_text()).get("awm") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(awm, dict) or awm.get("benchmark") != BENCHMARK:
        return None
    task_id = str(awm.get("mcp_universe_task") or f"{rollout_dir.parent.name}/{rollout_dir.name}")
    results = rollout_dir.parents[2] / "results.jsonl" if len(rollout_dir.parents) > 2 else None
    if results is not None and results.is_file():
        try:
            found = next((r for r in read_records(results) if r.get("id") == task_id), None)
        except (OSError, ValueError):
            found = None
        if found is not None:
            return found
    return {"id": task_id, "scenario": rollout_dir.parent.name, "task_id": rollout_dir.name, "status": "error",
            "error_kind": "not_scored", "error": "the run's results.jsonl has no line for this rollout",
            "stop_reason": awm.get("stop_reason"), "run_dir": str(rollout_dir)}


def is_mcpu_run(run_dir: Path | str) -> bool:
    try:
        return json.loads((Path(run_dir) / CONFIG.file).read_text()).get("benchmark") == BENCHMARK
    except (OSError, ValueError, AttributeError):
        return False


def select(config: McpuConfig, problems: list[str] | None = None) -> list[tasks.Task]:
    """The run's tasks; given a ``problems`` list, tasks and suites that cannot be read are described there and
    left out (else they raise ``TaskError``)."""
    chosen = tasks.load_benchmark(config.mcp_universe, config.domains, problems=problems)
    if config.task_ids:
        wanted = set(config.task_ids)
        chosen = [t for t in chosen if t.id in wanted or t.path.stem in wanted]
    if config.limit is not None:
        per: dict[str, int] = {}
        kept = []
        for t in chosen:
            per[t.suite] = per.get(t.suite, 0) + 1
            if per[t.suite] <= config.limit:
                kept.append(t)
        chosen = kept
    return chosen


def _verdict(record: dict[str, Any]) -> dict[str, Any]:
    verdict = record.get("verdict")
    return verdict if isinstance(verdict, dict) else {}


def task_result(record: dict[str, Any]) -> dict[str, Any]:
    """A results line as ``scores.success_rates`` reads it (a malformed field reads as missing)."""
    status = "error" if record.get("status") == "error" else record.get("label") or "fail"
    if status not in ("pass", "fail", "needs", "error"):
        status = "fail"
    verdict = _verdict(record)
    needs = verdict.get("needs")
    return {"id": str(record.get("id")), "domain": record.get("domain"), "awm_column": record.get("awm_column"),
            "status": status, "needs": [n for n in needs if isinstance(n, str)] if isinstance(needs, list) else [],
            "steps": record.get("steps"), "evaluator_score": verdict.get("evaluator_score")}


def evaluator_verdicts(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every evaluator's verdict of a results line (``func``, ``op``, ``status``, ``reason``, ``needs``)."""
    evaluators = _verdict(record).get("evaluators")
    return [e for e in evaluators if isinstance(e, dict)] if isinstance(evaluators, list) else []


def task_line(record: dict[str, Any]) -> dict[str, Any]:
    """One task of a run as ``report --tasks`` and the TUI's task table show it: its verdict, how many evaluators
    passed, failed or need a service, the services, and why it did not pass (the first failing evaluator, or the
    error)."""
    result = task_result(record)
    verdicts = evaluator_verdicts(record)
    counts = {s: sum(v.get("status") == s for v in verdicts) for s in ("pass", "fail", "needs")}
    if result["status"] == "error":
        why = f"{record.get('error_kind') or 'error'}: {record.get('error') or ''}".strip()
    else:
        failed = next((v for v in verdicts if v.get("status") == "fail"), None)
        why = "" if failed is None else f"{failed.get('func')}" + (f" {failed['op']}" if failed.get("op") else "") \
            + f": {failed.get('reason') or 'failed'}" + (f" ({failed['error']})" if failed.get("error") else "")
    shown = " · ".join(f"{n} {s}" for s, n in counts.items() if n) or "-"
    return {"id": result["id"], "folder": record.get("scenario"), "task": record.get("task_id"),
            "domain": result["domain"], "awm_column": result["awm_column"], "status": result["status"],
            "evaluators": shown, "counts": counts, "needs": result["needs"], "steps": result["steps"],
            "reason": why}


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    results = [task_result(r) for r in records]
    return {"paper": scores.success_rates(results, "paper"), "awm": scores.success_rates(results, "awm")}


def write_metadata(out: Path, config: McpuConfig, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    records = read_records(out / "results.jsonl")
    meta = METADATA.stamp({"benchmark": BENCHMARK, "model": config.model, "mode": config.mode,
                           "simulation": config.simulation, "note": SIMULATION_NOTE if config.simulation else None,
                           "results": len(records), "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           **summarize(records), **(extra or {})})
    tmp = out / (METADATA.file + ".tmp")
    tmp.write_text(dumps_text(meta, indent=2), encoding="utf-8")
    tmp.replace(out / METADATA.file)
    return meta


def current_metadata(run_dir: Path | str) -> dict[str, Any]:
    """The run's metadata recomputed from ``results.jsonl`` (fresh while it runs or after a crash); read-only."""
    run_dir = Path(run_dir)
    config = McpuConfig.load(run_dir)
    path = run_dir / METADATA.file
    try:
        meta = METADATA.read(path) if path.is_file() else {}
    except RunFormatError:
        raise
    except (OSError, ValueError):  # not JSON: everything below is recomputed from results.jsonl anyway
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    records = read_records(run_dir / "results.jsonl")
    return {**meta, "benchmark": BENCHMARK, "model": config.model, "mode": config.mode,
            "simulation": config.simulation, "note": SIMULATION_NOTE if config.simulation else None,
            "results": len(records), **summarize(records)}


@dataclass
class Progress(EvalProgress):
    """``awm eval run``'s progress, plus tasks passed and tasks whose evaluators need a service (``errors``,
    ``scored``, ``passed`` and ``needs`` count this run's tasks, not those a resumed run kept)."""

    passed: int = 0
    needs: int = 0


def _base_record(task: tasks.Task) -> dict[str, Any]:
    return {"id": task.id, "scenario": task.folder, "task_id": task.path.stem, "sample": 0, "suite": task.suite,
            "domain": task.domain, "awm_column": task.awm_column, "servers": task.mcp_servers}


def evaluator_facts(services: official.Services | None) -> dict[str, Any]:
    """What scored the run: the official package, the judge model actually asked (the official one is gpt-4.1),
    the services that had a stand-in behind them."""
    return {"package": f"mcpuniverse=={official.MCPUNIVERSE_VERSION}", **(services or official.NO_SERVICES).describe()}


def verdict_fields(task: tasks.Task, answer: str, services: official.Services | None) -> dict[str, Any]:
    """The official evaluators' verdict on one final answer (call from a thread, not from the event loop: the
    official judge is synchronous)."""
    verdict = official.evaluate_task(task.evaluators, answer, services, task.env)
    return {"label": verdict.status, "has_verdict": verdict.status != "needs",
            "reward": {"pass": 1.0, "fail": 0.0}.get(verdict.status), "verdict": verdict.to_dict()}


async def run_task(task: tasks.Task, config: McpuConfig, servers: dict[str, ServerDef], endpoint: Endpoint,
                   out: Path, services: official.Services | None = None, policy=None) -> dict[str, Any]:
    record = _base_record(task)
    run_dir = out / "rollouts" / task.folder / task.path.stem
    missing = [s for s in task.mcp_servers if s not in servers]
    if missing:
        return {**record, "status": "error", "error_kind": "environment_error",
                "error": f"no definition for server(s) {', '.join(missing)} in the servers file"}
    episode = None
    own_policy = policy is None
    policy = policy or LLMPolicy(endpoint)
    try:
        episode = await McpServersEpisode.start([servers[s] for s in task.mcp_servers], run_dir)
        mode = "native" if config.mode == "function_call" else "meta"
        agent = AgentConfig(mode=mode, protocol="robust", max_turns=config.max_steps,
                            system_prompt=system_prompt(config.mode, episode.list_tools(), config.max_steps,
                                                      task.instruction),
                            tool_name_style="plain", episode_timeout=None)
        rollout = Rollout(episode, task.folder, task.path.stem, user_prompt(task), policy, agent,
                          meta={"model": config.model, "api_url": (config.endpoint or {}).get("base_url", ""),
                                "benchmark": BENCHMARK, "mcp_universe_task": task.id})
        finished = await rollout.run()
    except EnvLoadError as exc:
        return {**record, "status": "error", "error_kind": "environment_error", "error": str(exc)}
    except PolicyError as exc:
        return {**record, "status": "error", "error_kind": "llm_error", "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - one task's failure must not end the run
        return {**record, **internal_error(exc)}
    finally:
        if episode is not None:
            await episode.close()
        if own_policy:
            await policy.aclose()
    answer = final_answer(finished.final_answer, task.output_format)
    if finished.stop_reason == "llm_error":
        return {**record, "status": "error", "error_kind": "llm_error", "error": finished.error,
                "run_dir": str(run_dir)}
    fields = await asyncio.to_thread(verdict_fields, task, answer, services)
    return {**record, "status": "ok", "stop_reason": finished.stop_reason, "final_answer": answer,
            "raw_final": finished.final_answer, "steps": finished.iterations, "tool_calls": finished.tool_calls,
            "usage": finished.usage, "run_dir": str(run_dir), **fields}


async def run_mcpu(config: McpuConfig, out: Path | str, endpoint: Endpoint, servers: dict[str, ServerDef],
                   resume: bool = False, services: official.Services | None = None,
                   on_progress: Callable[[Progress, dict | None], None] | None = None) -> dict[str, Any]:
    """Run (or resume) ``config`` into ``out``; returns the final metadata."""
    official.require()  # before any rollout: a run that cannot be scored is not started
    out = Path(out).resolve()
    problems: list[str] = []
    chosen = select(config, problems)
    if not chosen:
        raise ValueError("no tasks selected" + (f" ({len(problems)} could not be read: {problems[0]})"
                                                if problems else ""))
    run = McpuRun(config, out, endpoint, servers, services, chosen, problems)
    return await run_items(run, out, config.to_dict(), resume, on_progress)


class McpuRun(Adapter):
    """The shared loop's adapter: one item per task; the metadata rewritten after every task."""

    metadata_every = 0
    metadata_at_start = True
    progress_type = Progress

    def __init__(self, config: McpuConfig, out: Path, endpoint: Endpoint, servers: dict[str, ServerDef],
                 services: official.Services | None, chosen: list[tasks.Task], problems: list[str]):
        self.config, self.out, self.endpoint, self.servers, self.services = config, out, endpoint, servers, services
        self.chosen, self.concurrency = chosen, config.concurrency
        self.facts = {"sandbox": protections().to_dict(), "expected": len(chosen), "task_problems": problems,
                      "evaluator": evaluator_facts(services)}

    def items(self) -> list[tasks.Task]:
        return self.chosen

    def item_id(self, item: tasks.Task) -> str:
        return item.id

    async def run_one(self, item: tasks.Task) -> dict[str, Any]:
        return await run_task(item, self.config, self.servers, self.endpoint, self.out, self.services)

    def error_record(self, item: tasks.Task, error: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
        return {**_base_record(item), **error}

    def tally(self, progress: Progress, record: dict[str, Any], resumed: bool) -> None:
        if resumed:  # the counts are of this run's tasks
            return
        if record["status"] == "error":
            progress.errors += 1
        elif record.get("label") == "needs":
            progress.needs += 1
        else:
            progress.scored += 1
            progress.passed += record.get("label") == "pass"

    def metadata(self, progress: Progress, index: ResultsIndex, running: bool) -> dict[str, Any]:
        return write_metadata(self.out, self.config, {**self.facts, "running": running})


def rescore(run_dir: Path | str, services: official.Services | None = None) -> dict[str, Any]:
    """Evaluate every stored final answer again (e.g. with a judge now), rewriting results and metadata."""
    official.require()
    run_dir = Path(run_dir).resolve()
    config = McpuConfig.load(run_dir)
    index = tasks.task_index(config.mcp_universe, problems=[])  # a task that no longer loads keeps its verdict
    with locked(run_dir):
        records = read_records(run_dir / "results.jsonl")
        tmp = run_dir / "results.jsonl.rescore"
        tmp.unlink(missing_ok=True)
        writer = ResultsWriter(tmp)
        for r in records:
            task = index.get(r["id"])
            if r.get("status") == "ok" and task is not None:
                r = {**r, **verdict_fields(task, r.get("final_answer") or "", services)}
            writer.write(r)
        writer.close()
        tmp.replace(run_dir / "results.jsonl")
        return write_metadata(run_dir, config, {"rescored": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                                "evaluator": evaluator_facts(services)})


def score_answers(root: Path | str, answers: dict[str, str], services: official.Services | None = None
                  ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Verdicts for ``{task id or file stem: final answer}`` (no run needed) and their success rates, with
    ``problems``: answers for unknown tasks and task files that cannot be read (left out). An answer that is not
    a string is read JSON-encoded, as a run's object answers are."""
    official.require()
    if not isinstance(answers, dict):
        raise tasks.TaskError(f"the answers are a {type(answers).__name__}, not an object "
                              '{"<task id or file stem>": "<answer>"}')
    problems: list[str] = []
    index = tasks.task_index(root, problems=problems)
    by_stem = {t.path.stem: t for t in index.values()}
    rows = []
    for key, answer in answers.items():
        task = index.get(key) or by_stem.get(key)
        if task is None:
            problems.append(f"answer for {key!r}: no such task; left out")
            continue
        if not isinstance(answer, str):
            answer = json.dumps(answer, ensure_ascii=False)
        rows.append({**_base_record(task), "status": "ok", "final_answer": answer,
                     **verdict_fields(task, answer, services)})
    return rows, {**summarize(rows), "problems": problems, "evaluator": evaluator_facts(services)}


def make_judge(endpoint: Endpoint) -> official.Services:
    """The official LLM judge (MCP-Universe's prompt and reply parsing) asking ``endpoint``'s model instead of
    gpt-4.1."""
    return official.Services(judge=endpoint)
