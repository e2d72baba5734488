"""Decoding, execution and scoring with the wheel's own code. **Runs only inside the sandboxed host**
(``host.py``), in one of its persistent workers: prompt-mode decoding ``eval()``s parts of the model's text and
multi-turn calls are ``eval()``ed against the backends. The backends keep their instances in the module
globals of ``multi_turn_utils``; ``reset()`` removes everything a request added there, so every request starts
from backends built afresh from the entry's initial configuration, as in a fresh process.

Scoring is the wheel's per-entry scoring (``eval_runner._evaluate_single_ast_entry``,
``_evaluate_single_relevance_entry``, ``_evaluate_single_multi_turn_entry``: the AST checker, the
relevance rule and the multi-turn checker) with the decoders of BFCL's OpenAI chat-completions handler
(``OpenAICompletionsHandler.decode_ast`` / ``decode_execute``: FC or prompting). **The verdict comes first and
nothing after it can lose it**: what is computed for display (the decoded calls, the per-turn backend states)
fails only into a note.
"""
from __future__ import annotations

import json
import pickle
from typing import Any

from awm_engine.bench.bfcl import wheel
from awm_engine.bench.bfcl.categories import CATEGORIES, category_of

STATE_CHARS = 4000  # the longest rendering of one differing backend attribute kept for display
STEP_CHARS = 1_000_000  # what one step's calls return, kept at most (honest BFCL results: ~32 KB a call at most)
ENTRY_CHARS = 8_000_000  # … and one entry's steps in all (awm's side: the record, the model's next requests)
VIEW_CHARS = 2_000_000  # the texts of one verdict or one display view (honest ones: a few hundred KB at most)


def cut_results(results: Any, budget: int = STEP_CHARS) -> tuple[list[str], int]:
    """Call results as text, at most ``budget`` characters in all (a result past it is cut, saying so; those
    after it are empty), and the characters kept. A model's own code can make its calls return gigabytes: this
    is what reaches awm, the record and the model's next request. The verdict never reads them (the check
    executes the calls again, in the sandbox)."""
    kept, used = [], 0
    for result in results if isinstance(results, list) else [results]:
        text = result if isinstance(result, str) else repr(result)
        left = max(0, budget - used)
        if len(text) > left:
            text = text[:left] + f"… ({len(text) - left} characters cut by awm: a step's results are kept up to " \
                                 f"{STEP_CHARS}, an entry's up to {ENTRY_CHARS})"
        used += min(len(text), left)
        kept.append(text)
    return kept, used


def bounded(value: Any, budget: int = VIEW_CHARS) -> Any:
    """JSON data with its strings cut once ``budget`` characters are used (saying so): the official verdict of a
    failed multi-turn answer holds what the model's calls returned, and the display views hold the backends'
    states — both the model's code can make gigabytes. The verdict (``valid``, the error type) is decided before."""
    left = [budget]

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            if len(item) > left[0]:
                item = item[:left[0]] + f"… ({len(item) - left[0]} characters cut by awm: an answer's texts are " \
                                        f"kept up to {budget})"
                left[0] = 0
            else:
                left[0] -= len(item)
            return item
        if isinstance(item, list):
            return [walk(x) for x in item]
        if isinstance(item, dict):
            return {k: walk(x) for k, x in item.items()}
        return item

    return walk(value)


class _Data:
    """Prompt entries (docs as in the file, as BFCL's evaluator reads them) and possible answers, per wheel
    category, loaded at a category's first request. Kept pickled: each request gets its own copy (the wheel's
    scoring changes the entries it is given), and unpickling is several times faster than ``deepcopy``."""

    def __init__(self) -> None:
        self.entries: dict[str, bytes] = {}  # id -> pickled prompt entry
        self.answers: dict[str, bytes] = {}  # id -> pickled ground_truth
        self.loaded: set[str] = set()

    def load(self, category: str) -> None:
        if category in self.loaded:
            return
        utils = wheel.load("utils", checker=True)
        cat = CATEGORIES[category]
        prompts = utils.load_dataset_entry(cat.wheel, include_prereq=False, include_language_specific_hint=False)
        answers = utils.load_ground_truth_entry(cat.wheel) if cat.kind in ("ast", "multi_turn") else None
        for i, prompt in enumerate(prompts):  # paired by line index, as BFCL does
            self.entries[prompt["id"]] = pickle.dumps(prompt)
            if answers is not None:
                self.answers[prompt["id"]] = pickle.dumps(answers[i]["ground_truth"])
        self.loaded.add(category)

    def _known(self, entry_id: str) -> None:
        self.load(category_of(entry_id).name)
        if entry_id not in self.entries:
            raise KeyError(f"no BFCLv3 entry {entry_id!r}")

    def entry(self, entry_id: str) -> dict[str, Any]:
        """A fresh copy of the prompt entry."""
        self._known(entry_id)
        return pickle.loads(self.entries[entry_id])

    def answer(self, entry_id: str) -> Any:
        """A fresh copy of the possible answer."""
        self._known(entry_id)
        return pickle.loads(self.answers[entry_id])


