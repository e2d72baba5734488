"""MCP-Universe is scored by its own evaluator code (issue 24): for every task of ../shared/data/mcp-universe and
answers built for it (correct, format variants, wrong values, malformed), awm's verdict per evaluator equals
MCP-Universe's own ``Evaluator`` run on its own in a fresh interpreter (tests/mcpu_reference.py), offline:

- where the official code decides without reaching a service, the same verdict and the same reason;
- where it reaches a service, awm says ``needs`` that service (the first one it reaches), and nothing else;
- with stand-ins answering a service (a Google Maps fixture, a judge), the same verdict again.

Then one regression test per difference the earlier re-implementation had. Skipped without ../shared or
without ``make mcpu``."""
from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from awm_engine.bench.mcp_universe import official, scores, tasks
from tests.conftest import SHARED

MCPU = SHARED / "data" / "mcp-universe" / "configs"
REFERENCE = Path(__file__).with_name("mcpu_reference.py")

pytestmark = pytest.mark.skipif(official.problem() is not None, reason=f"{official.problem()}")


@pytest.fixture(scope="module")
def task_files():
    if not (MCPU / "web_search.yaml").is_file():
        pytest.skip(f"MCP-Universe configs not found at {MCPU} (../shared is absent)")
    files = sorted(MCPU.glob("*/*.json"))
    assert len(files) == 232
    return {f"{p.parent.name}/{p.stem}": json.loads(p.read_text()) for p in files}


# -- answers built for a task -----------------------------------------------------------------------------------

def _path(func: str) -> list[str] | None:
    """``json -> get(a) -> get(b)`` → ["a", "b"]; None for any other chain."""
    steps = [s.strip() for s in func.split("->")]
    if not steps or steps[0] != "json" or not all(s.startswith("get(") and s.endswith(")") for s in steps[1:]):
        return None
    return [s[4:-1].strip() for s in steps[1:]]


def _put(answer: dict, keys: list[str], value) -> None:
    for key in keys[:-1]:
        answer = answer.setdefault(key, {}) if isinstance(answer.get(key, {}), dict) else {}
    answer[keys[-1]] = value


