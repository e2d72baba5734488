"""The Parquet export in the shape chat templates read (issue 28, item 1): ``tool_calls`` a list of structs in
transformers' tool-use shape (never a JSON string; ``function.arguments`` the object the model wrote, of Arrow's
JSON type), one message type for meta and native rows, and a ``tools`` column with the tool schemas the endpoint
received (native: the scenario's tools; meta: none, they are in the system prompt), each of Arrow's JSON type.

The schema is checked field by field with pyarrow, which is what ``datasets`` reads Parquet with (its features
come from the Arrow schema; ``tests/test_train_consumers.py`` loads the same files with ``datasets``, TRL and verl
where they are installed)."""
from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow", reason="Parquet export needs awm's 'train' extra")
import pyarrow.parquet as pq  # noqa: E402

from awm_engine.cli import main as awm  # noqa: E402
from awm_engine.data.catalog import Catalog  # noqa: E402

SCENARIO = "maple_library_lending"


def export(tmp_path, mode, capsys):
    run = tmp_path / f"eval_{mode}"
    assert awm(["eval", "run", "--policy", "oracle", "--scenario", SCENARIO, "--task", "0", "-k", "1",
                "--mode", mode, "--workers", "1", "--quiet", "--out", str(run)]) == 0
    out = tmp_path / f"{mode}.parquet"
    assert awm(["train", "export", str(run), "--out", str(out)]) == 0
    capsys.readouterr()
    return pq.read_table(out)


def test_messages_and_tools_columns_have_the_chat_shape(tmp_path, capsys):
    native, meta = export(tmp_path, "native", capsys), export(tmp_path, "meta", capsys)
    call = pa.struct([("id", pa.string()), ("type", pa.string()),
                      ("function", pa.struct([("name", pa.string()), ("arguments", pa.json_())]))])
    message = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                                  ("tool_call_id", pa.string())]))
    for table in (native, meta):  # one message type in both modes: the files concatenate
        for column in ("prompt", "completion", "messages"):
            assert table.schema.field(column).type == message, column
    rows = native.to_pylist()
    first = next(r for r in rows if r["turn"] == 1)
    (target,) = first["completion"]
    (tc,) = target["tool_calls"]
    # the arguments the endpoint returned (a JSON string), stored as the JSON value they are: an object
    assert tc["type"] == "function" and isinstance(json.loads(tc["function"]["arguments"]), dict)
    # the tools column: the schemas the native requests carried, each its own JSON object, naming the tool the
    # target calls
    tools_type = native.schema.field("tools").type
    assert pa.types.is_list(tools_type) and isinstance(tools_type.value_type, pa.JsonType)
    tools = [json.loads(t) for t in first["tools"]]
    assert all(list(t) == ["type", "function"] and list(t["function"])[:2] == ["name", "description"]
               for t in tools)
    names = {t["function"]["name"] for t in tools}
    expected = {t["name"] for t in _tools()}
    assert names == expected and tc["function"]["name"] in names
    assert all([json.loads(t) for t in r["tools"]] == tools for r in rows)
    tool_results = [m for r in rows for m in r["messages"] if m["role"] == "tool"]
    assert tool_results and all(m["tool_call_id"] and m["tool_calls"] is None for m in tool_results)
    # meta mode: the request carried no tools (the meta-tools are in the system prompt), and no message has calls
    assert all(r["tools"] == [] for r in meta.to_pylist())
    assert all(m["tool_calls"] is None for r in meta.to_pylist() for m in r["messages"])


def _tools():
    import asyncio

    from awm_engine.runtime.pool import EnvPool

    async def go():
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(Catalog.load().get(SCENARIO))
            try:
                return episode.list_tools()
            finally:
                await episode.close()
    return asyncio.run(go())


