"""Every shape ``awm train export`` and ``awm train tasks`` write, read by the consumers' own code (issue 28, item 1).

* ``datasets`` (5.2) loads each file, JSONL and Parquet, and gives back the rows awm wrote.
* TRL 1.16.0's ``SFTTrainer`` prepares them as it does for training: prompt/completion rows (``--rows turn``)
  train exactly the target turn; ``messages`` rows (``--rows rollout``) with ``assistant_only_loss`` train exactly
  the assistant turns; native rows render ``tool_calls`` (a list of structs in Parquet) and the ``tools`` column
  through the chat template; one optimisation step runs on the prompt/completion rows.
* verl 0.9.1's ``MultiTurnSFTDataset`` reads the ``--rows rollout`` Parquet (``messages_key=messages``,
  ``tools_key=tools``) and masks exactly the assistant turns; verl's ``RLHFDataset`` reads ``awm train tasks``.

The tokenizer and model are the tiny ones of ``trainer_kit`` (TRL's Qwen3 chat template; built here, nothing
downloaded). The rollouts are the oracle's, in meta and native mode, through ``awm eval run``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainer_kit import requires_trainers

requires_trainers("torch", "transformers", "datasets", "trl", "verl")

from awm_engine.cli import main as awm  # noqa: E402
from trainer_kit import build_model, build_tokenizer  # noqa: E402

SCENARIO = "maple_library_lending"
SHAPES = [f"{rows}_{mode}" for rows in ("turn", "rollout") for mode in ("meta", "native")]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The oracle's rollouts of one task (k=2, no history window) in meta and native mode, exported in every shape:
    per turn (``--rows turn``, each turn's context the whole history before it) and per rollout."""
    base = tmp_path_factory.mktemp("exports")
    with pytest.MonkeyPatch.context() as mp:  # as conftest's per-test isolation: no user cache or configuration
        mp.setenv("AWM_CACHE_DIR", str(base / "cache"))
        mp.setenv("AWM_CONFIG", str(base / "none.toml"))
        for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AWM_JUDGE_MODEL", "AWM_MODEL"):
            mp.delenv(var, raising=False)
        for mode in ("meta", "native"):
            run = base / f"eval_{mode}"
            assert awm(["eval", "run", "--policy", "oracle", "--scenario", SCENARIO, "--task", "0", "-k", "2",
                        "--mode", mode, "--workers", "1", "--quiet", "--out", str(run)]) == 0
            for rows in ("turn", "rollout"):
                for fmt in ("jsonl", "parquet"):
                    assert awm(["train", "export", str(run), "--rows", rows, "--window", "none", "--grpo",
                                "--out", str(base / f"{rows}_{mode}.{fmt}")]) == 0
        for fmt in ("jsonl", "parquet"):
            assert awm(["train", "tasks", "--out", str(base / f"tasks.{fmt}")]) == 0
    return base


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    import datasets

    cache = tmp_path / "hf-datasets"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    return cache


def load(path: Path, cache: Path):
    import datasets

    return datasets.load_dataset("parquet" if path.suffix == ".parquet" else "json", data_files=str(path),
                                 split="train", cache_dir=str(cache))


