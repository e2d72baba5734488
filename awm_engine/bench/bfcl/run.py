"""``awm bench bfcl run``: BFCLv3 entries through an awm model endpoint (or the ground-truth policy), scored by
the wheel's checkers in the sandbox, into an awm run directory.

The run directory has the formats of ``awm eval run`` (``awm_engine.data.run_formats``): ``config.json``
(``BfclConfig``, ``"benchmark": "bfcl"``), ``results.jsonl`` (one fsync'd line per entry and sample, written as
each finishes, via ``eval.results.ResultsWriter``), ``metadata.json`` (the scores, rewritten as the run goes),
one writer at a time, and resume (errored and torn lines dropped, only what is missing is run): the loop is
``eval.runner``'s, ``BfclRun`` this benchmark's adapter. At the end the first sample of every entry is also written
in BFCL's own result format under ``bfcl/result/<model>/`` (``bfcl_files``), so BFCL's own runner can score it.

Single-turn entries are one request. Multi-turn entries go turn by turn as BFCL's inference does: the turn's
user message (or, at a miss_func holdout turn, the held-out docs and BFCL's sentence), then steps until the
model's output holds no call (decoded in the sandbox) or 20 steps have run (then the entry is cut short:
``force_terminated``); each step's calls are executed in the sandbox against backends rebuilt from the
entry's initial configuration and the results go back to the model.
"""
from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from awm_engine.agent.endpoints import Endpoint
from awm_engine.agent.policies import LLMPolicy, PolicyError
from awm_engine.bench.bfcl import data, prompting, scores, wheel
from awm_engine.bench.bfcl.bfcl_files import error_type as verdict_error_type
from awm_engine.bench.bfcl.bfcl_files import export_results
from awm_engine.bench.bfcl.categories import CATEGORIES, DATA_NOTE
from awm_engine.bench.bfcl.checker import ENTRY_CHARS, cut_results
from awm_engine.bench.bfcl.ground_truth import GroundTruthPolicy
from awm_engine.bench.bfcl.sandboxed import CheckerError, CheckerHost
from awm_engine.data.jsonl import dumps_text
from awm_engine.data.run_formats import CONFIG, METADATA
from awm_engine.eval.results import ResultsIndex
from awm_engine.eval.runner import Adapter, Progress, run_items  # Progress: mean_reward is the accuracy
from awm_engine.sandbox.host import protections

BENCHMARK = "bfcl"
MAX_STEPS = 20  # BFCL's MAXIMUM_STEP_LIMIT: more executed steps in one turn end the entry
DEFAULT_TEMPERATURE = 0.001  # `bfcl generate`'s default
POLICIES = ("llm", "ground-truth")
DROPPED_VERDICT_KEYS = ("prompt", "model_result_raw", "model_result", "inference_log")


@dataclass
class BfclConfig:
    categories: list[str]
    mode: str = "fc"  # fc | prompt
    policy: str = "llm"  # llm | ground-truth
    endpoint: dict[str, Any] | None = None  # Endpoint.public() and max_retries (never the key)
    limit: int | None = None  # the first N entries of each category
    entries: list[str] | None = None  # these entries only (instead of categories and limit)
    k: int = 1  # samples per entry
    concurrency: int = 8
    max_steps: int = MAX_STEPS
    benchmark: str = BENCHMARK
    bfcl_eval: str = wheel.BFCL_EVAL_VERSION
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))

    def to_dict(self) -> dict[str, Any]:
        return CONFIG.stamp(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path | str = CONFIG.file) -> BfclConfig:
        CONFIG.check(data, path)
        if data.get("benchmark") != BENCHMARK:
            raise ValueError(f"{path} is not a BFCL run")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @classmethod
    def load(cls, run_dir: Path | str) -> BfclConfig:
        path = Path(run_dir) / CONFIG.file
        return cls.from_dict(CONFIG.read(path), path)

    @property
    def model(self) -> str:
        return (self.endpoint or {}).get("model") or self.policy

    def expected(self) -> dict[str, int]:
        """Answers expected per category."""
        return scores.expected_answers(self.categories, self.limit, self.k, self.entries)


