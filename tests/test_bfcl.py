"""BFCLv3 through awm (``awm bench bfcl``), scored by the official checkers of the bfcl-eval wheel.

Needs the wheel (``make bfcl``, which ``make test`` runs): without it every test here skips, saying so."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awm_engine.bench.bfcl import wheel

pytestmark = pytest.mark.skipif(wheel.problem() is not None,
                                reason=f"{wheel.problem()} (these tests need the bfcl-eval wheel)")

if wheel.problem() is None:
    from awm_engine.agent.policies import AssistantTurn
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.bfcl import data, ground_truth, prompting
    from awm_engine.bench.bfcl.categories import (
        CATEGORIES,
        GROUPS,
        UNSATISFIABLE,
        UNSATISFIABLE_PROMPT,
        category_of,
    )
    from awm_engine.bench.bfcl.sandboxed import CheckerHost
    from awm_engine.cli import main as awm
    from awm_engine.eval.results import read_records
    from awm_engine.sandbox.host import protections


@pytest.fixture(scope="module")
def host():
    with CheckerHost() as checker:
        yield checker


def fc(calls: list[tuple[str, dict]]) -> list[dict[str, str]]:
    return [{name: json.dumps(args)} for name, args in calls]


def verdict(host, entry_id: str, raw, mode: str = "fc") -> dict:
    kind = "check" if entry_id.startswith("multi_turn") else "score"
    return host.call(kind, entry_id=entry_id, raw=raw, mode=mode)["verdict"]


def error_type(v: dict) -> str | None:
    return v.get("error_type") or (v.get("error") or {}).get("error_type") if isinstance(v.get("error"), dict) \
        else v.get("error_type")


# -- the official verdicts --------------------------------------------------------------------------------

def test_deliberately_wrong_answers_get_the_official_verdicts(host):
    right = {"base": 10, "height": 5}
    assert verdict(host, "simple_python_0", fc([("calculate_triangle_area", right)]))["valid"] is True
    cases = {
        "value_error:others": fc([("calculate_triangle_area", {"base": 11, "height": 5})]),  # wrong value
        "type_error:simple": fc([("calculate_triangle_area", {"base": "10", "height": 5})]),  # wrong type
        "simple_function_checker:missing_required": fc([("calculate_triangle_area", {"base": 10})]),
        "simple_function_checker:wrong_func_name": fc([("calculate_circle_area", right)]),  # wrong function
        "simple_function_checker:wrong_count": fc([("calculate_triangle_area", right)] * 2),  # an extra call
        "simple_function_checker:unexpected_param": fc([("calculate_triangle_area", {**right, "shape": "x"})]),
        "ast_decoder:decoder_failed": "The area is 25 square units.",  # prose instead of a call
    }
    for expected, raw in cases.items():
        v = verdict(host, "simple_python_0", raw)
        assert v["valid"] is False and v["error_type"] == expected, (expected, v)
        assert v["error"]  # the checker's reason comes with it
    # int for a float parameter is accepted, a float for an integer one is not (exact Python types)
    assert verdict(host, "simple_python_0", fc([("calculate_triangle_area", {"base": 10.0, "height": 5})]))[
        "error_type"] == "type_error:simple"
    # irrelevance: any call is wrong; text is right. relevance: the reverse
    assert verdict(host, "irrelevance_0", "I cannot answer that with these functions.")["valid"] is True
    name = data.entries("irrelevance")[0].prompt["function"][0]["name"].replace(".", "_")
    assert verdict(host, "irrelevance_0", fc([(name, {})]))["error_type"] == "irrelevance_error:decoder_success"
    assert verdict(host, "live_relevance_0-0-0", "no call")["error_type"] == "relevance_error:decoder_failed"


def test_function_names_fc_mode_sends_with_underscores_and_prompt_mode_with_dots(host):
    entry = next(e for e in data.entries("simple") if "." in e.prompt["function"][0]["name"])
    calls = ground_truth.expected_calls(ground_truth.raw_functions(entry), entry.ground_truth)
    dotted = calls[0][0]
    assert verdict(host, entry.id, fc([(dotted.replace(".", "_"), calls[0][1])]))["valid"] is True
    assert verdict(host, entry.id, fc(calls))["error_type"] == "simple_function_checker:wrong_func_name"
    text = prompting.raw_output(ground_truth.answer_calls(calls, "prompt"), "prompt")
    assert dotted in text and verdict(host, entry.id, text, "prompt")["valid"] is True
    assert verdict(host, entry.id, text.replace(dotted, dotted.replace(".", "_")), "prompt")[
        "error_type"] == "simple_function_checker:wrong_func_name"


def _multi_turn_raw(entry, turns: list[list[str]]) -> list[list]:
    docs = {d["name"]: d for d in entry.prompt["function"]}
    return [[fc([ground_truth.parse_call(c, docs) for c in calls])] if calls else [] for calls in turns]


def test_multi_turn_state_and_responses_are_checked_officially(host):
    entry = data.entries("multi_turn_base")[0]
    turns = [list(t) for t in entry.ground_truth]
    good = verdict(host, entry.id, _multi_turn_raw(entry, turns))
    assert good["valid"] is True
    wrong = [list(t) for t in turns]
    wrong[0] = wrong[0] + ["mkdir(dir_name='not_asked_for')"]  # a call that changes the state wrongly
    v = verdict(host, entry.id, _multi_turn_raw(entry, wrong))
    assert v["valid"] is False and error_type(v) == "multi_turn:instance_state_mismatch"
    assert "GorillaFileSystem" in v["error"]["error_message"]
    dropped = [list(t) for t in turns]
    dropped[-1] = dropped[-1][:-1]  # the final diff is never made
    assert verdict(host, entry.id, _multi_turn_raw(entry, dropped))["valid"] is False
    assert error_type(verdict(host, entry.id, _multi_turn_raw(entry, turns[:2]))) == "multi_turn:force_terminated"
    # the per-turn states (for display) say where the model's backends differ from the ground truth's
    states = host.call("states", entry_id=entry.id, raw=_multi_turn_raw(entry, wrong), mode="fc")["states"]
    assert states[0]["classes"]["GorillaFileSystem"]["match"] is False
    assert "root" in states[0]["classes"]["GorillaFileSystem"]["differences"]


def test_every_request_starts_from_fresh_backends(host):
    """Backends cache their instances in module globals: a second rollout of the same entry must not see the
    first one's state (each request runs in its own child of a host that never ran a backend)."""
    entry_id = "multi_turn_base_0"
    first = host.call("execute", entry_id=entry_id, previous=[], raw=fc([("mkdir", {"dir_name": "fresh"})]), mode="fc")
    again = host.call("execute", entry_id=entry_id, previous=[], raw=fc([("mkdir", {"dir_name": "fresh"})]), mode="fc")
    assert first["results"] == again["results"] and "rror" not in first["results"][0]
    # previous steps are replayed: now the directory exists
    replayed = host.call("execute", entry_id=entry_id, previous=[["mkdir(dir_name='fresh')"]],
                         raw=fc([("mkdir", {"dir_name": "fresh"})]), mode="fc")
    assert replayed["results"] != first["results"]