DATA = _Data()


def preload(entry_id: Any) -> None:
    """Load the data of ``entry_id``'s category (in a worker, before it forks a request's child: what a child
    loads dies with it). Whatever is wrong with the id is the request's own error, said by its child."""
    try:
        DATA._known(entry_id)
    except Exception:  # noqa: BLE001 - reported by the request itself
        pass
_PRISTINE: set[str] = set()  # the names in multi_turn_utils' globals before any request


def warm_up() -> None:
    """Import everything a request uses (before the workers fork: they start warm)."""
    wheel.prepare(checker=True)
    for module in ("eval_checker.eval_runner", "model_handler.api_inference.openai_completion",
                   "eval_checker.multi_turn_eval.multi_turn_utils", "constants.executable_backend_config"):
        wheel.load(module, checker=True)
    config = wheel.load("constants.executable_backend_config", checker=True)
    for module in dict.fromkeys(config.CLASS_FILE_PATH_MAPPING[c] for c in BACKENDS):
        __import__(module)
    _PRISTINE.update(vars(wheel.load("eval_checker.multi_turn_eval.multi_turn_utils", checker=True)))


def reset() -> None:
    """Forget every backend instance (and any other global) a request left in ``multi_turn_utils``, where the
    wheel caches instances by model name and entry id and where it ``eval()``s the calls: the next request
    builds its backends from the entry's initial configuration again."""
    namespace = vars(wheel.load("eval_checker.multi_turn_eval.multi_turn_utils", checker=True))
    for name in [n for n in namespace if n not in _PRISTINE]:
        del namespace[name]


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


def _note(what: str, exc: BaseException) -> str:
    return f"{what} could not be shown ({type(exc).__name__}: {exc}); the official verdict stands"


def score_single(entry_id: str, raw: Any, mode: str, display: bool = True) -> dict[str, Any]:
    """The official verdict on one single-turn answer and (``display``) the decoded calls."""
    runner = wheel.load("eval_checker.eval_runner", checker=True)
    enums = wheel.load("constants.enums", checker=True)
    cat = category_of(entry_id)
    prompt = DATA.entry(entry_id)
    decoder, model = _Decoder(mode), wheel.MODEL_NAMES[mode]
    language, fmt = {"java": (enums.Language.JAVA, enums.ReturnFormat.JAVA),
                     "javascript": (enums.Language.JAVASCRIPT, enums.ReturnFormat.JAVASCRIPT)}.get(
        cat.language, (enums.Language.PYTHON, enums.ReturnFormat.PYTHON))
    if cat.kind in ("irrelevance", "relevance"):
        fmt = enums.ReturnFormat.PYTHON
        verdict = runner._evaluate_single_relevance_entry(decoder, entry_id, raw, prompt, model, cat.wheel)
    else:
        verdict = runner._evaluate_single_ast_entry(decoder, entry_id, pickle.loads(pickle.dumps(raw)),
                                                    DATA.answer(entry_id), prompt, model, cat.wheel,
                                                    language=language, return_format=fmt)
    answer: dict[str, Any] = {"verdict": bounded(_jsonable(verdict))}
    if display:
        try:
            answer["decoded"], answer["decode_error"] = _jsonable(decoder.decode_ast(raw, fmt)), None
        except Exception as exc:  # noqa: BLE001 - the verdict already says so; this is for display
            answer["decoded"], answer["decode_error"] = None, f"{type(exc).__name__}: {exc}"
    return answer


EXECUTE: list[Any] = []  # while the host routes a request's model calls to the runner: the routing executor


def _execute(entry: dict[str, Any], calls: list[str], model_name: str):
    utils = wheel.load("eval_checker.multi_turn_eval.multi_turn_utils", checker=True)
    execute = EXECUTE[0] if EXECUTE else utils.execute_multi_turn_func_call
    return execute(calls, entry["initial_config"], entry["involved_classes"], model_name, entry["id"],
                   long_context="long_context" in entry["id"])


