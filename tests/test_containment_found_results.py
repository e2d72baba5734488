"""Attacks on what awm writes and counts (found by a hostile review): each failed before its fix.

- A model's answer (or a verifier's value) holding a lone surrogate (the JSON escape ``"\\ud800"``, which Python
  decodes into a string no UTF-8 file can hold) made awm's results writer raise: one hostile BFCL answer aborted the
  whole run — every entry after it, and every resume after that (the same answer again) — and ``verify_run``
  crashed instead of recording the verifier's value.
- ``awm bench bfcl score`` counted an entry answered twice (in one result file, or in two files of the same model)
  twice: one correct answer repeated outweighed every wrong one. BFCL's own runner refuses such files (its lengths
  no longer match).
"""
from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from awm_engine.bench.bfcl import wheel
from awm_engine.eval.results import ResultsWriter, read_records

needs_wheel = pytest.mark.skipif(wheel.problem() is not None,
                                 reason=f"{wheel.problem()} (this test needs the bfcl-eval wheel)")


def test_a_lone_surrogate_is_written_and_read_back_exactly(tmp_path):
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path)
    writer.write({"id": "a", "status": "ok", "answer": "x\ud800y", "text": "é"})
    writer.write({"id": "b", "status": "ok", "answer": "plain é"})
    writer.close()
    records = {r["id"]: r for r in read_records(path)}
    assert records["a"]["answer"] == "x\ud800y" and records["a"]["text"] == "é"
    assert records["b"]["answer"] == "plain é" and "plain é" in path.read_text(encoding="utf-8")


@needs_wheel
def test_a_hostile_bfcl_answer_cannot_abort_the_run(tmp_path, capsys):
    """The model's call arguments decode to a lone surrogate: its entry is scored (incorrect), the others run."""
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.bfcl import data
    from awm_engine.cli import main as awm

    first, second = data.entries("simple")[0], data.entries("simple")[1]

    def question(entry):
        return next(m["content"] for m in entry.prompt["question"][0] if m["role"] == "user")

    name = first.prompt["function"][0]["name"].replace(".", "_")
    script = {"rules": [
        {"match": question(first), "responses": [{"tool_calls": [{"name": name,
                                                                   "arguments": '{"base": "\\ud800"}'}]}]},
        {"match": question(second), "responses": [{"content": "I would rather not call anything."}]}],
        "responses": [{"content": "unexpected"}]}
    out = tmp_path / "run"
    with FakeLLMServer(script) as llm:
        code = awm(["bench", "bfcl", "run", "--model", "m", "--base-url", llm.url, "--mode", "fc", "--entries",
                    first.id, second.id, "--out", str(out), "--quiet", "--concurrency", "1"])
    capsys.readouterr()
    records = {r["entry_id"]: r for r in read_records(out / "results.jsonl")}
    assert set(records) == {first.id, second.id}, records.keys()
    assert all(r["status"] == "ok" and r["valid"] is False for r in records.values())
    assert "\ud800" in json.dumps(records[first.id]["decoded"], ensure_ascii=False)  # kept exactly
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["complete"] is True and meta["totals"]["scored"] == 2
    assert code == 0


VERIFIER = '''
def verify_task_completion(initial_db_path, final_db_path, final_answer):
    return {"result": "complete", "note": "odd\\ud800text"}
'''


def test_a_verifiers_lone_surrogate_is_its_own_value_not_an_awm_crash(tmp_path):
    from tinyenv import make_env_dir

    from awm_engine.data.catalog import Catalog
    from awm_engine.verify.verification import verify_run

    data = make_env_dir(tmp_path / "d", {"Odd": ""})
    (data / "gen_verifier.pure_code.jsonl").write_text(
        json.dumps({"scenario": "Odd", "task_idx": 0, "verification": {"code": VERIFIER}}) + "\n")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("initial.db", "final.db"):
        sqlite3.connect(run / name).close()
    (run / "trajectory.json").write_text(json.dumps({"scenario": "odd", "task_id": 0, "task": "t", "messages": []}))
    report = asyncio.run(verify_run(run, "code", Catalog.load([data])))
    assert report.label == "complete", report.to_dict()
    written = json.loads((run / "verify.json").read_text(encoding="utf-8"))
    assert written["code"]["result"]["raw_result"]["note"] == "odd\ud800text"
    assert json.loads((run / "verify.code.json").read_text(encoding="utf-8"))["reward_type"] == "complete"


