"""Text an environment returns ends up inside awm's own JSONL records (``events.jsonl``, ``results.jsonl``, exported
samples), written with non-ASCII characters raw. awm read them back with ``str.splitlines``, which also splits at
U+2028, U+2029, U+0085 and U+001C–U+001E — characters JSON leaves raw in strings — so one tool answer holding a
U+2028 broke its record's line in two (found by attacking awm as a hostile environment author would; the test fails
while the gap is open): ``awm agent replay`` of the run crashed with a JSON error, and training export dropped the
rollout's turns."""
from __future__ import annotations

import asyncio
import json

from tinyenv import make_env_dir

from awm_engine.agent.policies import OraclePolicy
from awm_engine.agent.replay import RunReplay
from awm_engine.data.catalog import Catalog
from awm_engine.eval.episode import run_episode
from awm_engine.train.export import read_records, write_records

SEPARATORS = '''
@app.get("/api/separators", summary="Separators", description="Text with line separators.", tags=["x"], operation_id="separators")
async def separators():
    return {"text": "one\\u2028two\\u2029three\\x85four\\x1cfive"}
'''


def test_a_line_separator_in_a_tool_answer_does_not_break_the_runs_records(tmp_path):
    catalog = Catalog.load([make_env_dir(tmp_path / "d", {"Separators": SEPARATORS})])
    solution = {"calls": [{"tool": "separators", "arguments": {}}, {"tool": "list_notes", "arguments": {}}],
                "final_answer": "done"}
    outcome = asyncio.run(run_episode(catalog, catalog.get("separators"), 0, OraclePolicy(solution),
                                      run_dir=tmp_path / "run", verify_mode=None))
    assert outcome.failure is None, outcome.failure
    assert "\u2028" in (tmp_path / "run" / "events.jsonl").read_text()  # written raw, as JSON allows
    replay = RunReplay(tmp_path / "run")
    tools = [step.tool for step in replay.steps if step.tool]
    assert tools == ["separators", "list_notes"], tools
    assert any("\u2028" in (step.observation or "") for step in replay.steps)


def test_exported_samples_with_a_line_separator_read_back_whole(tmp_path):
    rows = [{"messages": [{"role": "tool", "content": "a\u2028b\x85c"}]}, {"messages": []}]
    path = tmp_path / "samples.jsonl"
    write_records(rows, path)
    # every message read back whole (an export writes each message with the same fields: null where absent)
    assert [[m["content"] for m in r["messages"]] for r in read_records(path)] == \
        [[m["content"] for m in r["messages"]] for r in rows]