def test_model_output_is_evaluated_only_inside_the_sandbox(host, tmp_path):
    if not protections().writes_confined:
        pytest.skip("this host cannot confine writes (Landlock); the sandbox reports it")
    marks = [tmp_path / "from_decoder", tmp_path / "from_backend_call"]
    # prompt-mode decoding eval()s arithmetic in arguments; a multi-turn call string is eval()ed whole
    text = f"[calculate_triangle_area(base=__import__('pathlib').Path('{marks[0]}').write_text('x') + 10, height=5)]"
    v = verdict(host, "simple_python_0", text, "prompt")
    assert v["valid"] is False
    name = f"__import__('pathlib').Path('{marks[1]}').write_text('x') or ls"
    step = host.call("execute", entry_id="multi_turn_base_0", previous=[], raw=[{name: "{}"}], mode="fc")
    assert "Error during execution" in step["results"][0]
    assert not any(m.exists() for m in marks)


# -- runs -------------------------------------------------------------------------------------------------

def _run(args: list[str], capsys=None) -> int:
    code = awm(["bench", "bfcl", *args])
    if capsys is not None:
        capsys.readouterr()
    return code


def _incorrect(run_dir: Path) -> dict[str, str]:
    records = read_records(run_dir / "results.jsonl")
    assert all(r["status"] == "ok" for r in records), [r.get("error") for r in records if r["status"] != "ok"][:3]
    return {r["entry_id"]: r["error_type"] for r in records if not r["valid"]}