def is_bfcl_run(run_dir: Path | str) -> bool:
    try:
        return json.loads((Path(run_dir) / CONFIG.file).read_text()).get("benchmark") == BENCHMARK
    except (OSError, ValueError, AttributeError):
        return False


def result_id(entry_id: str, sample: int) -> str:
    return f"{entry_id}/{sample}"


def _add_usage(total: dict[str, int], usage: dict[str, Any] | None) -> None:
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if isinstance((usage or {}).get(key), int):
            total[key] = total.get(key, 0) + usage[key]


def _trim(verdict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in verdict.items() if k not in DROPPED_VERDICT_KEYS}


def _verdict_fields(verdict: dict[str, Any]) -> dict[str, Any]:
    valid = bool(verdict.get("valid"))
    error_type = verdict_error_type(verdict)
    return {"valid": valid, "label": "correct" if valid else "incorrect", "reward": 1.0 if valid else 0.0,
            "has_verdict": True, "error_type": None if valid else error_type, "stop_reason": error_type,
            "verdict": _trim(verdict)}


async def single_turn(entry: data.Entry, mode: str, policy, host: CheckerHost) -> dict[str, Any]:
    functions = entry.prompt["function"]
    tools = prompting.fc_tools(functions) if mode == "fc" else []
    messages = prompting.first_messages(entry.prompt["question"][0], functions, mode)
    reply = await policy.next_turn(messages, tools, "native" if mode == "fc" else "meta")
    raw = prompting.raw_output(reply, mode)
    try:
        scored = await host.acall("score", entry_id=entry.id, raw=raw, mode=mode)
    except CheckerError as exc:
        if not exc.answered:
            raise
        scored = {"verdict": exc.verdict(entry.id), "decoded": None, "decode_error": str(exc)}
    usage: dict[str, int] = {}
    _add_usage(usage, reply.usage)
    return {"messages": messages + [reply.message()], "functions": functions, "raw": raw,
            "decoded": scored.get("decoded"), "decode_error": scored.get("decode_error"), "usage": usage,
            **_verdict_fields(scored["verdict"])}


async def multi_turn(entry: data.Entry, mode: str, policy, host: CheckerHost, max_steps: int) -> dict[str, Any]:
    functions = copy.deepcopy(entry.prompt["function"])
    holdout = entry.prompt.get("missed_function") or {}
    tools = prompting.fc_tools(functions) if mode == "fc" else []
    messages: list[dict[str, Any]] = []
    raw_turns: list[list[Any]] = []
    turns: list[dict[str, Any]] = []
    previous: list[list[str]] = []  # every executed step's calls so far (replayed before the next step)
    usage: dict[str, int] = {}
    force_quit = False
    broken: CheckerError | None = None  # the checker failed on the model's answer: that is the entry's verdict
    budget = ENTRY_CHARS  # what the entry's call results may still take in memory, the record and the requests
    for index, question in enumerate(entry.prompt["question"]):
        added = []
        if str(index) in holdout:  # miss_func: the held-out docs arrive now
            added = holdout[str(index)]
            functions += added
            if mode == "fc":
                tools = prompting.fc_tools(functions)
            question = [prompting.holdout_message(added, mode)]
        new = prompting.first_messages(question, functions, mode) if index == 0 else copy.deepcopy(question)
        messages += new
        steps: list[dict[str, Any]] = []
        executed = 0
        while True:
            reply = await policy.next_turn(messages, tools, "native" if mode == "fc" else "meta")
            _add_usage(usage, reply.usage)
            raw = prompting.raw_output(reply, mode)
            messages.append(reply.message())
            if mode == "fc" and not reply.tool_calls:
                # a text reply: BFCL's FC decoder raises on text, so the turn ends (no need to ask the sandbox)
                step = {"decoded": None, "decode_error": "no function call"}
            else:
                try:
                    step = await host.acall("execute", entry_id=entry.id, previous=previous, raw=raw, mode=mode)
                except CheckerError as exc:
                    if not exc.answered:
                        raise
                    broken, step = exc, {"decoded": None, "decode_error": str(exc)}
            if step.get("decoded") is not None:
                step["results"], used = cut_results(step.get("results") or [], budget)
                budget -= used
            steps.append({"raw": raw, **step})
            if step.get("decoded") is None:
                break  # no call: the turn is over
            previous.append(step["decoded"])
            messages += prompting.result_messages(reply, mode, step["decoded"], step["results"])
            executed += 1
            if executed > max_steps:
                force_quit = True
                break
        raw_turns.append([s["raw"] for s in steps])
        turns.append({"messages": new, "functions_added": [d["name"] for d in added], "steps": steps})
        if force_quit or broken:
            break
    if broken is None:
        try:
            verdict = (await host.acall("check", entry_id=entry.id, raw=raw_turns, mode=mode))["verdict"]
        except CheckerError as exc:
            if not exc.answered:
                raise
            broken = exc
    if broken is not None:
        verdict = broken.verdict(entry.id)
    outcome = {"messages": messages, "functions": [d["name"] for d in entry.prompt["function"]],
               "held_out": {t: [d["name"] for d in docs] for t, docs in holdout.items()}, "raw": raw_turns,
               "turns": turns, "force_terminated": force_quit, "usage": usage, **_verdict_fields(verdict)}
    note = await _add_states(host, entry, raw_turns, mode, turns) if broken is None else None
    return {**outcome, **({"note": note} if note else {})}