def without_nulls(value):
    """``value`` with every null-valued key dropped (a Parquet struct has every field of its type; JSON omits them)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def file_rows(path: Path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_export_loads_with_datasets_as_written(exports, hf_cache, capsys):
    for shape in SHAPES + ["tasks"]:
        written = file_rows(exports / f"{shape}.jsonl")
        assert written, shape
        for fmt in ("jsonl", "parquet"):
            dataset = load(exports / f"{shape}.{fmt}", hf_cache)
            got = [dataset[i] for i in range(len(dataset))]
            assert len(got) == len(written), (shape, fmt)
            for row, expected in zip(got, written):
                assert set(row) == set(expected), (shape, fmt)
                # the same values; a Parquet (or datasets-inferred) struct adds null fields JSON leaves out
                assert without_nulls(row) == without_nulls(expected), (shape, fmt, row["id"] if "id" in row else "")
    capsys.readouterr()


def test_parquet_messages_and_tools_are_what_chat_templates_read(exports, hf_cache):
    """Native Parquet rows through ``datasets``: ``tool_calls`` are lists of call structs, ``tools`` the schemas."""
    dataset = load(exports / "turn_native.parquet", hf_cache)
    target = dataset[0]["completion"][0]
    (call,) = target["tool_calls"]
    # the arguments are the object the model wrote (transformers' tool-use shape), of datasets' JSON type
    assert call["type"] == "function" and isinstance(call["function"]["arguments"], dict)
    assert call["function"]["name"] in {t["function"]["name"] for t in dataset[0]["tools"]}
    call_type = dataset.features["completion"].feature["tool_calls"].feature
    assert type(call_type["function"]["arguments"]).__name__ == "Json"


def test_parquet_tools_and_arguments_read_back_as_the_endpoint_received_them(exports, hf_cache):
    """Each schema and each call's arguments exactly as written: no null for a field only another tool (or another
    call) has — what a struct type gives, and what chat templates would write into the prompt."""
    for shape in ("turn_native", "rollout_native"):
        dataset = load(exports / f"{shape}.parquet", hf_cache)
        written = file_rows(exports / f"{shape}.jsonl")
        for i, expected in enumerate(written):
            assert dataset[i]["tools"] == expected["tools"] and len(expected["tools"]) > 1
            column = "completion" if shape.startswith("turn") else "messages"
            calls = [c["function"] for m in dataset[i][column] for c in m["tool_calls"] or []]
            assert calls == [c["function"] for m in expected[column] for c in m.get("tool_calls") or []]
    # calls with different argument names, tools with different fields, and a malformed call's text: a struct
    # type would pad each with the others' names as nulls
    from awm_engine.train.export import write_records

    def row(name, arguments, tool):
        call = {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}
        return {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "",
                                                                  "tool_calls": [call]}], "tools": [tool]}
    rows = [row("a", '{"x": 1}', {"type": "function", "function": {"name": "a", "parameters": {
                "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}),
            row("b", '{"y": "s", "z": [1, {"k": null}]}', {"type": "function", "function": {"name": "b",
                "description": "d", "parameters": {"type": "object", "properties": {"y": {"enum": ["s"]}}}}}),
            row("c", '{"y": "unclosed', {"type": "function", "function": {"name": "c"}})]
    write_records(rows, exports / "mixed.parquet")
    dataset = load(exports / "mixed.parquet", hf_cache)
    assert [dataset[i]["tools"] for i in range(3)] == [r["tools"] for r in rows]
    assert [dataset[i]["messages"][1]["tool_calls"][0]["function"]["arguments"] for i in range(3)] == \
        [{"x": 1}, {"y": "s", "z": [1, {"k": None}]}, '{"y": "unclosed']


def test_meta_and_native_files_load_together(exports, hf_cache):
    """Every message has the same fields in JSONL as in Parquet (``tool_calls``/``tool_call_id`` null where it has
    none). Parquet files (one explicit schema) load together in either order; ``datasets`` types JSON from the first
    file it reads, where a meta file's calls are all null, so JSONL files load together with a native one first
    (docs/training.md says so)."""
    import datasets

    for fmt, orders in (("parquet", (("meta", "native"), ("native", "meta"))), ("jsonl", (("native", "meta"),))):
        for order in orders:
            files = [str(exports / f"rollout_{mode}.{fmt}") for mode in order]
            dataset = datasets.load_dataset("parquet" if fmt == "parquet" else "json", data_files=files,
                                            split="train", cache_dir=str(hf_cache))
            assert len(dataset) == sum(len(file_rows(exports / f"rollout_{mode}.jsonl")) for mode in order)
    assert all(set(m) >= {"role", "content", "tool_calls", "tool_call_id"}
               for r in file_rows(exports / "rollout_meta.jsonl") for m in r["messages"])


# -- TRL ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny():
    tokenizer = build_tokenizer()
    return tokenizer, build_model(tokenizer)


def sft_trainer(tmp_path, tiny, dataset, **config):
    from trl import SFTConfig, SFTTrainer

    tokenizer, model = tiny
    args = SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=2, max_length=None,
                     report_to="none", use_cpu=True, bf16=False, save_strategy="no", dataset_num_proc=None,
                     **config)
    return SFTTrainer(model=model, processing_class=tokenizer, train_dataset=dataset, args=args)


def trained_spans(ids, labels):
    """The runs of trained tokens (labels other than -100), as lists of ids."""
    spans, current = [], []
    for token, label in zip(ids, labels):
        if label != -100:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    return spans + ([current] if current else [])


def assert_trains_the_assistant_turns(tokenizer, ids, labels, expected):
    """Of a ``--rows rollout`` row's tokens, exactly the assistant turns are trained (one run of tokens each, as the
    template renders the turn: its text, its calls with their arguments, the end of turn); the task and the tool
    results are not."""
    spans = trained_spans(ids, labels)
    assistants = [m for m in expected["messages"] if m["role"] == "assistant"]
    assert len(spans) == len(assistants) == expected["num_turns"] == sum(expected["loss_mask"])
    for span, message in zip(spans, assistants):
        text = tokenizer.decode(span)
        assert "<|im_start|>" not in text and text.endswith("<|im_end|>\n")
        assert (message["content"] or "") in text
        for call in message.get("tool_calls") or []:
            assert call["function"]["name"] in text and rendered(call["function"]["arguments"]) in text
    untrained = tokenizer.decode([t for t, label in zip(ids, labels) if label == -100])
    assert expected["task"] in untrained and "The Silent Orchard" in untrained  # the task and a tool result


def rendered(arguments) -> str:
    """A call's arguments as chat templates write an object (``tojson``: json.dumps' default separators)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def rendered_tools(text: str):
    """The tool schemas the Qwen3 template wrote into a prompt (one JSON object per line inside <tools>)."""
    if "# Tools\n" not in text:
        return []
    block = text.split("# Tools\n", 1)[1].split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    return [json.loads(line) for line in block.splitlines() if line.strip()]