# the full data in parts (each well under two minutes on a quiet machine): the single-turn groups, then each
# multi-turn category
GROUND_TRUTH_PARTS = ["non_live", "live", "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                      "multi_turn_long_context"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("part", GROUND_TRUTH_PARTS)
def test_ground_truth_scores_100_percent_except_the_unsatisfiable_entries(part, tmp_path, capsys):
    """Every entry, FC mode; the report names each entry no answer can pass."""
    out = tmp_path / "gt-fc"
    names = GROUPS.get(part, [part])
    assert _run(["run", "--policy", "ground-truth", "--categories", *names, "--concurrency", "16", "--out", str(out),
                 "--quiet"], capsys) == 0
    unsatisfiable = {e: r for e, r in UNSATISFIABLE.items() if category_of(e).name in names}
    assert _incorrect(out).keys() == unsatisfiable.keys()
    meta = json.loads((out / "metadata.json").read_text())
    assert set(meta["categories"]) >= set(names)
    for name in names:
        row = meta["categories"][name]
        unsat = sum(1 for eid in unsatisfiable if category_of(eid).name == name)
        assert (row["scored"], row["correct"]) == (CATEGORIES[name].size, CATEGORIES[name].size - unsat), name
    for name in names:
        if CATEGORIES[name].kind in ("irrelevance", "multi_turn"):
            assert meta["categories"][name]["accuracy"] == 1.0, name
    assert meta["complete"] is True  # every entry asked for was scored
    assert _run(["report", str(out), "--markdown"]) == 0
    report = capsys.readouterr().out
    for entry_id, reason in unsatisfiable.items():
        assert f"`{entry_id}` (incorrect): {reason}" in report
    assert "Overall = mean(Non-Live, Live, Multi-Turn)" in report and "v4 (the bfcl-eval wheel's formula)" in report


@pytest.mark.timeout(900)
def test_ground_truth_in_prompt_mode_fails_only_the_unsatisfiable_and_the_java_quirk(tmp_path, capsys):
    """Prompt mode over every single-turn entry (and a few of each multi-turn category): the Java decoder's
    quirks are the only additional failures."""
    out = tmp_path / "gt-prompt"
    assert _run(["run", "--policy", "ground-truth", "--mode", "prompt", "--group", "non_live", "--concurrency",
                 "16", "--out", str(out), "--quiet"], capsys) == 0
    assert _run(["run", "--policy", "ground-truth", "--mode", "prompt", "--categories", *GROUPS["live"],
                 "--out", str(tmp_path / "gt-prompt-live"), "--concurrency", "16", "--quiet"], capsys) == 0
    assert _run(["run", "--policy", "ground-truth", "--mode", "prompt", "--group", "multi_turn", "--limit", "5",
                 "--out", str(tmp_path / "gt-prompt-mt"), "--quiet"], capsys) == 0
    failed = {**_incorrect(out), **_incorrect(tmp_path / "gt-prompt-live"), **_incorrect(tmp_path / "gt-prompt-mt")}
    assert failed.keys() == {**UNSATISFIABLE, **UNSATISFIABLE_PROMPT}.keys()
    assert _run(["report", str(out), "--markdown"]) == 0
    report = capsys.readouterr().out
    for entry_id in ("simple_java_1", "simple_java_67", "simple_java_68", "simple_java_35", "simple_java_85"):
        assert f"`{entry_id}` (incorrect)" in report


def _scripted(entries, mode: str, wrong: set[str]) -> dict:
    """A script for the scripted LLM: each entry's ground-truth turns (found by its first question), except
    ``wrong`` entries, which get a deliberately wrong first answer."""
    rules = []
    for entry in entries:
        turns = ground_truth.script(entry, mode)
        if entry.id in wrong:
            turns = [AssistantTurn("I would rather not call anything.")] if entry.category.kind != \
                "irrelevance" else [ground_truth.answer_calls([(entry.prompt["function"][0]["name"], {})], mode)]
        responses = [{"content": t.content or None, **({"tool_calls": [{"name": c.name, "arguments": c.arguments}
                                                                        for c in t.tool_calls]} if t.tool_calls else {})}
                     for t in turns] + [{"content": "Done."}]
        question = next(m["content"] for m in entry.prompt["question"][0] if m["role"] == "user")
        rules.append({"match": question, "responses": responses})
    return {"rules": rules, "responses": [{"content": "unexpected request"}]}


# one entry of each category; the multi-turn categories share their first questions index by index, so a
# different index each (the scripted model recognises a conversation by its first question)
SUBSET = [f"{CATEGORIES[c].wheel}_0" for c in GROUPS["non_live"]] + [
    "live_simple_0-0-0", "live_multiple_0-0-0", "live_parallel_0-0-0", "live_parallel_multiple_0-0-0",
    "live_irrelevance_0-0-0", "live_relevance_0-0-0", "multi_turn_base_0", "multi_turn_miss_func_1",
    "multi_turn_miss_param_2", "multi_turn_long_context_3"]


@pytest.mark.parametrize("mode", ["fc", "prompt"])
def test_end_to_end_with_the_scripted_llm(tmp_path, capsys, mode):
    """One entry of every category through the openai client against the scripted server; one answer per group
    is deliberately wrong."""
    found = data.by_id(list(CATEGORIES))
    entries = [found[e] for e in SUBSET]
    wrong = {"simple_python_0", "live_irrelevance_0-0-0", "multi_turn_miss_func_1"}
    out = tmp_path / f"scripted-{mode}"
    with FakeLLMServer(_scripted(entries, mode, wrong)) as llm:
        assert _run(["run", "--model", "scripted-model", "--base-url", llm.url, "--mode", mode, "--entries",
                     *SUBSET, "--out", str(out), "--quiet"], capsys) == 0
        requests = list(llm.requests)
    records = {r["entry_id"]: r for r in read_records(out / "results.jsonl")}
    assert set(records) == set(SUBSET)
    assert {eid for eid, r in records.items() if not r["valid"]} == wrong
    assert records["simple_python_0"]["error_type"] == "ast_decoder:decoder_failed"
    assert records["live_irrelevance_0-0-0"]["error_type"] == "irrelevance_error:decoder_success"
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["categories"]["multi_turn_base"]["accuracy"] == 1.0 and meta["model"] == "scripted-model"
    # what the model was sent: BFCL's tools (dots replaced) in FC mode, awm's system prompt in prompt mode
    tools = [r.get("tools") for r in requests if r.get("tools")]
    if mode == "fc":
        assert tools and all("." not in t["function"]["name"] for ts in tools for t in ts)
        assert all(r["messages"][0]["role"] != "system" or "JSON format" not in r["messages"][0]["content"]
                   for r in requests)
    else:
        assert not tools
        assert all(r["messages"][0]["role"] == "system" and prompting.CALL_FORMAT in r["messages"][0]["content"]
                   for r in requests)
    # multi-turn: turn by turn, results fed back, the held-out function arrives at its turn
    base = records["multi_turn_base_0"]
    assert len(base["turns"]) == len(data.entries("multi_turn_base")[0].ground_truth)
    assert base["turns"][0]["steps"][0]["results"] and base["turns"][0]["state"]["classes"]
    miss = next(r for r in requests if "I have updated some more functions" in json.dumps(r["messages"]))
    held = found["multi_turn_miss_func_1"].prompt["missed_function"]
    if mode == "fc":
        names = {t["function"]["name"] for t in miss["tools"]}
        assert all(d["name"] in names for docs in held.values() for d in docs)
    assert records["multi_turn_miss_func_1"]["held_out"]
    # BFCL's own result files were written, and BFCL's format scores the same
    files = sorted((out / "bfcl" / "result").rglob("*_result.json"))
    assert len(files) == len(CATEGORIES)
    assert _run(["score", *map(str, files), "--out", str(tmp_path / "score"), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["mode"] == mode
    assert {k: v["correct"] for k, v in scored["categories"].items()} == \
        {k: v["correct"] for k, v in meta["categories"].items()}
    header = json.loads((tmp_path / "score" / "scripted-model" / "non_live" /
                         "BFCL_v4_simple_python_score.json").read_text().splitlines()[0])
    assert header == {"accuracy": 0.0, "correct_count": 0, "total_count": 1}


def test_score_reads_v3_era_result_files(tmp_path, capsys):
    path = tmp_path / "result" / "some-model" / "BFCL_v3_simple_result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"id": "simple_0", "result": "[calculate_triangle_area(base=10, height=5)]"}) + "\n" +
                    json.dumps({"id": "simple_1", "result": "no idea"}) + "\n")
    assert _run(["score", str(path), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["mode"] == "prompt" and scored["categories"]["simple"]["correct"] == 1
    assert scored["categories"]["simple"]["scored"] == 2


def test_a_killed_run_resumes_with_every_entry_exactly_once(tmp_path):
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "awm_engine.cli", "bench", "bfcl", "run", "--policy", "ground-truth",
            "--categories", "simple", "multi_turn_base", "--limit", "25", "--concurrency", "2", "--quiet"]
    (tmp_path / "tmp").mkdir()  # what the killed run leaves (its checker host's directories) stays in the test's
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen(argv + ["--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    results = out / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 8):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    before = len(results.read_text().splitlines())
    assert 8 <= before < 50
    with open(results, "a") as fh:  # a line torn by the crash
        fh.write('{"format_version": 1, "id": "simple_python_3/0", "status": "o')
    # one writer at a time: a second run into the directory while one holds it is refused
    code = subprocess.run(argv + ["--resume", str(out)], capture_output=True, text=True, timeout=600)
    assert code.returncode == 0, code.stderr
    records = [json.loads(line) for line in results.read_text().splitlines()]
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == 50
    assert all(r["status"] == "ok" and r["valid"] for r in records)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["totals"]["correct"] == 50 and meta["complete"] is True
    # awm eval's commands point at awm bench bfcl for a BFCL run
    assert awm(["eval", "report", str(out)]) == 2


def test_missing_wheel_and_bad_input_are_reported(tmp_path, capsys, monkeypatch):
    assert _run(["run", "--policy", "ground-truth", "--categories", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "unknown BFCL category 'nope'" in capsys.readouterr().err
    assert _run(["report", str(tmp_path)]) == 2
    monkeypatch.setattr(wheel, "problem", lambda: f"BFCL is not installed: {wheel.SETUP_HINT}")
    assert _run(["run", "--policy", "ground-truth", "--out", str(tmp_path / "y")]) == 2
    assert "make bfcl" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()


# -- the TUI ---------------------------------------------------------------------------------------------

async def test_the_dashboard_shows_a_bfcl_run_and_opens_an_entry(tmp_path):
    from awm_tui.app import AwmApp
    from awm_tui.screens.bfcl import BfclEntryScreen
    from awm_tui.screens.evals import EvalScreen
    from awm_tui.widgets.virtual_table import VirtualTable

    out = tmp_path / "eval" / "bfcl-gt"
    import asyncio

    assert await asyncio.to_thread(awm, ["bench", "bfcl", "run", "--policy", "ground-truth", "--entries",
                                         "simple_python_0", "simple_java_36", "multi_turn_base_0", "--out", str(out),
                                         "--quiet"]) == 0
    app = AwmApp(None, cursor_blink=False, runs_root=tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.press("ctrl+e")
        screen = app.screen
        assert isinstance(screen, EvalScreen)
        categories = screen.query_one("#scenario-table", VirtualTable)
        entries = screen.query_one("#rollout-table", VirtualTable)
        for _ in range(100):
            await pilot.pause(0.1)
            if entries.row_count == 3:
                break
        head = str(screen.query_one("#run-head").render())
        assert "BFCLv3" in head and "entries 3/3" in head and "v3 Overall" in head and "finished" in head
        assert categories.columns[:2] == ["category", "group"]
        assert categories.get_row_at(0)[:5] == ["simple", "non_live", "1", "1/1", "100.00"]
        assert categories.get_row_at(1)[:5] == ["java", "non_live", "0", "1/1", "0.00"]
        rows = {entries.get_row_at(i)[0]: entries.get_row_at(i) for i in range(3)}
        assert rows["simple_java_36"][4:] == ["incorrect", "value_error:list/tuple"]
        # an entry: the verdict with its reason, the prompt, the functions, raw and decoded output
        entries.focus()
        entries.cursor_row = [entries.get_row_at(i)[0] for i in range(3)].index("simple_java_36")
        await pilot.press("enter")
        await pilot.pause(0.3)
        view = app.screen
        assert isinstance(view, BfclEntryScreen)
        text = "\n".join(str(w.render()) for w in view.query(".bfcl-section"))
        for part in ("INVALID", "value_error:list/tuple", "Invalid value for parameter 'parts'", "prompt",
                     "functions offered", "raw output", "decoded calls", "possible answer"):
            assert part in text, part
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.screen is screen
        # a multi-turn entry: each turn's steps and the backends' state next to the ground truth's
        entries.focus()
        entries.cursor_row = [entries.get_row_at(i)[0] for i in range(3)].index("multi_turn_base_0")
        await pilot.press("enter")
        await pilot.pause(0.3)
        text = "\n".join(str(w.render()) for w in app.screen.query(".bfcl-section"))
        assert "VALID" in text and "turn 3" in text and "state after the turn vs the ground truth's" in text
        assert "GorillaFileSystem: same" in text and "mkdir(dir_name='temp')" in text
