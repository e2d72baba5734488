"""``awm bench tau2 score`` side by side with τ²-bench's own evaluator, on the same simulations, in one run.

    .venv/bin/python benchmarks/tau2_scoring.py --official-src DIR --official-venv DIR
        [--tau2-data DIR] [--domain retail telecom] [--tasks N] [--rounds 1] [--out DIR]

**The baseline is built by you** from a tau2-bench checkout (it is not on PyPI — ``pip install tau2`` is an
unrelated package — and none of it is part of this project). The recommended commit is ``0ed2fd8``
(``0ed2fd8d830a20657d89ae9c2efcc94838aa7129``, v0.2.1-dev: the evaluator, environment and domain code that
amazon-agi/tau2-bench-verified forked, i.e. the 0.2.x semantics awm scores with — strict replay of every
recorded tool call, the DB check, assertions, ACTION, COMMUNICATE)::

    git clone https://github.com/sierra-research/tau2-bench ~/tau2-bench
    git -C ~/tau2-bench checkout 0ed2fd8d830a20657d89ae9c2efcc94838aa7129
    python3 -m venv ~/tau2-official-venv
    ~/tau2-official-venv/bin/pip install pydantic loguru addict deepdiff python-dotenv toml PyYAML docstring-parser

then ``--official-src ~/tau2-bench/src --official-venv ~/tau2-official-venv``. That venv holds only what the
evaluator's modules import; the driver below stands in for the few modules that would pull in the rest of the
package (``tau2.registry`` — the real one imports every agent and user simulator, hence litellm — maps
``retail`` and ``telecom`` to their ``get_environment`` as the registry does; the NL-assertion evaluator, never
called here, since no task of these files has ``NL_ASSERTION`` in its basis; ``pandas``, used only by
``Results.to_df``; ``tau2.config`` only when the source has none).

1. **Simulations.** One results file per domain in τ²'s shape (``{"info", "tasks", "simulations"}``, the tasks
   of the data directory's ``tasks.json``), made with awm's gold replay from the base split: per task the gold
   conversation (the gold actions called in order, each tool message what the call returned, ended by the
   user's stop), the same actions agent-first then user, no action at all, the last write dropped, the last
   write done twice, the gold conversation ended by ``max_steps``, and, where the task asks for information to
   be communicated, the gold conversation with an agent message saying it (``agent_stop``). The official 0.2.x
   replay re-executes *every* recorded call and raises on any output that differs, so these files also check
   awm's tool outputs, errors included, against the official code.
2. **The official evaluator**: a driver run by ``--official-venv``'s Python that loads each file with τ²'s
   ``Results`` model and calls ``evaluate_simulation(…, EvaluationType.ALL, solo_mode=False, domain)`` for
   every simulation (as ``tau2 run`` does after each one); an exception is recorded for that simulation.
3. **awm**: ``awm bench tau2 score FILE --tau2-data DIR --json``.

Each domain file is scored by both, interleaved (official then awm, the order swapped every other time, ``--rounds``
times), each timed from process start to exit (wall, user and system time of the process and its children).
Then every simulation's reward and components are compared: the reward, the breakdown per basis component, the
DB match, and each assertion, gold action and communicate check. Prints both times, the ratio and the machine.

Re-scoring executes nothing from the file: tool and task function names resolve only to methods of awm's own
domain toolkits, in the awm process, as for ``awm bench tau2 score``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awm_engine.bench.tau2.data import Tau2Data  # noqa: E402
from awm_engine.bench.tau2.evaluation import gold_messages  # noqa: E402
from benchmarks._sidebyside import fmt, machine, timed  # noqa: E402

DOMAINS = ("retail", "telecom")
RECOMMENDED_COMMIT = "0ed2fd8d830a20657d89ae9c2efcc94838aa7129"

# argv: the tau2 source directory (holding tau2/), the output JSON, the results files
OFFICIAL_DRIVER = r'''
import json, sys, types
from pathlib import Path
src, out, files = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
sys.path.insert(0, str(src))
try:
    import pandas  # noqa: F401
except ImportError:  # Results.to_df only
    sys.modules["pandas"] = types.ModuleType("pandas")
    sys.modules["pandas"].DataFrame = object
if not (src / "tau2" / "config.py").is_file():  # the run defaults simulation.py imports
    config = types.ModuleType("tau2.config")
    for name in ("DEFAULT_LLM_AGENT", "DEFAULT_LLM_USER", "DEFAULT_SAVE_TO"):
        setattr(config, name, None)
    config.DEFAULT_LOG_LEVEL = "ERROR"
    config.DEFAULT_LLM_ARGS_AGENT, config.DEFAULT_LLM_ARGS_USER = {}, {}
    config.DEFAULT_MAX_CONCURRENCY, config.DEFAULT_MAX_ERRORS, config.DEFAULT_MAX_STEPS = 1, 10, 200
    config.DEFAULT_NUM_TRIALS, config.DEFAULT_SEED = 1, 300
    sys.modules["tau2.config"] = config
nl = types.ModuleType("tau2.evaluator.evaluator_nl_assertions")  # needs an LLM; never called for these bases


class NLAssertionsEvaluator:
    @classmethod
    def calculate_reward(cls, **kwargs):
        raise RuntimeError("NL assertions need an LLM judge; not part of this baseline")


nl.NLAssertionsEvaluator = NLAssertionsEvaluator
sys.modules["tau2.evaluator.evaluator_nl_assertions"] = nl


class Registry:  # the registry's mapping for the two domains (the real module imports every agent)
    def get_env_constructor(self, domain):
        if domain == "retail":
            from tau2.domains.retail.environment import get_environment
            return get_environment
        if domain == "telecom":
            from tau2.domains.telecom.environment import get_environment_manual_policy
            return get_environment_manual_policy
        raise KeyError(domain)


registry = types.ModuleType("tau2.registry")
registry.registry = Registry()
sys.modules["tau2.registry"] = registry
from loguru import logger
logger.remove()
logger.add(sys.stderr, level="ERROR")  # tau2 run's default log level
from tau2.data_model.simulation import Results
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation


def name(key):
    return getattr(key, "value", key)


rows = []
for path in files:
    results = Results.load(Path(path))
    domain = results.info.environment_info.domain_name
    tasks = {task.id: task for task in results.tasks}
    for sim in results.simulations:
        row = {"id": sim.id}
        try:
            info = evaluate_simulation(simulation=sim, task=tasks[sim.task_id], evaluation_type=EvaluationType.ALL,
                                       solo_mode=False, domain=domain)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
        else:
            row.update(reward=info.reward,
                       reward_breakdown={name(k): v for k, v in (info.reward_breakdown or {}).items()},
                       db_match=info.db_check.db_match if info.db_check else None,
                       checks={"env_assertions": [c.met for c in info.env_assertions or []],
                               "actions": [c.action_match for c in info.action_checks or []],
                               "communicate": [c.met for c in info.communicate_checks or []]})
        rows.append(row)
out.write_text(json.dumps(rows))
'''

WRITES = ("cancel", "modify", "exchange", "return", "refuel", "toggle", "enable", "disable", "reset", "reboot",
          "suspend", "resume", "send", "set", "grant", "connect", "disconnect", "reseat", "make")


# -- simulations ----------------------------------------------------------------------------------------

def variants(task) -> list[tuple[str, list, str, str | None]]:
    """(kind, actions, termination reason, agent text to add) for one task."""
    acts = list(task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
    out = [("gold", acts, "user_stop", None)]
    ordered = [a for a in acts if a.requestor == "assistant"] + [a for a in acts if a.requestor == "user"]
    if ordered != acts:
        out.append(("agent_first", ordered, "user_stop", None))
    out.append(("nothing", [], "user_stop", None))
    writes = [i for i, a in enumerate(acts) if a.name.startswith(WRITES)]
    if writes:
        out.append(("drop_last_write", acts[:writes[-1]] + acts[writes[-1] + 1:], "user_stop", None))
        out.append(("repeat_last_write", acts + [acts[writes[-1]]], "user_stop", None))
    out.append(("max_steps", acts, "max_steps", None))
    info = task.evaluation_criteria.communicate_info if task.evaluation_criteria else None
    if info:
        out.append(("said", acts, "agent_stop", "To sum up: " + "; ".join(info)))
    return out


def make_results(out: Path, data: Tau2Data, domains: list[str], tasks: int | None) -> dict[str, Path]:
    """One τ² results file per domain; returns {domain: path}."""
    files = {}
    for domain in domains:
        d = data.domain(domain)
        chosen = d.split_tasks("base")[:tasks]
        simulations = []
        for task in chosen:
            for kind, actions, reason, said in variants(task):
                messages = gold_messages(d, task, actions)
                if said:
                    messages.insert(-1, {"role": "assistant", "content": said})
                for i, message in enumerate(messages):
                    if message["role"] != "tool":
                        message.setdefault("tool_calls", None)
                    message["turn_idx"] = i
                simulations.append({"id": f"{task.id}::{kind}", "task_id": task.id, "trial": 0, "seed": 0,
                                    "start_time": "2025-01-01T00:00:00", "end_time": "2025-01-01T00:00:01",
                                    "duration": 1.0, "termination_reason": reason, "messages": messages})
        ids = {task.id for task in chosen}
        raw = json.loads((d.dir / "tasks.json").read_text())
        results = {"timestamp": "2025-01-01T00:00:00",
                   "info": {"git_commit": "benchmarks/tau2_scoring.py", "num_trials": 1, "max_steps": 200,
                            "max_errors": 10, "seed": 300,
                            "user_info": {"implementation": "user_simulator", "llm": "none"},
                            "agent_info": {"implementation": "llm_agent", "llm": "none"},
                            "environment_info": {"domain_name": domain, "policy": "(not needed to score)"}},
                   "tasks": [t for t in raw if isinstance(t, dict) and t.get("id") in ids],
                   "simulations": simulations}
        files[domain] = out / f"{domain}_results.json"
        files[domain].write_text(json.dumps(results))
    return files


# -- comparison -----------------------------------------------------------------------------------------

def outcome(row: dict[str, Any]) -> dict[str, Any]:
    if row.get("error"):
        return {"error": " ".join(row["error"].split())[:400]}
    return {"reward": row.get("reward"), "reward_breakdown": row.get("reward_breakdown") or {},
            "db_match": row.get("db_match"), "checks": row.get("checks")}


def compare(official: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The simulations whose outcome differs (a missing row on either side counts)."""
    theirs = {r["id"]: outcome(r) for r in official}
    mine = {r["id"]: outcome(r) for r in ours}
    return [{"id": i, "official": theirs.get(i), "awm": mine.get(i)}
            for i in sorted(set(theirs) | set(mine)) if theirs.get(i) != mine.get(i)]


