"""MCP-Universe evaluators, our own implementation of their semantics (spec §3).

An evaluator is ``{func, op, value, op_args}``. ``func`` is a chain ``step -> step -> …`` applied to the
agent's final answer string; a step is ``name`` or ``name(a, b)`` (arguments: the raw text between the
parentheses, split on commas and stripped, no quoting). Steps: ``json`` (strip whitespace, backticks and a
leading ``json``, then parse), ``get(key)`` (dictionary lookup, None when missing), ``len``, ``foreach`` (fan a
list out: later steps apply to every element; may nest), ``raw`` (the string itself), ``list`` (wrap in a
one-element list). Every step maps over a fan-out.

``op``: empty — pass iff the chain ran; ``=``, ``<``, ``<=``, ``>``, ``>=`` — Python comparison with ``value``;
``in`` — output ∈ value; ``contain`` — value ∈ output; or a domain operator. Over a fan-out the operator must
hold for every element (the first failing element fails the evaluator). A JSON decoding error fails with
"JSON decoding error", any other exception with "Execution error: …".

Domain operators with a fixed ground truth run here (``STATIC_OPS``). The others compare against a live
service or external software (Google Maps, yfinance, GitHub, Notion, api.weather.gov, booking sites, Blender,
the gpt-4.1 judge): they give status ``needs`` with the service's name instead of a verdict. The judge runs
when a ``judge`` callable is given.
"""
from __future__ import annotations

import json
import operator
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

Judge = Callable[[str, str, str], bool]  # (question, response, correct_answer) -> correct?


class Fanout(list):
    """The per-element results of ``foreach``."""


class ChainError(Exception):
    pass


@dataclass
class Verdict:
    func: str
    op: str
    status: str  # pass | fail | needs
    reason: str = ""
    needs: str | None = None
    desc: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


# -- the func chain ------------------------------------------------------------------------------------------

_STEP = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\((.*)\))?\s*$", re.S)
CHAIN_FUNCS = ("json", "get", "len", "foreach", "raw", "list")


def parse_chain(func: str) -> list[tuple[str, list[str]]]:
    steps = []
    for part in func.split("->"):
        m = _STEP.match(part)
        if not m:
            raise ChainError(f"bad step {part.strip()!r} in func {func!r}")
        name, args = m.group(1), m.group(2)
        if name not in CHAIN_FUNCS:
            raise ChainError(f"unknown function {name!r} in func {func!r}")
        steps.append((name, [a.strip() for a in args.split(",")] if args is not None and args.strip() else []))
    return steps


def parse_json_text(text: str) -> Any:
    s = str(text).strip().strip("`").strip()
    if s.startswith("json"):
        s = s[4:]
    return json.loads(s.strip())


def _apply(name: str, args: list[str], x: Any) -> Any:
    if isinstance(x, Fanout):
        return Fanout(_apply(name, args, e) for e in x)
    if name == "json":
        return parse_json_text(x)
    if name == "get":
        if len(args) != 1:
            raise ChainError(f"get takes one key, got {args}")
        if not isinstance(x, dict):
            raise TypeError(f"get({args[0]}) on {type(x).__name__}")
        return x.get(args[0])
    if name == "len":
        return len(x)
    if name == "foreach":
        if not isinstance(x, (list, tuple)):
            raise TypeError(f"foreach on {type(x).__name__}")
        return Fanout(x)
    if name == "raw":
        return x
    if name == "list":
        return [x]
    raise ChainError(f"unknown function {name!r}")


def run_chain(func: str, answer: str) -> Any:
    x: Any = answer
    for name, args in parse_chain(func):
        x = _apply(name, args, x)
    return x


def leaves(x: Any) -> list[Any]:
    if isinstance(x, Fanout):
        return [leaf for e in x for leaf in leaves(e)]
    return [x]


# -- operators ------------------------------------------------------------------------------------------------

Result = tuple[bool, str]

_BUILTIN: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "in": lambda out, value: out in value, "contain": lambda out, value: value in out,
}