def execute_step(entry_id: str, previous: list[list[str]], raw: Any, mode: str) -> dict[str, Any]:
    """One step of a multi-turn rollout: decode the model's output (BFCL's ``decode_execute``); when it holds
    calls, rebuild the backends from the entry's initial configuration, replay the earlier steps' calls and
    run these, returning their results. ``decoded`` None: the output is not a call (the turn ends)."""
    utils = wheel.load("eval_checker.multi_turn_eval.multi_turn_utils", checker=True)
    try:
        decoded = _Decoder(mode).decode_execute(pickle.loads(pickle.dumps(raw)))
    except Exception as exc:  # noqa: BLE001 - a text reply or a malformed call: the turn ends, as in BFCL
        return {"decoded": None, "decode_error": f"{type(exc).__name__}: {exc}"}
    if utils.is_empty_execute_response(decoded):
        return {"decoded": None, "decode_error": "no function call"}
    entry = DATA.entry(entry_id)
    for calls in previous:
        _execute(entry, calls, "awm_rollout")
    results, _ = _execute(entry, decoded, "awm_rollout")
    return {"decoded": _jsonable(decoded), "results": cut_results(results)[0]}


def check_multi_turn(entry_id: str, raw_turns: Any, mode: str) -> dict[str, Any]:
    """The official verdict on a multi-turn answer (the per-turn states for display are ``turn_states``, a
    request of their own: whatever happens there cannot touch the verdict)."""
    runner = wheel.load("eval_checker.eval_runner", checker=True)
    cat = category_of(entry_id)
    decoder, model = _Decoder(mode), wheel.MODEL_NAMES[mode]
    verdict = runner._evaluate_single_multi_turn_entry(decoder, entry_id, pickle.loads(pickle.dumps(raw_turns)),
                                                       DATA.answer(entry_id), DATA.entry(entry_id), model, cat.wheel)
    return {"verdict": bounded(_jsonable(verdict))}


def turn_states(entry_id: str, raw_turns: Any, mode: str) -> dict[str, Any]:
    """For display: the backends' state after each turn next to the ground truth's, the public attributes
    that differ — only for turns with calls in the ground truth, the turns the official checker compares.
    Never raises: what cannot be computed or shown becomes ``note``."""
    try:
        return {"states": bounded(_turn_states(entry_id, raw_turns, _Decoder(mode))), "note": None}
    except Exception as exc:  # noqa: BLE001 - a display view: it fails into a note
        return {"states": [], "note": _note("the backends' states", exc)}


def _turn_states(entry_id: str, raw_turns: Any, decoder: _Decoder) -> list[dict[str, Any]]:
    entry, answer = DATA.entry(entry_id), DATA.answer(entry_id)
    if not isinstance(raw_turns, list):
        return []
    states = []
    for turn, expected in zip(raw_turns, answer):
        for raw in turn if isinstance(turn, list) else []:
            try:
                calls = decoder.decode_execute(raw)
            except Exception:  # noqa: BLE001 - dropped, as the checker drops it
                continue
            if calls:
                _execute(entry, calls, "awm_view")
        _, model = _execute(entry, [], "awm_view")
        _, truth = _execute(entry, expected, "awm_view_ground_truth")
        if not expected:  # the official checker compares nothing after a turn without expected calls
            states.append({"checked": False, "classes": {}})
            continue
        classes = {}
        for name, instance in truth.items():
            try:
                classes[name] = _differences(model.get(name), instance)
            except Exception as exc:  # noqa: BLE001 - one backend that cannot be shown; the others can
                classes[name] = {"match": None, "differences": {}, "note": _note(name, exc)}
        states.append({"checked": True, "classes": classes})
    return states


def _differences(mine: Any, instance: Any) -> dict[str, Any]:
    differ = {}
    for attr, value in vars(instance).items():
        if attr.startswith("_"):
            continue
        other = getattr(mine, attr, None)
        if other != value:
            differ[attr] = {"model": _render(other), "ground_truth": _render(value)}
    return {"match": not differ, "differences": differ}


def _render(value: Any) -> str:
    """A backend attribute as JSON text with sorted keys, cut at ``STATE_CHARS``. Any value can be shown: keys
    that do not sort together (TradingBot's ``orders`` has int keys and a stray ``"order_type"`` key) are
    written as strings, objects as their public attributes, a cycle as ``"<cycle>"``."""
    try:
        text = json.dumps(_plain(value, set()), ensure_ascii=False, sort_keys=True)
    except Exception:  # noqa: BLE001 - e.g. an object whose attributes cannot be read
        text = repr(value)
    return text if len(text) <= STATE_CHARS else text[:STATE_CHARS] + f"… ({len(text)} characters)"


def _plain(value: Any, path: set[int]) -> Any:
    """``value`` as JSON data (``path``: the containers above it, to cut cycles such as a directory tree
    whose nodes point at their parents)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if id(value) in path:
        return "<cycle>"
    path.add(id(value))
    try:
        if isinstance(value, dict):
            return {str(k): _plain(v, path) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [_plain(v, path) for v in value]
        if hasattr(value, "__dict__"):
            return {k: _plain(v, path) for k, v in vars(value).items() if not k.startswith("_")}
        return repr(value)
    finally:
        path.discard(id(value))