@pytest.mark.timeout(300)
def test_trl_sft_trains_exactly_the_target_turn_of_prompt_completion_rows(exports, hf_cache, tmp_path, tiny, capsys):
    tokenizer, _ = tiny
    for shape in ("turn_meta", "turn_native"):
        for fmt in ("parquet", "jsonl"):
            source = load(exports / f"{shape}.{fmt}", hf_cache)
            written = file_rows(exports / f"{shape}.jsonl")
            trainer = sft_trainer(tmp_path, tiny, source)
            prepared = trainer.train_dataset
            assert len(prepared) == len(written)
            for i, expected in enumerate(written):
                ids, labels = prepared[i]["input_ids"], prepared[i]["labels"]
                (span,) = trained_spans(ids, labels)  # one trained run: the target turn, at the end
                assert ids[-len(span):] == span
                text, target = tokenizer.decode(ids), tokenizer.decode(span)
                context = text[:-len(target)]
                (message,) = expected["completion"]
                # the trained tokens are the target turn as the template renders it, then the end of turn
                assert target.endswith("<|im_end|>\n") and "<|im_start|>" not in target
                for call in message.get("tool_calls") or []:
                    assert call["function"]["name"] in target and rendered(call["function"]["arguments"]) in target
                assert (message["content"] or "") in target
                # and the context is the row's prompt: the task and every message before the target, untrained
                assert expected["task"] in context and expected["task"] not in target
                for before in expected["prompt"][2:]:
                    assert before["content"][-200:] in context
                # the tools the endpoint received, in the template's tools block (meta: none, they are in the prompt)
                tools = rendered_tools(context)
                if shape == "turn_meta":
                    assert tools == [] and expected["tools"] == []
                else:  # exact: datasets reads each schema as JSON, from JSONL and from Parquet's JSON type
                    assert tools == expected["tools"]
            if (shape, fmt) == ("turn_meta", "parquet"):
                result = trainer.train()  # one optimisation step on the meta rows (native rows are long on CPU)
                assert result.global_step == 1 and result.training_loss > 0
    capsys.readouterr()


@pytest.mark.timeout(300)
def test_trl_sft_messages_rows_train_every_assistant_turn_and_nothing_else(exports, hf_cache, tmp_path, tiny, capsys):
    """``--rows rollout`` rows on TRL's ``messages`` path with ``assistant_only_loss`` (TRL swaps in its Qwen3
    training template, which marks the assistant turns)."""
    tokenizer, _ = tiny
    for shape in ("rollout_meta", "rollout_native"):
        source = load(exports / f"{shape}.parquet", hf_cache)
        written = file_rows(exports / f"{shape}.jsonl")
        prepared = sft_trainer(tmp_path, tiny, source, assistant_only_loss=True).train_dataset
        for i, expected in enumerate(written):
            assert_trains_the_assistant_turns(tokenizer, prepared[i]["input_ids"], prepared[i]["labels"], expected)
    capsys.readouterr()