def _norm(s: Any) -> str:
    return str(s).strip().lower()


def _alias_match(name: Any, aliases: list[Any]) -> bool:
    """The city name is a case-insensitive substring of one of the aliases (MCP-Universe's city match)."""
    n = _norm(name)
    return bool(n) and any(n in _norm(a) for a in aliases)


def is_dict_equal(x: Any, value: Any, op_args: Any) -> Result:
    if not isinstance(x, dict) or not isinstance(value, dict):
        return False, "the answer is not a JSON object"
    if set(x) != set(value):
        extra, missing = sorted(set(x) - set(value)), sorted(set(value) - set(x))
        return False, f"keys differ (extra: {extra}, missing: {missing})"
    for k, v in value.items():
        if x[k] != v:
            return False, f"{k!r}: {x[k]!r} != {v!r}"
    return True, ""


def city_name_match(x: Any, value: Any, op_args: Any) -> Result:
    key, aliases = op_args["key"], op_args["values"]
    city = x[key]
    if _alias_match(city, aliases):
        return True, ""
    return False, f"{key} {city!r} matches none of {aliases}"


def _routes(x: Any) -> list[dict[str, Any]]:
    routes = x["routes"]
    if not isinstance(routes, list):
        raise TypeError("routes is not a list")
    return routes


def place_in_cities_visited_of_routes(x: Any, value: Any, op_args: Any) -> Result:
    for r in _routes(x):
        if not any(_alias_match(c, op_args) for c in r["cities_visited"]):
            return False, f"route {r.get('route_id')!r} does not visit any of {op_args}"
    return True, ""


def place_not_in_cities_visited_of_routes(x: Any, value: Any, op_args: Any) -> Result:
    for r in _routes(x):
        if any(_alias_match(c, op_args) for c in r["cities_visited"]):
            return False, f"route {r.get('route_id')!r} visits one of {op_args}"
    return True, ""


def places_in_cities_visited(x: Any, value: Any, op_args: Any) -> Result:
    """Every place listed under ``op_args`` (e.g. rest_stops) of a route is in one of the route's cities."""
    for r in _routes(x):
        cities = [_norm(c) for c in r["cities_visited"]]
        for place in r[op_args]:
            if _norm(place["city"]) not in cities:
                return False, f"{op_args} city {place['city']!r} is not among route {r.get('route_id')!r}'s cities"
    return True, ""


def city_different_from_rest_stops(x: Any, value: Any, op_args: Any) -> Result:
    """No rest stop lies in the starting or the destination city (our reading of the operator's name)."""
    ends = {_norm(x["starting_city"]), _norm(x["destination_city"])}
    for r in _routes(x):
        for stop in r.get("rest_stops") or []:
            if _norm(stop["city"]) in ends:
                return False, f"rest stop {stop.get('name')!r} is in {stop['city']!r}, an end of the trip"
    return True, ""


def stop_include_keys(x: Any, value: Any, op_args: Any) -> Result:
    stops = x if isinstance(x, list) else [x]
    keys = op_args["keys"]
    for stop in stops:
        missing = [k for k in keys if k not in stop]
        if missing:
            return False, f"a stop lacks {missing}"
    return True, ""


STATIC_OPS: dict[str, Callable[[Any, Any, Any], Result]] = {
    "playwright.is_dict_equal": is_dict_equal,
    "google_maps.city_name_match": city_name_match,
    "google_maps.place_in_cities_visited_of_routes": place_in_cities_visited_of_routes,
    "google_maps.place_not_in_cities_visited_of_routes": place_not_in_cities_visited_of_routes,
    "google_maps.places_in_cities_visited": places_in_cities_visited,
    "google_maps.city_different_from_rest_stops": city_different_from_rest_stops,
    "google_maps.stop_include_keys": stop_include_keys,
}