async def _add_states(host: CheckerHost, entry: data.Entry, raw_turns: list, mode: str,
                      turns: list[dict[str, Any]]) -> str | None:
    """The backends' state after each turn next to the ground truth's (for display, a request of its own):
    whatever goes wrong here is a note, never the entry's verdict."""
    try:
        view = await host.acall("states", entry_id=entry.id, raw=raw_turns, mode=mode)
        for turn, state in zip(turns, view.get("states") or []):
            turn["state"] = state
        return view.get("note")
    except Exception as exc:  # noqa: BLE001 - a display view: the official verdict stands
        for turn in turns:
            turn.pop("state", None)
        return f"the backends' states could not be shown ({type(exc).__name__}: {exc}); the official verdict stands"


def _record(entry: data.Entry, sample: int, config: BfclConfig) -> dict[str, Any]:
    cat = entry.category
    return {"id": result_id(entry.id, sample), "entry_id": entry.id, "category": cat.name, "group": cat.group,
            "sample": sample, "scenario": cat.name, "task_id": entry.id, "mode": config.mode, "model": config.model,
            "policy": config.policy, "time": time.time(), "run_dir": None}


def preflight(config: BfclConfig) -> list[data.Entry]:
    """The entries of ``config`` (``BfclMissing`` when the wheel is not installed; ``ValueError`` for bad input)."""
    wheel.require()
    if config.mode not in ("fc", "prompt"):
        raise ValueError(f"unknown mode {config.mode!r} (fc or prompt)")
    if config.policy not in POLICIES:
        raise ValueError(f"unknown policy {config.policy!r} ({', '.join(POLICIES)})")
    unknown = [c for c in config.categories if c not in CATEGORIES]
    if unknown or not config.categories:
        raise ValueError(f"unknown BFCL categories: {unknown or 'none selected'}")
    if config.entries:
        found = data.by_id(config.categories)
        missing = [e for e in config.entries if e not in found]
        if missing:
            raise ValueError(f"no BFCLv3 entries {', '.join(missing)}")
        return [found[e] for e in dict.fromkeys(config.entries)]
    return data.select(config.categories, config.limit)


def write_metadata(out: Path, config: BfclConfig, extra: dict[str, Any] | None = None,
                   index: ResultsIndex | None = None) -> dict[str, Any]:
    index = index or ResultsIndex(out / "results.jsonl")
    index.refresh()
    summary = scores.summarize(list(index.summaries()), config.expected(), config.mode)
    meta = METADATA.stamp({"benchmark": BENCHMARK, "model": config.model, "policy": config.policy,
                           "mode": config.mode, "k": config.k, "bfcl_eval": config.bfcl_eval, "data": DATA_NOTE,
                           "results": len(index), "updated": time.strftime("%Y-%m-%dT%H:%M:%S"), **summary,
                           **(extra or {})})
    tmp = out / (METADATA.file + ".tmp")
    tmp.write_text(dumps_text(meta, indent=2), encoding="utf-8")
    tmp.replace(out / METADATA.file)
    return meta


