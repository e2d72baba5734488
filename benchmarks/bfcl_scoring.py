"""``awm bench bfcl score`` side by side with the official BFCL scorer, on the same result files, in one run.

    .venv/bin/python benchmarks/bfcl_scoring.py [--models 10] [--out DIR] [--venv DIR] [--seed 0]

1. **Result files.** No real result set ships with the project, so one is made from the wheel's ground truth:
   ``--models`` model folders (``result/<model>/<group>/BFCL_v4_<category>_result.json``), each answering all
   4,441 BFCLv3 entries — two answer exactly as the ground truth (FC and prompt mode), the others
   (alternately FC and prompt) perturb each entry's answer in one way chosen at random: a wrong value, a
   missing or an unexpected argument, a wrong function name, a dropped or duplicated call, prose instead of a
   call, a wrong type; multi-turn: a call dropped, duplicated, changed, moved a turn early or late, a turn left
   empty, the conversation cut short. About one answer in five is kept as it is.
2. **The official scorer** runs in a venv of its own (``--venv``, default under ``~/.cache/awm/bench``), built
   the way ``make bfcl`` installs BFCL: ``pip install --no-deps bfcl-eval`` plus the packages of pyproject's
   ``bfcl`` extra, at the pins of ``constraints.txt`` — nothing of awm. It is bfcl-eval's own ``runner()`` (the
   loop behind ``bfcl evaluate``: every model folder, every result file, ``evaluate_task`` with the model's
   handler, score files written), driven with the stand-ins any minimal install needs: ``model_config``
   (the real one imports every provider SDK) registers these models with BFCL's OpenAI handler (FC models
   with ``underscore_to_dot``, as the GPT ``-FC`` entries), ``openai`` is a stub (decoding never calls it),
   numpy and pandas are stubs (only the leaderboard CSV, skipped, uses them).
3. **awm**: ``awm bench bfcl score`` over the same files (its sandboxed checker host, a pool of workers).

Both are timed from process start to exit (wall, user and system time of the process and its children),
then every entry's verdict (valid, error type) is compared between the two. Prints both times and the ratio.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awm_engine.bench.bfcl import data, ground_truth, wheel  # noqa: E402
from awm_engine.bench.bfcl.bfcl_files import error_type  # noqa: E402
from awm_engine.bench.bfcl.categories import CATEGORIES  # noqa: E402
from benchmarks._sidebyside import fmt, timed  # noqa: E402

# bfcl-eval's runner() with the stand-ins a minimal install needs; argv: project root, result dir, score dir,
# {model: is_fc}
OFFICIAL_DRIVER = r'''
import dataclasses, json, os, sys, types
from pathlib import Path
root, result_dir, score_dir, models = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4])
os.environ["BFCL_PROJECT_ROOT"] = str(root)
for name in ("numpy", "pandas"):  # eval_runner_helper imports them for its leaderboard tables only
    sys.modules[name] = types.ModuleType(name)
openai = types.ModuleType("openai")  # the OpenAI handler imports the SDK; decoding never calls it
openai.OpenAI = type("OpenAI", (), {"__init__": lambda self, **kwargs: None})
openai.RateLimitError = type("RateLimitError", (Exception,), {})
sys.modules["openai"] = openai
config = types.ModuleType("bfcl_eval.constants.model_config")  # the real one imports every provider SDK
config.MODEL_CONFIG_MAPPING = {}
sys.modules["bfcl_eval.constants.model_config"] = config
from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler


@dataclasses.dataclass
class ModelConfig:  # the fields of bfcl_eval.constants.model_config.ModelConfig
    model_name: str
    display_name: str
    url: str
    org: str
    license: str
    model_handler: type
    input_price: float | None = None
    output_price: float | None = None
    is_fc_model: bool = True
    underscore_to_dot: bool = False


for name, fc in models.items():
    config.MODEL_CONFIG_MAPPING[name] = ModelConfig(name, name, "", "", "", OpenAICompletionsHandler,
                                                    is_fc_model=fc, underscore_to_dot=fc)
from bfcl_eval.eval_checker import eval_runner
from bfcl_eval.constants.category_mapping import ALL_SCORING_CATEGORIES

eval_runner.update_leaderboard_table_with_local_score_file = lambda *args: None  # the CSV tables (pandas)
eval_runner.generate_leaderboard_csv = lambda *args: None
v3 = json.loads(sys.argv[5])
eval_runner.runner(list(models), [c for c in ALL_SCORING_CATEGORIES if c in v3], result_dir, score_dir)
'''


# -- result files ---------------------------------------------------------------------------------------

def _tweak(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, -1, 7])
    if isinstance(value, float):
        return round(value * 1.5 + 1, 3)
    if isinstance(value, str):
        return value + "x" if value else "x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict):
        return {}
    return "x"


SINGLE = ["right", "value", "drop_arg", "extra_arg", "name", "drop_call", "dup_call", "prose", "type"]
MULTI = ["right", "drop", "dup", "value", "early", "late", "empty_turn", "cut"]


def _single(entry: data.Entry, mode: str, kind: str, rng: random.Random) -> Any:
    cat = entry.category
    if cat.kind == "irrelevance":
        first = (entry.prompt["function"] or [{"name": "lookup"}])[0]["name"]  # a few offer no function at all
        turn = ground_truth.answer_calls([(first, {})], mode) if kind != "right" else ground_truth.script(entry, mode)[0]
        return _raw(turn, mode)
    if cat.kind == "relevance":
        return "I cannot help with that." if kind != "right" else _raw(ground_truth.script(entry, mode)[0], mode)
    docs = ground_truth.raw_functions(entry)
    calls = [(name, dict(args)) for name, args in ground_truth.expected_calls(docs, entry.ground_truth)]
    with_args = [i for i, (_, args) in enumerate(calls) if args]
    if kind == "prose":
        return "I would call a function here, but I am not sure which one."
    if kind in ("value", "type", "drop_arg") and with_args:
        name, args = calls[rng.choice(with_args)]
        param = rng.choice(sorted(args))
        if kind == "drop_arg":
            del args[param]
        else:
            args[param] = str(args[param]) if kind == "type" and not isinstance(args[param], str) \
                else _tweak(args[param], rng)
    elif kind == "extra_arg":
        calls[0][1]["unexpected_param"] = 1
    elif kind == "name":
        calls[0] = (calls[0][0] + "_x", calls[0][1])
    elif kind == "drop_call" and len(calls) > 1:
        calls.pop()
    elif kind == "dup_call":
        calls.append(calls[0])
    return _raw(ground_truth.answer_calls(calls, mode, cat.language, docs), mode)


def _raw(turn, mode: str) -> Any:
    if mode == "fc" and turn.tool_calls:
        return [{c.name: c.arguments} for c in turn.tool_calls]
    return turn.content


def _multi(entry: data.Entry, mode: str, kind: str, rng: random.Random) -> list[list[Any]]:
    turns = [list(calls) for calls in entry.ground_truth]
    full = [i for i, calls in enumerate(turns) if calls]
    pick = rng.choice(full)
    if kind == "drop":
        turns[pick].pop(rng.randrange(len(turns[pick])))
    elif kind == "dup":
        turns[pick].append(rng.choice(turns[pick]))
    elif kind == "value":
        index = rng.randrange(len(turns[pick]))
        node = ast.parse(turns[pick][index], mode="eval").body
        values = [k for k in node.keywords] or []
        if values:
            target = rng.choice(values)
            target.value = ast.Constant(_tweak(ast.literal_eval(target.value), rng))
            turns[pick][index] = ast.unparse(node)
    elif kind == "early" and pick > 0:
        turns[pick - 1].append(turns[pick].pop(0))
    elif kind == "late" and pick + 1 < len(turns):
        turns[pick + 1].insert(0, turns[pick].pop())
    elif kind == "empty_turn":
        turns[pick] = []
    elif kind == "cut":
        turns = turns[:-1]
    docs = {d["name"]: d for d in entry.prompt["function"]}
    for held in (entry.prompt.get("missed_function") or {}).values():
        docs.update({d["name"]: d for d in held})
    out = []
    for index, calls in enumerate(turns):
        steps = []
        if calls:
            try:
                parsed = [ground_truth.parse_call(c, docs) for c in calls]
            except (ValueError, SyntaxError, KeyError, IndexError):
                parsed = None
            if parsed is not None:
                steps.append(_raw(ground_truth.answer_calls(parsed, mode, tag=f"t{index}"), mode))
        steps.append(ground_truth.TURN_DONE)  # the text reply that ends a turn, as real results hold
        out.append(steps)
    return out


def make_results(result_dir: Path, models: int, seed: int) -> dict[str, bool]:
    """Write the model folders; returns {model: is_fc}."""
    names = {"gt-fc": True, "gt-prompt": False}
    for i in range(max(0, models - 2)):
        names[f"perturbed-{'fc' if i % 2 == 0 else 'prompt'}-{i + 1}"] = i % 2 == 0
    rngs = {model: random.Random(f"{seed}-{model}") for model in names}
    for name, cat in CATEGORIES.items():
        entries = data.entries(name, hinted=False)
        multi = cat.kind == "multi_turn"
        for model, fc in names.items():
            mode, rng, lines = "fc" if fc else "prompt", rngs[model], []
            for entry in entries:
                kind = "right" if model.startswith("gt-") else rng.choice(MULTI if multi else SINGLE)
                if kind != "right" and rng.random() < 0.2:
                    kind = "right"
                result = _multi(entry, mode, kind, rng) if multi else _single(entry, mode, kind, rng)
                lines.append(json.dumps({"id": entry.id, "result": result}, ensure_ascii=False))
            folder = result_dir / model / cat.group
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"BFCL_v4_{cat.wheel}_result.json").write_text("\n".join(lines) + "\n")
    return names


# -- the official scorer's venv ------------------------------------------------------------------------

def official_venv(path: Path) -> Path:
    """A venv with bfcl-eval (no dependencies) and pyproject's ``bfcl`` extra, at constraints.txt's pins."""
    python = path / "bin" / "python"
    marker = path / ".bfcl-official"
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bfcl"]
    names = {re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-") for requirement in extra}
    pins = sorted(line for line in (ROOT / "constraints.txt").read_text().splitlines()
                  if line.split("==")[0].lower().replace("_", "-") in names)
    want = json.dumps({"bfcl-eval": wheel.BFCL_EVAL_VERSION, "extra": extra, "pins": pins})
    if marker.exists() and marker.read_text() == want:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c",
           str(ROOT / "constraints.txt")]
    subprocess.run(pip + ["--no-deps", f"bfcl-eval=={wheel.BFCL_EVAL_VERSION}"], check=True)
    subprocess.run(pip + extra, check=True)
    marker.write_text(want)
    return python


# -- timing and verdicts -----------------------------------------------------------------------------

def official_verdicts(score_dir: Path, result_dir: Path) -> dict[tuple[str, str], tuple[bool, str | None]]:
    """(model, id) -> (valid, error type) from the official score files (failed entries are listed; every
    other entry of the result files is valid)."""
    verdicts = {}
    for path in result_dir.rglob("BFCL_v4_*_result.json"):
        model = path.parent.parent.name
        for line in path.read_text().splitlines():
            verdicts[(model, json.loads(line)["id"])] = (True, None)
    for path in score_dir.rglob("BFCL_v4_*_score.json"):
        model = path.relative_to(score_dir).parts[0]
        for line in path.read_text().splitlines()[1:]:
            failed = json.loads(line)
            verdicts[(model, failed["id"])] = (False, error_type(failed))
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=10, help="model folders (2 ground truth + perturbed ones)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="working directory (default: a new temporary one)")
    parser.add_argument("--venv", default=str(Path(os.environ.get("AWM_CACHE_DIR") or Path.home() / ".cache" / "awm")
                                              / "bench" / "bfcl-official-venv"))
    parser.add_argument("--workers", type=int, default=None, help="awm's checker workers (default: one per core)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="awm_bfcl_scoring_"))
    result_dir = out / "result"
    print(f"working directory: {out}", file=sys.stderr)
    python = official_venv(Path(args.venv))
    models = make_results(result_dir, args.models, args.seed)
    files = sorted(str(p) for p in result_dir.rglob("BFCL_v4_*_result.json"))
    cases = sum(len(Path(f).read_text().splitlines()) for f in files)
    print(f"{cases} cases: {len(models)} models × {cases // len(models)} entries, {len(files)} result files",
          file=sys.stderr)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("BFCL_", "PYTHON"))}
    official_root = out / "official-root"
    official_root.mkdir(exist_ok=True)
    driver = out / "official_driver.py"
    driver.write_text(OFFICIAL_DRIVER)
    v3 = json.dumps([c.wheel for c in CATEGORIES.values()])
    official = timed([str(python), str(driver), str(official_root), str(result_dir), str(out / "score-official"),
                      json.dumps(models), v3], env, subprocess.DEVNULL)
    print(f"official: {fmt(official)}", file=sys.stderr)

    if args.workers:
        env["AWM_BFCL_WORKERS"] = str(args.workers)
    with open(out / "awm.json", "w") as fh:
        ours = timed([str(ROOT / ".venv" / "bin" / "awm"), "bench", "bfcl", "score", *files, "--out",
                      str(out / "score-awm"), "--json"], env, fh)
    print(f"awm: {fmt(ours)}", file=sys.stderr)

    expected = official_verdicts(out / "score-official", result_dir)
    scored = json.loads((out / "awm.json").read_text())
    got = {(m["model"], e["id"]): (e["valid"], e["error_type"]) for m in scored["models"] for e in m["entries"]}
    differ = sorted(k for k in expected if expected[k] != got.get(k))
    valid = sum(v for v, _ in expected.values())
    report = {"cases": cases, "models": len(models), "official": official, "awm": ours,
              "ratio": ours["wall_s"] / official["wall_s"], "valid": valid, "invalid": cases - valid,
              "verdicts_compared": len(expected), "verdicts_differing": len(differ), "first_differences":
              [{"model": m, "id": i, "official": expected[(m, i)], "awm": got.get((m, i))} for m, i in differ[:10]],
              "cpus": os.cpu_count()}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"\n{cases} cases ({valid} valid, {cases - valid} invalid) on {os.cpu_count()} cores: official "
          f"{fmt(official)}, awm {fmt(ours)}; ratio awm/official {report['ratio']:.2f}; verdicts differing: "
          f"{len(differ)} of {len(expected)}")


if __name__ == "__main__":
    main()