JUDGE_OP = "google_search.llm_as_a_judge"
# operator prefix -> the live service or software its ground truth comes from (spec §3.2, §6.1)
SERVICES = {
    "google_maps.": "google-maps",
    "weather.": "weather",
    "yfinance.": "yfinance",
    "github.": "github",
    "notion.": "notion",
    "blender.": "blender",
    "playwright.check_": "web-scraping",
    JUDGE_OP: "llm-judge",
}


def needed_service(op: str) -> str | None:
    """The service an operator needs at evaluation time; None for built-in and static operators."""
    if not op or op in _BUILTIN or op in STATIC_OPS:
        return None
    for prefix, service in SERVICES.items():
        if op.startswith(prefix):
            return service
    return f"upstream:{op}"  # an operator of MCP-Universe we do not implement


def evaluate(evaluator: dict[str, Any], answer: str, judge: Judge | None = None) -> Verdict:
    func, op = evaluator["func"], evaluator.get("op") or ""
    value, op_args = evaluator.get("value"), evaluator.get("op_args")
    verdict = Verdict(func, op, "fail", desc=evaluator.get("desc") or "")
    try:
        output = run_chain(func, answer)
    except json.JSONDecodeError:
        verdict.reason = "JSON decoding error"
        return verdict
    except ChainError as exc:
        verdict.reason = f"Bad evaluator: {exc}"
        return verdict
    except Exception as exc:  # noqa: BLE001 - any failure of the chain fails the evaluator
        verdict.reason = f"Execution error: {type(exc).__name__}: {exc}"
        return verdict
    if not op:
        verdict.status = "pass"
        return verdict
    service = needed_service(op)
    if op == JUDGE_OP and judge is not None:
        service = None
    if service is not None:
        verdict.status, verdict.needs = "needs", service
        verdict.reason = f"needs {service}"
        return verdict
    for leaf in leaves(output):
        try:
            if op in _BUILTIN:
                ok, why = bool(_BUILTIN[op](leaf, value)), ""
                if not ok:
                    why = f"{leaf!r} {op} {value!r} is false"
            elif op == JUDGE_OP:
                args = op_args or {}
                ok = bool(judge(str(args.get("question", "")), str(leaf), str(args.get("correct_answer", ""))))
                why = "" if ok else "the judge says incorrect"
            else:
                ok, why = STATIC_OPS[op](leaf, value, op_args)
        except json.JSONDecodeError:
            verdict.reason = "JSON decoding error"
            return verdict
        except Exception as exc:  # noqa: BLE001
            verdict.reason = f"Execution error: {type(exc).__name__}: {exc}"
            return verdict
        if not ok:
            verdict.reason = why
            return verdict
    verdict.status = "pass"
    return verdict


@dataclass
class TaskVerdict:
    status: str  # pass | fail | needs (no evaluator failed, some could not be run here)
    evaluators: list[Verdict] = field(default_factory=list)

    @property
    def needs(self) -> list[str]:
        return sorted({v.needs for v in self.evaluators if v.needs})

    @property
    def evaluator_score(self) -> float | None:
        """Passed / total evaluators (the leaderboard's evaluator score); None while some need a service."""
        if self.status == "needs" or not self.evaluators:
            return None if self.status == "needs" else 1.0
        return sum(v.status == "pass" for v in self.evaluators) / len(self.evaluators)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "needs": self.needs, "evaluator_score": self.evaluator_score,
                "passed": sum(v.status == "pass" for v in self.evaluators),
                "failed": sum(v.status == "fail" for v in self.evaluators),
                "evaluators": [v.to_dict() for v in self.evaluators]}


def evaluate_task(evaluators: list[dict[str, Any]], answer: str, judge: Judge | None = None) -> TaskVerdict:
    """Every evaluator, in order, no short-circuit. The task passes only if every evaluator passes; it fails if
    any fails; otherwise (none failed, some need a service) its status is ``needs``."""
    verdicts = [evaluate(e, answer, judge) for e in evaluators]
    statuses = {v.status for v in verdicts}
    status = "fail" if "fail" in statuses else "needs" if "needs" in statuses else "pass"
    return TaskVerdict(status, verdicts)
