"""Decoding, execution and scoring with the wheel's own code. **Runs only inside the sandboxed host**
(``host.py``), each call in a freshly forked child: prompt-mode decoding ``eval()``s parts of the model's
text and multi-turn calls are ``eval()``ed against the backends, and the backends keep their instances in
module globals — a child that ends takes them with it, so no two entries ever share one.

Scoring is the wheel's per-entry scoring (``eval_runner._evaluate_single_ast_entry``,
``_evaluate_single_relevance_entry``, ``_evaluate_single_multi_turn_entry``: the AST checker, the
relevance rule and the multi-turn checker) with the decoders of BFCL's OpenAI chat-completions handler
(``OpenAICompletionsHandler.decode_ast`` / ``decode_execute``: FC or prompting).
"""
from __future__ import annotations

import copy
import json
from typing import Any

from awm_engine.bench.bfcl import wheel
from awm_engine.bench.bfcl.categories import CATEGORIES, category_of

STATE_CHARS = 4000  # the longest rendering of one differing backend attribute kept for display


class _Data:
    """Prompt entries (docs as in the file, as BFCL's evaluator reads them) and possible answers, per wheel
    category, loaded in the host before forking."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}  # id -> prompt entry
        self.answers: dict[str, Any] = {}  # id -> ground_truth
        self.loaded: set[str] = set()

    def load(self, category: str) -> None:
        if category in self.loaded:
            return
        utils = wheel.load("utils", checker=True)
        cat = CATEGORIES[category]
        prompts = utils.load_dataset_entry(cat.wheel, include_prereq=False, include_language_specific_hint=False)
        answers = utils.load_ground_truth_entry(cat.wheel) if cat.kind in ("ast", "multi_turn") else None
        for i, prompt in enumerate(prompts):  # paired by line index, as BFCL does
            self.entries[prompt["id"]] = prompt
            if answers is not None:
                self.answers[prompt["id"]] = answers[i]["ground_truth"]
        self.loaded.add(category)


DATA = _Data()


def warm_up() -> None:
    """Import everything a child uses (before forking: children start warm)."""
    wheel.prepare(checker=True)
    for module in ("eval_checker.eval_runner", "model_handler.api_inference.openai_completion",
                   "eval_checker.multi_turn_eval.multi_turn_utils", "constants.executable_backend_config"):
        wheel.load(module, checker=True)
    config = wheel.load("constants.executable_backend_config", checker=True)
    for module in dict.fromkeys(config.CLASS_FILE_PATH_MAPPING[c] for c in BACKENDS):
        __import__(module)


BACKENDS = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
            "VehicleControlAPI")


class _Decoder:
    """BFCL's OpenAI chat-completions handler, reduced to its two decoding methods (the wheel's code)."""

    def __init__(self, mode: str) -> None:
        handler = wheel.load("model_handler.api_inference.openai_completion", checker=True).OpenAICompletionsHandler
        self.is_fc_model = mode == "fc"
        self._ast, self._execute = handler.decode_ast, handler.decode_execute

    def decode_ast(self, result, language, has_tool_call_tag=False):
        return self._ast(self, result, language, has_tool_call_tag)

    def decode_execute(self, result, has_tool_call_tag=False):
        return self._execute(self, result, has_tool_call_tag)


def _jsonable(value: Any) -> Any:
    """``value`` made JSON-safe the way BFCL writes its score files (what json cannot hold becomes ``str``)."""
    return wheel.load("utils", checker=True).make_json_serializable(value)


def score_single(entry_id: str, raw: Any, mode: str) -> dict[str, Any]:
    """The official verdict on one single-turn answer, and the decoded calls."""
    runner = wheel.load("eval_checker.eval_runner", checker=True)
    enums = wheel.load("constants.enums", checker=True)
    cat = category_of(entry_id)
    prompt = copy.deepcopy(DATA.entries[entry_id])
    decoder, model = _Decoder(mode), wheel.MODEL_NAMES[mode]
    language, fmt = {"java": (enums.Language.JAVA, enums.ReturnFormat.JAVA),
                     "javascript": (enums.Language.JAVASCRIPT, enums.ReturnFormat.JAVASCRIPT)}.get(
        cat.language, (enums.Language.PYTHON, enums.ReturnFormat.PYTHON))
    if cat.kind in ("irrelevance", "relevance"):
        fmt = enums.ReturnFormat.PYTHON
        verdict = runner._evaluate_single_relevance_entry(decoder, entry_id, raw, prompt, model, cat.wheel)
    else:
        verdict = runner._evaluate_single_ast_entry(decoder, entry_id, raw, copy.deepcopy(DATA.answers[entry_id]),
                                                    prompt, model, cat.wheel, language=language, return_format=fmt)
    try:
        decoded, decode_error = decoder.decode_ast(copy.deepcopy(raw), fmt), None
    except Exception as exc:  # noqa: BLE001 - the verdict already says so; this is for display
        decoded, decode_error = None, f"{type(exc).__name__}: {exc}"
    return {"verdict": _jsonable(verdict), "decoded": _jsonable(decoded), "decode_error": decode_error}


def _execute(entry: dict[str, Any], calls: list[str], model_name: str):
    utils = wheel.load("eval_checker.multi_turn_eval.multi_turn_utils", checker=True)
    return utils.execute_multi_turn_func_call(calls, entry["initial_config"], entry["involved_classes"], model_name,
                                              entry["id"], long_context="long_context" in entry["id"])


def execute_step(entry_id: str, previous: list[list[str]], raw: Any, mode: str) -> dict[str, Any]:
    """One step of a multi-turn rollout: decode the model's output (BFCL's ``decode_execute``); when it holds
    calls, rebuild the backends from the entry's initial configuration, replay the earlier steps' calls and
    run these, returning their results. ``decoded`` None: the output is not a call (the turn ends)."""
    utils = wheel.load("eval_checker.multi_turn_eval.multi_turn_utils", checker=True)
    try:
        decoded = _Decoder(mode).decode_execute(copy.deepcopy(raw))
    except Exception as exc:  # noqa: BLE001 - a text reply or a malformed call: the turn ends, as in BFCL
        return {"decoded": None, "decode_error": f"{type(exc).__name__}: {exc}"}
    if utils.is_empty_execute_response(decoded):
        return {"decoded": None, "decode_error": "no function call"}
    entry = DATA.entries[entry_id]
    for calls in previous:
        _execute(entry, calls, "awm_rollout")
    results, _ = _execute(entry, decoded, "awm_rollout")
    return {"decoded": _jsonable(decoded), "results": _jsonable(results)}


def check_multi_turn(entry_id: str, raw_turns: Any, mode: str) -> dict[str, Any]:
    """The official verdict on a multi-turn answer, then (for display) the backends' state after each turn
    next to the ground truth's: the public attributes that differ."""
    runner = wheel.load("eval_checker.eval_runner", checker=True)
    cat = category_of(entry_id)
    decoder, model = _Decoder(mode), wheel.MODEL_NAMES[mode]
    answer = copy.deepcopy(DATA.answers[entry_id])
    verdict = runner._evaluate_single_multi_turn_entry(decoder, entry_id, copy.deepcopy(raw_turns), answer,
                                                       copy.deepcopy(DATA.entries[entry_id]), model, cat.wheel)
    return {"verdict": _jsonable(verdict), "states": _turn_states(entry_id, raw_turns, decoder)}