def official_source(src: Path) -> Path:
    if not (src / "tau2" / "evaluator" / "evaluator.py").is_file():
        sys.exit(f"--official-src {src}: no tau2/evaluator/evaluator.py there; give the src/ directory of a "
                 f"tau2-bench checkout (recommended commit {RECOMMENDED_COMMIT}; see this script's docstring)")
    return src


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="How to build the baseline: see the docstring of this script.")
    parser.add_argument("--official-src", required=True, metavar="DIR",
                        help=f"the src/ directory of a tau2-bench checkout (recommended commit {RECOMMENDED_COMMIT[:7]})")
    parser.add_argument("--official-venv", required=True, metavar="DIR",
                        help="a venv with the packages its evaluator imports (see the docstring)")
    default_data = os.environ.get("AWM_TAU2_DATA") or str(ROOT.parent / "shared" / "data" / "tau2")
    parser.add_argument("--tau2-data", default=default_data, metavar="DIR",
                        help="τ²-bench's data/tau2 (default: AWM_TAU2_DATA, else ../shared/data/tau2)")
    parser.add_argument("--domain", nargs="+", choices=DOMAINS, default=list(DOMAINS))
    parser.add_argument("--tasks", type=int, default=None, help="only the first N base tasks of each domain")
    parser.add_argument("--rounds", type=int, default=1, help="score every file this many times on each side")
    parser.add_argument("--out", default=None, help="working directory (default: a new temporary one)")
    args = parser.parse_args()

    src = official_source(Path(args.official_src).resolve())
    python = Path(args.official_venv) / "bin" / "python"
    if not python.is_file():
        sys.exit(f"--official-venv {args.official_venv}: no bin/python there")
    data_dir = Path(args.tau2_data).resolve()
    if not (data_dir / "domains").is_dir():
        sys.exit(f"--tau2-data {data_dir}: not a τ²-bench data directory (no domains/)")
    out = Path(args.out or tempfile.mkdtemp(prefix="awm_tau2_scoring_"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"working directory: {out}", file=sys.stderr)

    files = make_results(out, Tau2Data(data_dir), args.domain, args.tasks)
    counts = {d: len(json.loads(p.read_text())["simulations"]) for d, p in files.items()}
    print("simulations: " + ", ".join(f"{d} {n}" for d, n in counts.items()), file=sys.stderr)

    official_data = out / "official-data"  # tau2 reads <TAU2_DATA_DIR>/tau2/domains/...
    official_data.mkdir(exist_ok=True)
    if not (official_data / "tau2").exists():
        (official_data / "tau2").symlink_to(data_dir, target_is_directory=True)
    driver = out / "official_driver.py"
    driver.write_text(OFFICIAL_DRIVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TAU2_", "AWM_TAU2"))}
    official_env = {**env, "TAU2_DATA_DIR": str(official_data)}
    awm = str(ROOT / ".venv" / "bin" / "awm")

    times: dict[str, dict[str, list[dict[str, float]]]] = {"official": {}, "awm": {}}
    results: dict[str, dict[str, list]] = {"official": {}, "awm": {}}
    turn = 0
    for round_ in range(args.rounds):
        for domain, path in files.items():
            sides = ["official", "awm"] if turn % 2 == 0 else ["awm", "official"]
            turn += 1
            for side in sides:
                target = out / f"{side}_{domain}_{round_}.json"
                if side == "official":
                    t = timed([str(python), str(driver), str(src), str(target), str(path)], official_env, None)
                else:
                    with open(target, "w") as fh:
                        t = timed([awm, "bench", "tau2", "score", str(path), "--tau2-data", str(data_dir), "--json"],
                                  env, fh)
                times[side].setdefault(domain, []).append(t)
                rows = json.loads(target.read_text())
                results[side][domain] = rows if side == "official" else rows["simulations"]
                print(f"round {round_ + 1} {domain} {side}: {fmt(t)}", file=sys.stderr)

    def total(side: str) -> dict[str, float]:
        runs = [t for per in times[side].values() for t in per]
        return {k: sum(t[k] for t in runs) for k in ("wall_s", "user_s", "sys_s")}

    official, ours = total("official"), total("awm")
    differ = [d for domain in files for d in compare(results["official"][domain], results["awm"][domain])]
    simulations = sum(counts.values())
    report = {"simulations": counts, "rounds": args.rounds, "official_src": str(src), "official": official,
              "awm": ours, "ratio": ours["wall_s"] / official["wall_s"],
              "cpu_ratio": (ours["user_s"] + ours["sys_s"]) / (official["user_s"] + official["sys_s"]),
              "per_domain": {d: {"official": times["official"][d], "awm": times["awm"][d],
                                 "ratio": sum(t["wall_s"] for t in times["awm"][d])
                                 / sum(t["wall_s"] for t in times["official"][d])} for d in files},
              "compared": simulations, "equal": simulations - len(differ), "differences": differ,
              "machine": machine()}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    for d in differ[:10]:
        print(f"differs: {d['id']}\n  official: {d['official']}\n  awm:      {d['awm']}")
    per_domain = "; ".join(f"{d} {counts[d]}: awm/official {report['per_domain'][d]['ratio']:.2f}" for d in files)
    print(f"\n{simulations} simulations ({per_domain}), {args.rounds} round(s), on {report['machine']}:\n"
          f"official {fmt(official)}, awm {fmt(ours)}; ratio awm/official {report['ratio']:.2f} "
          f"(CPU time {report['cpu_ratio']:.2f}); "
          f"rewards and components equal: {report['equal']} of {simulations}")


if __name__ == "__main__":
    main()