# -- verl -------------------------------------------------------------------------------------------------------

@pytest.mark.timeout(300)
@pytest.mark.parametrize("template,shape", [
    ("qwen3", "rollout_meta"), ("qwen3", "rollout_native"), ("qwen2_5", "rollout_meta"), ("qwen2_5", "rollout_native")])
def test_verl_multiturn_sft_masks_exactly_the_assistant_turns(exports, template, shape, capsys):
    """verl's ``MultiTurnSFTDataset`` on the ``--rows rollout`` Parquet, with TRL's Qwen3 and Qwen2.5 templates
    (the two the issue's reporter hit ``TypeError``s with while ``tool_calls`` was a JSON string), as verl's SFT
    trainer loads it with ``data.custom_cls`` = awm's subclass (verl reads Parquet through pandas, which gives the
    text of Arrow's JSON type; the subclass parses those values back). The tools reach the template exactly, and a
    call's arguments as the object Qwen2.5's ``tojson`` needs."""
    from trl.chat_template_utils import _CHAT_TEMPLATES_DIR
    from verl.utils.import_utils import load_extern_object  # what verl's SFT trainer does with data.custom_cls
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    dataset_cls = load_extern_object("pkg://awm_engine.train.verl_sft", "AWMMultiTurnSFTDataset")
    assert issubclass(dataset_cls, MultiTurnSFTDataset)

    tokenizer = build_tokenizer()
    tokenizer.chat_template = (Path(_CHAT_TEMPLATES_DIR) / f"{template}.jinja").read_text()
    config = {"messages_key": "messages", "tools_key": "tools", "max_length": 32768, "pad_mode": "no_padding",
              "truncation": "error"}
    if template == "qwen3":
        # Qwen3's template writes an empty <think></think> into the last assistant turn of a whole conversation, not
        # into that turn rendered alone; verl compares the two and its error says to take the per-turn tokens so
        config["ignore_input_ids_mismatch"] = True
    written = file_rows(exports / f"{shape}.jsonl")
    dataset = dataset_cls(str(exports / f"{shape}.parquet"), tokenizer, config)
    assert len(dataset) == len(written)
    for i, expected in enumerate(written):
        ids, mask = dataset[i]["input_ids"].tolist(), dataset[i]["loss_mask"].tolist()
        assert_trains_the_assistant_turns(tokenizer, ids, [t if m else -100 for t, m in zip(ids, mask)], expected)
        assert rendered_tools(tokenizer.decode(ids)) == expected["tools"]  # native: every schema exact; meta: none
    capsys.readouterr()


def test_verl_rlhf_dataset_reads_awm_train_tasks(exports, tmp_path, hf_cache, tiny, capsys):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    tokenizer, _ = tiny
    written = file_rows(exports / "tasks.jsonl")
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": True,
                               "truncation": "error", "cache_dir": str(tmp_path / "verl-cache"),
                               "filter_overlong_prompts_workers": 1})
    dataset = RLHFDataset(data_files=[str(exports / "tasks.parquet")], tokenizer=tokenizer, config=config)
    assert len(dataset) == len(written) == 50  # the five sample environments' tasks, none filtered out
    for i in (0, 17, 49):
        item, expected = dataset[i], written[i]
        assert without_nulls(item["raw_prompt"]) == without_nulls(expected["prompt"])
        assert (item["scenario"], item["task_id"], item["data_source"], item["agent_name"]) == \
            (expected["scenario"], expected["task_id"], expected["data_source"], "awm_agent")
        assert item["index"] == expected["extra_info"]["index"] == i
        assert item["extra_info"]["scenario"] == expected["scenario"]
    batch = collate_fn([dataset[i] for i in range(4)])
    assert list(batch["agent_name"]) == ["awm_agent"] * 4  # what AgentLoopWorker dispatches on
    capsys.readouterr()
    assert os.path.isdir(tmp_path)