def _turn_states(entry_id: str, raw_turns: Any, decoder: _Decoder) -> list[dict[str, Any]]:
    entry, answer = DATA.entries[entry_id], DATA.answers[entry_id]
    if not isinstance(raw_turns, list):
        return []
    states = []
    for turn, expected in zip(raw_turns, answer):
        for raw in turn if isinstance(turn, list) else []:
            try:
                calls = decoder.decode_execute(copy.deepcopy(raw))
            except Exception:  # noqa: BLE001 - dropped, as the checker drops it
                continue
            if calls:
                _execute(entry, calls, "awm_view")
        _, model = _execute(entry, [], "awm_view")
        _, truth = _execute(entry, expected, "awm_view_ground_truth")
        classes = {}
        for name, instance in truth.items():
            mine = model.get(name)
            differ = {}
            for attr, value in vars(instance).items():
                if attr.startswith("_"):
                    continue
                other = getattr(mine, attr, None)
                if other != value:
                    differ[attr] = {"model": _render(other), "ground_truth": _render(value)}
            classes[name] = {"match": not differ, "differences": differ}
        states.append({"checked": bool(expected), "classes": classes})
    return states


def _render(value: Any) -> str:
    try:
        text = json.dumps(value, default=_public, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):  # e.g. a directory tree whose nodes point at their parents
        text = json.dumps(_jsonable(value), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= STATE_CHARS else text[:STATE_CHARS] + f"… ({len(text)} characters)"


def _public(obj: Any) -> Any:
    """A backend object (a File, a Directory …) as its public attributes; anything else as its repr."""
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "__dict__"):
        return {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    return repr(obj)