def test_rollout_rows_train_every_turn_on_the_history_it_saw(tmp_path, capsys):
    """``--rows rollout``: one row per rollout whose ``messages`` is the whole conversation, every assistant turn
    trained — what verl's MultiTurnSFTDataset (which trains every assistant message and reads no per-message mask)
    and TRL's ``messages`` path do — right only for rollouts without a history window, so others are refused."""
    full, windowed = tmp_path / "full", tmp_path / "windowed"
    for run, extra in ((full, []), (windowed, ["--window", "1"])):
        assert awm(["eval", "run", "--policy", "oracle", "--scenario", SCENARIO, "--task", "3", "-k", "2",
                    "--mode", "native", "--workers", "1", "--quiet", "--out", str(run), *extra]) == 0
    capsys.readouterr()
    out = tmp_path / "rows.parquet"
    assert awm(["train", "export", str(full), "--rows", "rollout", "--window", "none", "--out", str(out),
                "--grpo", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == "rollout" and summary["samples"] == summary["rollouts"] == 2
    turn_rows = tmp_path / "turns.jsonl"
    assert awm(["train", "export", str(full), "--window", "none", "--out", str(turn_rows)]) == 0
    capsys.readouterr()
    per_turn = [json.loads(line) for line in turn_rows.read_text().splitlines()]
    table = pq.read_table(out)
    for row in table.to_pylist():
        turns = sorted((r for r in per_turn if r["rollout_id"] == row["id"]), key=lambda r: r["turn"])
        assistants = [m for m in row["messages"] if m["role"] == "assistant"]
        assert len(assistants) == len(turns) == row["num_turns"]
        # each trained turn has exactly the context its own request had (the per-turn rows' prompts)
        for t, turn in enumerate(turns):
            at = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"][t]
            assert [m["content"] for m in row["messages"][:at]] == [m["content"] for m in turn["prompt"]]
        assert row["loss_mask"] == [int(m["role"] == "assistant") for m in row["messages"]]
        assert row["tools"] and row["group_id"] == f"full/{SCENARIO}/3" and row["reward"] == 1.0
    assert "prompt" not in table.column_names and "completion" not in table.column_names
    # a rollout that ran with a history window is refused as a whole-rollout row, and so is a window
    assert awm(["train", "export", str(windowed), "--rows", "rollout", "--window", "none",
                "--out", str(tmp_path / "w.parquet")]) == 2
    assert "history window 1" in capsys.readouterr().err
    assert awm(["train", "export", str(full), "--rows", "rollout", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "--window none" in capsys.readouterr().err


def test_what_json_cannot_hold_as_it_is_exports_and_reads_back(tmp_path):
    """A model's malformed or unusual arguments and a hostile environment's odd schema values: the export neither
    fails nor changes what was written. Arguments become an object only when their text reads back the same (no
    key twice, no NaN, no integer past 64 bits); a schema value strict JSON cannot hold is kept as its text; a lone
    surrogate (a ``\\ud800`` escape in a tool's answer) is escaped in JSONL and U+FFFD in Parquet (UTF-8 only)."""
    from awm_engine.train.export import read_records, write_records

    def row(arguments, tool):
        call = {"id": "1", "type": "function", "function": {"name": "x", "arguments": arguments}}
        return {"messages": [{"role": "tool", "content": "answer \ud800"},
                             {"role": "assistant", "content": "", "tool_calls": [call]}], "tools": [tool]}
    cases = [('{"a": NaN}', {"a": float("nan")}), ('{"a": 1e999}', {"b": 10 ** 30}),
             ('{"a": 123456789012345678901234567890}', {"c": 1}), ('{"a": 1, "a": 2}', {}), ("[1, 2]", {"d": [1]}),
             ('{"a": "unclosed', {"e": "\ud800"}), (None, {}), ('{"ok": [1, {"k": null}], "f": 1.5}', {"g": None})]
    rows = [row(*case) for case in cases]
    write_records(rows, tmp_path / "odd.jsonl")
    write_records(rows, tmp_path / "odd.parquet")
    expected_arguments = [text for text, _ in cases[:7]] + [{"ok": [1, {"k": None}], "f": 1.5}]
    jsonl, parquet = read_records(tmp_path / "odd.jsonl"), read_records(tmp_path / "odd.parquet")
    for got in (jsonl, parquet):
        assert [r["messages"][1]["tool_calls"][0]["function"]["arguments"] for r in got] == expected_arguments
    assert [r["messages"][0]["content"] for r in jsonl] == ["answer \ud800"] * len(cases)
    assert [r["messages"][0]["content"] for r in parquet] == ["answer \ufffd"] * len(cases)
    assert [r["tools"] for r in parquet][2:] == [[{"c": 1}], [{}], [{"d": [1]}], [{"e": "\ufffd"}], [{}], [{"g": None}]]
    assert [r["tools"] for r in parquet][:2] == [['{"a": NaN}'], ['{"b": 1000000000000000000000000000000}']]