def current_metadata(run_dir: Path | str) -> dict[str, Any]:
    """The run's metadata with its scores recomputed from ``results.jsonl`` (fresh even while it runs, or
    after a crash); read-only."""
    run_dir = Path(run_dir)
    config = BfclConfig.load(run_dir)
    path = run_dir / METADATA.file
    meta = METADATA.read(path) if path.is_file() else {"running": None}
    index = ResultsIndex(run_dir / "results.jsonl")
    index.refresh()
    summary = scores.summarize(list(index.summaries()), config.expected(), config.mode)
    return {**meta, "benchmark": BENCHMARK, "model": config.model, "policy": config.policy, "mode": config.mode,
            "k": config.k, "bfcl_eval": config.bfcl_eval, "data": DATA_NOTE, "results": len(index), **summary}


async def run_bfcl(config: BfclConfig, out: Path | str, endpoint: Endpoint | None = None, resume: bool = False,
                   on_progress: Callable[[Progress, dict | None], None] | None = None,
                   host: CheckerHost | None = None) -> dict[str, Any]:
    """Run (or resume) ``config`` into ``out``; returns the final metadata."""
    out = Path(out).resolve()
    chosen = preflight(config)
    if config.policy == "llm" and endpoint is None:
        raise PolicyError("an llm run needs a model endpoint", "config")
    return await run_items(BfclRun(config, out, endpoint, chosen, host), out, config.to_dict(), resume, on_progress)


class BfclRun(Adapter):
    """The shared loop's adapter: one item per (entry, sample); scored as each finishes, by the checker host."""

    def __init__(self, config: BfclConfig, out: Path, endpoint: Endpoint | None, chosen: list[data.Entry],
                 host: CheckerHost | None):
        self.config, self.out, self.endpoint, self.chosen, self.host = config, out, endpoint, chosen, host
        self.concurrency, self.own_host, self.shared = config.concurrency, host is None, None
        self.facts = {"sandbox": protections().to_dict()}

    def items(self) -> list[tuple[data.Entry, int]]:
        return [(entry, sample) for entry in self.chosen for sample in range(self.config.k)]

    def item_id(self, item: tuple[data.Entry, int]) -> str:
        return result_id(item[0].id, item[1])

    async def start(self) -> None:
        self.shared = LLMPolicy(self.endpoint) if self.config.policy == "llm" else None
        self.host = self.host or CheckerHost()

    async def close(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()
        if self.own_host:
            self.host.close()

    async def run_one(self, item: tuple[data.Entry, int]) -> dict[str, Any]:
        (entry, sample), config = item, self.config
        record = _record(entry, sample, config)
        started = time.perf_counter()
        policy = self.shared or GroundTruthPolicy(entry, config.mode)
        try:
            if entry.category.kind == "multi_turn":
                outcome = await multi_turn(entry, config.mode, policy, self.host, config.max_steps)
            else:
                outcome = await single_turn(entry, config.mode, policy, self.host)
            record.update(status="ok", error=None, error_kind=None, **outcome)
        except PolicyError as exc:
            record.update(status="error", error=str(exc), error_kind=exc.kind)
        except CheckerError as exc:
            record.update(status="error", error=str(exc), error_kind="checker_error", traceback=exc.traceback)
        return _finished(record, time.perf_counter() - started)

    def error_record(self, item: tuple[data.Entry, int], error: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
        return _finished({**_record(item[0], item[1], self.config), **error}, elapsed_s)

    def metadata(self, progress: Progress, index: ResultsIndex, running: bool) -> dict[str, Any]:
        if running:
            return write_metadata(self.out, self.config, {"running": True, **self.facts})
        exported = export_results(self.out, index)
        return write_metadata(self.out, self.config, {"running": False, "complete": progress.done == progress.total,
                                                      "elapsed_s": time.time() - progress.started,
                                                      "bfcl_result_dir": str(exported), **self.facts}, index)


def _finished(record: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
    if record["status"] == "error":
        record.update(label=None, reward=None, has_verdict=False, valid=None, stop_reason=None)
    record["timing"] = {"total_s": elapsed_s}
    return record
