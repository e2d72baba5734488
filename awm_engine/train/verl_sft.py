"""verl's multi-turn SFT dataset over awm's Parquet exports (``awm train export --rows rollout``).

awm writes each tool schema and each call's arguments with Arrow's JSON type, so that every schema and every
argument object reads back exactly as written (a struct type would give each one a null for every field only the
others have). Hugging Face ``datasets`` decodes that type; verl's ``MultiTurnSFTDataset`` reads Parquet through
pandas, which hands over the JSON text instead. ``AWMMultiTurnSFTDataset`` is verl's class with exactly those
values parsed back — nothing else differs. Name it in verl's SFT config::

    data.custom_cls.path=pkg://awm_engine.train.verl_sft
    data.custom_cls.name=AWMMultiTurnSFTDataset

Importing this module without verl installed is fine; ``AWMMultiTurnSFTDataset`` is then ``None``.
"""
from __future__ import annotations

import json
from typing import Any


def json_paths(parquet_files) -> tuple[bool, bool]:
    """Whether the files' ``tools`` elements and call arguments are of the JSON type (awm's exports since format
    change 28; older files hold structs and strings, which are left as they are)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tools = arguments = False
    for path in [parquet_files] if isinstance(parquet_files, str) else parquet_files:
        schema = pq.read_schema(path)
        if "tools" in schema.names:
            t = schema.field("tools").type
            tools = tools or (pa.types.is_list(t) and isinstance(t.value_type, pa.JsonType))
        for name in ("messages", "prompt", "completion"):
            if name in schema.names:
                arguments = arguments or "extension<arrow.json>" in str(schema.field(name).type)
    return tools, arguments


def parsed_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each call's arguments (JSON text, as pandas gives a JSON-typed value) parsed."""
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if isinstance(function.get("arguments"), str):
                function["arguments"] = json.loads(function["arguments"])
    return messages


try:
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
except ImportError:  # verl not installed
    AWMMultiTurnSFTDataset = None
else:
    class AWMMultiTurnSFTDataset(MultiTurnSFTDataset):
        """``MultiTurnSFTDataset`` with the JSON-typed values of awm's Parquet exports parsed back."""

        def __init__(self, parquet_files, tokenizer, config, processor=None, max_samples: int = -1):
            super().__init__(parquet_files, tokenizer, config, processor=processor, max_samples=max_samples)
            self._json_tools, self._json_arguments = json_paths(self.parquet_files)
            if self._json_tools and self.tools is not None:
                self.tools = [[json.loads(t) if isinstance(t, str) else t for t in tools] if tools is not None
                              else None for tools in self.tools]

        def _build_messages(self, example: dict):
            messages = super()._build_messages(example)
            return parsed_arguments(messages) if self._json_arguments else messages