def _result_file(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


RIGHT = "[calculate_triangle_area(base=10, height=5)]"


@needs_wheel
@pytest.mark.parametrize("layout", ["one file", "two files", "v3 and v4 names"])
def test_bfcl_score_never_counts_an_entry_twice(tmp_path, capsys, layout):
    from awm_engine.cli import main as awm

    folder = tmp_path / "result" / "model" / "non_live"
    wrong = [{"id": f"simple_python_{i}", "result": "no idea"} for i in range(1, 4)]
    if layout == "one file":
        files = [_result_file(folder / "BFCL_v4_simple_python_result.json",
                              [{"id": "simple_python_0", "result": RIGHT}] * 4 + wrong)]
    elif layout == "two files":
        files = [_result_file(folder / "BFCL_v4_simple_python_result.json",
                              [{"id": "simple_python_0", "result": RIGHT}] + wrong),
                 _result_file(tmp_path / "result" / "model" / "BFCL_v4_simple_python_result.json",
                              [{"id": "simple_python_0", "result": RIGHT}] * 3)]  # the same model's folder
    else:
        files = [_result_file(folder / "BFCL_v4_simple_python_result.json",
                              [{"id": "simple_python_0", "result": RIGHT}] + wrong),
                 _result_file(folder / "BFCL_v3_simple_result.json", [{"id": "simple_0", "result": RIGHT}] * 3)]
    code = awm(["bench", "bfcl", "score", *map(str, files), "--json"])
    captured = capsys.readouterr()
    if code == 0:
        scored = json.loads(captured.out)
        pytest.fail(f"scored {scored['categories']['simple']['correct']} of {scored['categories']['simple']['scored']}"
                    " with one correct answer repeated")
    assert code == 2 and "simple_python_0" in captured.err and "more than once" in captured.err, captured.err


@needs_wheel
def test_an_answer_that_breaks_the_checker_is_not_dropped_from_the_denominator(tmp_path, capsys):
    """An answer the official checker cannot check (nested 500 deep, it exceeds the recursion limit; a model's code
    that never returns times out the same way) made its entry an *error*, left out of the accuracy: a model could
    move every entry it could not answer out of its score. It is that entry's verdict: incorrect."""
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.bfcl import data, ground_truth
    from awm_engine.cli import main as awm

    hostile, honest = data.entries("simple")[0], data.entries("simple")[1]

    def question(entry):
        return next(m["content"] for m in entry.prompt["question"][0] if m["role"] == "user")

    name = hostile.prompt["function"][0]["name"].replace(".", "_")
    deep = '{"base": ' + "[" * 500 + "]" * 500 + ', "height": 5}'
    right = ground_truth.script(honest, "fc")[0]
    script = {"rules": [
        {"match": question(hostile), "responses": [{"tool_calls": [{"name": name, "arguments": deep}]}]},
        {"match": question(honest), "responses": [{"tool_calls": [{"name": c.name, "arguments": c.arguments}
                                                                   for c in right.tool_calls]}]}],
        "responses": [{"content": "unexpected"}]}
    out = tmp_path / "run"
    with FakeLLMServer(script) as llm:
        awm(["bench", "bfcl", "run", "--model", "m", "--base-url", llm.url, "--mode", "fc", "--entries",
             hostile.id, honest.id, "--out", str(out), "--quiet", "--concurrency", "1"])
    capsys.readouterr()
    meta = json.loads((out / "metadata.json").read_text())
    simple = meta["categories"]["simple"]
    assert (simple["correct"], simple["scored"], simple["errors"]) == (1, 2, 0), simple
    assert simple["accuracy"] == 0.5
    record = {r["entry_id"]: r for r in read_records(out / "results.jsonl")}[hostile.id]
    assert record["status"] == "ok" and record["valid"] is False and record["error_type"] == "awm:checker_error"
    assert "RecursionError" in json.dumps(record["verdict"])


@needs_wheel
def test_a_multi_turn_answer_whose_code_ends_its_process_is_not_dropped_from_the_denominator(tmp_path, capsys):
    """The same through a multi-turn rollout: the model's call ends the process that runs it (``os._exit``), every
    step of the entry fails: that is the entry's verdict, incorrect, not an error left out of the accuracy."""
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.bfcl import data
    from awm_engine.cli import main as awm

    entry = data.entries("multi_turn_base")[0]
    question = next(m["content"] for m in entry.prompt["question"][0] if m["role"] == "user")
    code = "import os; os._exit(3)"
    call = f"exec(bytes.fromhex('{code.encode().hex()}').decode(), {{}}) or ls"
    script = {"rules": [{"match": question, "responses": [{"tool_calls": [{"name": call, "arguments": "{}"}]}]}],
              "responses": [{"content": "Done."}]}
    out = tmp_path / "run"
    with FakeLLMServer(script) as llm:
        awm(["bench", "bfcl", "run", "--model", "m", "--base-url", llm.url, "--mode", "fc", "--entries", entry.id,
             "--out", str(out), "--quiet"])
    capsys.readouterr()
    record = read_records(out / "results.jsonl")[0]
    assert record["status"] == "ok" and record["valid"] is False, {k: record.get(k) for k in ("status", "error")}
    assert record["error_type"] == "awm:checker_error"
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["categories"]["multi_turn_base"]["scored"] == 1 and meta["totals"]["errors"] == 0


@needs_wheel
@pytest.mark.parametrize("result", [[1, 2], [None], ["text", 3], 7, {"a": 1}])
def test_a_malformed_multi_turn_answer_is_scored_not_an_awm_crash(tmp_path, capsys, result):
    """``--mode auto`` looked into every turn of a multi-turn answer as a list: a turn that is not one made
    ``awm bench bfcl score`` crash with a traceback. The answer is scored (incorrect) like any other."""
    from awm_engine.cli import main as awm

    path = _result_file(tmp_path / "result" / "model" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json",
                        [{"id": "multi_turn_base_0", "result": result}])
    assert awm(["bench", "bfcl", "score", str(path), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["entries"][0]["valid"] is False and scored["categories"]["multi_turn_base"]["scored"] == 1


def _nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def _at_depth(frames: int, fn):
    return fn() if frames == 0 else _at_depth(frames - 1, fn)


def test_every_line_the_writer_wrote_reads_back_from_any_stack_depth(tmp_path):
    """A line nested nearly to the recursion limit (a model's tool-call arguments are stored parsed) was written
    from the writer's shallow thread, but a reader a few dozen frames deeper (``awm eval report``, a resume's
    compaction, the dashboard) raised RecursionError on it: the whole results file became unreadable, and the run
    could never be resumed."""
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path)
    written = []
    for depth in range(960, 1000, 5):
        try:
            asyncio.run(writer.awrite({"id": f"d{depth}", "status": "ok", "arguments": _nested(depth)}))
            written.append(f"d{depth}")
        except RecursionError:
            pass  # too deep to write at all: never in the file
    writer.write({"id": "after", "status": "ok"})
    writer.close()
    assert written, "nothing deep enough was written to test the readers"
    from awm_engine.eval.results import ResultsIndex, compact

    for frames in (0, 60, 150):
        index = ResultsIndex(path)
        _at_depth(frames, index.refresh)
        assert index.order == written + ["after"], (frames, index.order)
        assert _at_depth(frames, lambda: index.record(written[-1]))["id"] == written[-1]
    assert _at_depth(60, lambda: compact(path, lambda s: s.get("status") == "ok")) == len(written) + 1


@needs_wheel
def test_a_multi_turn_answer_cannot_grow_awm_with_its_calls_results(tmp_path, capsys):
    """The model's call returns a huge string (its own code makes it): each step's results went whole into awm's
    memory, the next request to the model and the record — 50 MB a step took a run to gigabytes. What a step's
    calls return is kept up to 1 MB (honest BFCL results are at most ~32 KB a call), saying what was cut; the
    verdict, which executes the calls again in the sandbox, does not read it."""
    from awm_engine.agent.scripted_llm import FakeLLMServer
    from awm_engine.bench.bfcl import data
    from awm_engine.cli import main as awm

    STEP_CHARS = 1_000_000
    entry = data.entries("multi_turn_base")[0]
    question = next(m["content"] for m in entry.prompt["question"][0] if m["role"] == "user")
    code = "f = lambda *a, **k: 'x' * 5_000_000"
    call = f"(lambda ns: (exec(bytes.fromhex('{code.encode().hex()}').decode(), ns), ns['f'])[1])({{}})"
    steps = 3
    script = {"rules": [{"match": question, "responses": [{"tool_calls": [{"name": call, "arguments": "{}"}]}] * steps
                         + [{"content": "Done."}]}], "responses": [{"content": "Done."}]}
    out = tmp_path / "run"
    with FakeLLMServer(script) as llm:
        awm(["bench", "bfcl", "run", "--model", "m", "--base-url", llm.url, "--mode", "fc", "--entries", entry.id,
             "--out", str(out), "--quiet"])
        sent = [m for r in llm.requests for m in r["messages"] if m.get("role") == "tool"]
    capsys.readouterr()
    assert sent and max(len(m["content"]) for m in sent) <= STEP_CHARS + 200, max(len(m["content"]) for m in sent)
    assert "cut by awm" in sent[-1]["content"]
    record = read_records(out / "results.jsonl")[0]
    assert record["status"] == "ok" and record["valid"] is False
    # the calls' results twice (the messages, the steps), the official verdict's texts and the states view, each
    # bounded: 15 MB of results made a 45 MB line, and it grew with what the calls returned
    assert (out / "results.jsonl").stat().st_size < 2 * steps * (STEP_CHARS + 1000) + 2 * 2_000_000 + 1_000_000