def _wrong(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + " (wrong)"
    if isinstance(value, list):
        return value[:-1]
    return None


def build_answers(task: dict) -> list[str]:
    """The output format's skeleton filled with every ``=`` value the evaluators check (the likeliest correct
    answer), then format variants, each checked value made wrong, and malformed answers."""
    evaluators = task.get("evaluators") or []
    skeleton = copy.deepcopy(task.get("output_format")) if isinstance(task.get("output_format"), dict) else {}
    raw_values = [e.get("value") for e in evaluators if e.get("func") == "raw" and e.get("op") == "="]
    checked = [(keys, e.get("value")) for e in evaluators if e.get("op") == "=" and (keys := _path(e["func"]))]
    good = copy.deepcopy(skeleton)
    whole = [e.get("value") for e in evaluators if e.get("func") == "json" and isinstance(e.get("value"), dict)]
    if whole:  # the answer compared as a whole (e.g. playwright.is_dict_equal)
        good = copy.deepcopy(whole[0])
    for keys, value in checked:
        if keys:
            _put(good, keys, value)
    text = json.dumps(good, ensure_ascii=False)
    answers = [text, "```json\n" + text + "\n```", "json " + text, json.dumps([good]),
               json.dumps({k.upper(): v for k, v in good.items()})]
    answers += [str(v) if not isinstance(v, str) else v for v in raw_values]
    for keys, value in checked[:2]:
        bad = copy.deepcopy(good)
        if keys:
            _put(bad, keys, _wrong(value))
            answers.append(json.dumps(bad, ensure_ascii=False))
    answers += ["", "not json", "[]", json.dumps("a string")]
    return list(dict.fromkeys(answers))


# -- the comparison ---------------------------------------------------------------------------------------------

class Reference:
    """The official side, started at once in its own interpreter so it runs while awm's side is computed."""

    def __init__(self, cases: list[dict]):
        self.proc = subprocess.Popen([sys.executable, "-I", str(REFERENCE)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REFERENCE.parent)
        self.cases = cases

    def results(self) -> list[list[dict]]:
        out, err = self.proc.communicate(json.dumps(self.cases), timeout=900)
        assert self.proc.returncode == 0, err[-3000:]
        return json.loads(out)


def ours(evaluators: list[dict], answer: str, services: official.Services | None = None) -> official.TaskVerdict:
    return official.evaluate_task(evaluators, answer, services, env={})


def assert_same(task_id: str, answer: str, mine: official.TaskVerdict, theirs: list[dict]) -> str:
    """One (task, answer): per evaluator the same verdict, or ``needs`` exactly where the official code reached a
    service. Returns the task-level status."""
    assert len(mine.evaluators) == len(theirs), task_id
    for i, (v, ref) in enumerate(zip(mine.evaluators, theirs)):
        where = f"{task_id} evaluator {i} ({v.func} {v.op}) on {answer[:80]!r}"
        if ref["reached"] is not None:
            assert v.status == "needs" and v.needs == ref["reached"], (where, v, ref)
        else:
            assert v.status == ("pass" if ref["passed"] else "fail"), (where, v, ref)
            assert v.reason == ref["reason"], (where, v, ref)
    return mine.status


def test_every_task_every_answer_equals_the_official_evaluator(task_files):
    cases, keys = [], []
    for task_id, task in task_files.items():
        for answer in build_answers(task):
            cases.append({"evaluators": task.get("evaluators") or [], "answer": answer})
            keys.append((task_id, answer))
    assert len(cases) > 2000
    ref_side = Reference(cases)
    mine = [ours(case["evaluators"], answer) for (_, answer), case in zip(keys, cases)]
    theirs = ref_side.results()
    statuses: dict[str, int] = {}
    decided_offline = set()
    for (task_id, answer), verdict, ref in zip(keys, mine, theirs):
        status = assert_same(task_id, answer, verdict, ref)
        statuses[status] = statuses.get(status, 0) + 1
        if status != "needs":
            decided_offline.add(task_id)
    # every outcome occurs; most tasks are decided offline on some answer (malformed ones fail before any service)
    assert set(statuses) == {"pass", "fail", "needs"}, statuses
    assert len(decided_offline) >= 100


GMAPS_PLACE = {"place_id": "p1", "name": "Central Library", "formatted_address": "1 Main St, Seattle, WA, USA",
               "types": ["library", "point_of_interest"], "rating": 4.6, "location": {"lat": 47.6, "lng": -122.3}}


def _gmaps_fixture() -> dict:
    text = json.dumps({"places": [GMAPS_PLACE]})
    return {"maps_search_places": text, "maps_place_details": json.dumps(GMAPS_PLACE),
            "maps_elevation": json.dumps({"results": [{"elevation": 50.0}]}),
            "maps_distance_matrix": json.dumps({"rows": []}), "maps_geocode": json.dumps({"results": []})}


def test_with_stand_ins_answering_the_verdicts_are_the_official_ones(task_files):
    """A Google Maps fixture and a judge behind the stand-ins: the official code now decides those evaluators
    too, the same way on both sides."""
    rules = [["[correct_answer]: Ollie Watkins", "extracted_final_answer: Ollie Watkins\ncorrect: yes"],
             ["", "extracted_final_answer: None\ncorrect: no"]]
    gmaps = _gmaps_fixture()

    def gmaps_handler(tool_name, arguments):
        if tool_name not in gmaps:
            raise ConnectionError(f"no fixture for google-maps.{tool_name}")
        return gmaps[tool_name]

    def judge(messages):
        prompt = messages[-1]["content"]
        return next(reply for marker, reply in rules if marker in prompt)

    services = official.Services(handlers={"google-maps": gmaps_handler, "llm-judge": judge})
    cases, keys = [], []
    for task_id, task in task_files.items():
        if not task_id.startswith(("location_navigation/", "web_search/info_search_task_000")):
            continue
        for answer in build_answers(task)[:6]:
            cases.append({"evaluators": task.get("evaluators") or [], "answer": answer,
                          "fixtures": {"google-maps": gmaps, "llm-judge": rules}})
            keys.append((task_id, answer))
    ref_side = Reference(cases)
    mine_all = [ours(case["evaluators"], answer, services) for (_, answer), case in zip(keys, cases)]
    theirs = ref_side.results()
    decided = 0
    for (task_id, answer), mine, ref in zip(keys, mine_all, theirs):
        for i, (v, r) in enumerate(zip(mine.evaluators, ref)):
            where = f"{task_id} evaluator {i} ({v.func} {v.op})"
            if r["reached"] in (None, "google-maps", "llm-judge"):  # answered on both sides: a real verdict
                assert v.status == ("pass" if r["passed"] else "fail"), (where, v, r)
                assert v.reason == r["reason"], (where, v, r)
                decided += r["reached"] is not None
            else:
                assert v.status == "needs" and v.needs == r["reached"], (where, v, r)
    assert decided > 100


# -- one regression test per earlier difference ------------------------------------------------------------------

def _one(func, answer, op="", value=None, op_args=None, services=None):
    config = {"func": func, "op": op, "value": value, "op_args": op_args}
    return asyncio.run(official.evaluate(config, answer if isinstance(answer, str) else json.dumps(answer), services))


def test_len_of_a_dict_or_a_string_fails():
    assert _one("json -> get(x) -> len", {"x": ["a"]}, "=", 1).status == "pass"
    for x in ({"a": 1}, "a"):
        v = _one("json -> get(x) -> len", {"x": x}, "=", 1)
        assert v.status == "fail" and v.reason == "Execution error" and "not a list" in v.error


def test_city_name_match_neither_strips_nor_rejects_the_empty_name():
    args = {"key": "city", "values": ["Paris, France"]}
    assert _one("json", {"city": "paris"}, "google_maps.city_name_match", None, args).status == "pass"
    assert _one("json", {"city": " Paris "}, "google_maps.city_name_match", None, args).status == "fail"
    assert _one("json", {"city": ""}, "google_maps.city_name_match", None, args).status == "pass"


def test_place_in_cities_visited_of_routes_matches_the_place_inside_the_city():
    answer = {"routes": [{"cities_visited": ["San Jose, CA"]}]}
    op = "google_maps.place_in_cities_visited_of_routes"
    assert _one("json", answer, op, None, ["San Jose"]).status == "pass"
    assert _one("json", {"routes": [{"cities_visited": ["Jose"]}]}, op, None, ["San Jose"]).status == "fail"


def test_places_in_cities_visited_is_exact_and_a_string_is_a_substring_test():
    op = "google_maps.places_in_cities_visited"

    def answer(visited, city):
        return {"routes": [{"cities_visited": visited, "rest_stops": [{"city": city}]}]}

    assert _one("json", answer(["Coalinga"], "Coalinga"), op, None, "rest_stops").status == "pass"
    assert _one("json", answer(["Coalinga"], "coalinga"), op, None, "rest_stops").status == "fail"
    assert _one("json", answer("Kanazawa, Toyama", "Toyama"), op, None, "rest_stops").status == "pass"


def test_city_different_from_rest_stops_compares_the_sets_of_cities():
    op = "google_maps.city_different_from_rest_stops"

    def answer(rest, scenic):
        return {"routes": [{"rest_stops": [{"city": c} for c in rest],
                            "scenic_viewpoints": [{"city": c} for c in scenic]}]}

    assert _one("json", answer(["A", "b"], ["a", "B"]), op).status == "fail"  # the same set, case-blind
    assert _one("json", answer(["A"], ["A", "B"]), op).status == "pass"  # overlapping but different sets pass


def test_stop_include_keys_iterates_a_single_object_as_its_keys():
    op, args = "google_maps.stop_include_keys", {"keys": ["name", "place id"]}
    assert _one("json -> get(stops)", {"stops": [{"name": "x", "place id": "1"}]}, op, None, args).status == "pass"
    single = _one("json -> get(stops)", {"stops": {"name": "x", "place id": "1"}}, op, None, args)
    assert single.status == "fail" and single.reason == "place id must in stop"  # "place id" is not in "name"


def test_place_not_in_cities_visited_of_routes_always_raises_on_its_list_argument(task_files):
    task = task_files["location_navigation/google_maps_task_0005"]
    config = next(e for e in task["evaluators"] if e.get("op") == "google_maps.place_not_in_cities_visited_of_routes")
    v = asyncio.run(official.evaluate(config, json.dumps({"routes": [{"cities_visited": ["Olympia"]}]})))
    assert v.status == "fail" and v.reason == "Execution error"


def test_the_judge_reply_is_read_after_the_first_lower_case_correct_and_yes_is_case_sensitive():
    op, args = official.JUDGE_OP, {"question": "q", "correct_answer": "A"}

    def verdict(reply):
        services = official.Services(handlers={"llm-judge": lambda messages: reply})
        return _one("raw", "A", op, None, args, services)

    assert verdict("reasoning: r\ncorrect: yes").status == "pass"
    assert verdict("correct: Yes").status == "fail"
    assert verdict("Correct: yes").reason.startswith("ERROR")  # no lower-case "correct:": the split fails
    assert verdict("correct: no, not yes").status == "pass"  # "yes" anywhere after the first "correct:"
    assert verdict("correct: no\nextra: yes").status == "pass"
    assert verdict("correct: no").status == "fail"


def test_validate_location_and_are_stops_different_are_decided_offline():
    stops = [{"name": "Lumen Field Stadium"}]
    assert _one("raw", "x", "google_maps.validate_location").status == "fail"  # malformed: no service either
    assert _one("json -> get(stops)", {"stops": stops}, "google_maps.validate_location", None,
                ["stadium"]).status == "pass"
    assert _one("json -> get(stops)", {"stops": stops}, "google_maps.validate_location", None,
                ["museum"]).status == "fail"
    same = {"route_1_stops": [{"name": "A", "place id": "1"}], "route_2_stops": [{"name": "A", "place id": "1"}]}
    assert _one("json", same, "google_maps.are_stops_different").status == "fail"
    same["route_2_stops"][0]["place id"] = "2"
    assert _one("json", same, "google_maps.are_stops_different").status == "pass"


def test_malformed_answers_and_pre_checks_fail_before_any_service(task_files):
    for task_id in ("financial_analysis/yfinance_task_0001", "browser_automation/playwright_booking_task_0001",
                    "location_navigation/google_maps_task_0001"):
        evaluators = task_files[task_id]["evaluators"]
        for answer in ("", "not json", "[]", "null"):
            verdict = ours(evaluators, answer)
            assert verdict.status == "fail", (task_id, answer, verdict.to_dict())
    # a well-formed answer reaches the service
    assert ours(task_files["financial_analysis/yfinance_task_0001"]["evaluators"],
                json.dumps({"total value": 1.0, "total percentage return": 1.0})).needs == ["yfinance"]


def test_nothing_reaches_the_network_or_stdout(task_files, capfd):
    for task_id in ("multi_server/multi-server_task_google_search_notion_0002", "3d_design/blender_task_0001",
                    "location_navigation/google_maps_task_0001"):
        verdict = ours(task_files[task_id]["evaluators"], json.dumps({"stops": [], "routes": []}))
        assert verdict.status in ("needs", "fail")
    out, _ = capfd.readouterr()
    assert out == ""  # the official modules' print() calls are kept with the verdict, not written


def test_success_rate_divides_by_all_tasks_and_the_decided_rate_is_next_to_it():
    records = [{"id": "a", "domain": "Web", "status": "pass"}, {"id": "b", "domain": "Web", "status": "fail"},
               {"id": "c", "domain": "Web", "status": "needs", "needs": ["llm-judge"]},
               {"id": "d", "domain": "Web", "status": "error"}]
    table = scores.success_rates(records)["table"]
    assert table["Web"]["sr"] == 1 / 4 and table["Web"]["sr_decidable"] == 1 / 2
    assert table["Web"]["partial"] and table["Overall"]["partial"]  # 4 of the paper's 55 web tasks
    text = scores.markdown(scores.success_rates(records))
    assert "| SR % (all tasks, official) | – | – | – | – | – | 25.00 (partial) | 25.00 (partial) |" in text
    assert "| SR % (decided here only) | – | – | – | – | – | 50.00 | 50.00 |" in text
    assert "– : not in this run." in text


def test_a_task_keeps_the_files_evaluators_for_the_official_code(task_files):
    loaded = tasks.task_index(MCPU, env={})
    for task_id, task in task_files.items():
        if task_id in loaded:
            assert loaded[task_id].evaluators == (task.get("evaluators") or [])
