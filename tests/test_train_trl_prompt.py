"""TRL's prompt describes the two meta-tools once (issue 28, item 8): with ``tools_in_template`` the task rows'
system prompt leaves the tools and their call format to the chat template (TRL renders the environment class's
public methods as the conversation's tools), and still names exactly those methods."""
from __future__ import annotations

import inspect
import json

from awm_engine.agent.meta_protocol import SYSTEM_PROMPT
from awm_engine.cli import main as awm
from awm_engine.data.catalog import Catalog
from awm_engine.train.tasks import TEMPLATE_TOOLS_SYSTEM_PROMPT, task_rows
from awm_engine.train.trl_env import trl_environment

SCENARIO = "maple_library_lending"


def test_rows_for_a_template_that_describes_the_tools_do_not_describe_them_again(tmp_path, capsys):
    catalog = Catalog.load()
    default = task_rows(catalog, [SCENARIO], [0])[0]["prompt"][0]["content"]
    assert default == SYSTEM_PROMPT and "<tools>" in default  # the AWM protocol's own prompt is unchanged
    system = task_rows(catalog, [SCENARIO], [0], tools_in_template=True)[0]["prompt"][0]["content"]
    assert system == TEMPLATE_TOOLS_SYSTEM_PROMPT
    assert "<tools>" not in system and "<tool_call>" not in system and '"parameters"' not in system
    cls = trl_environment()
    tools = {name for name, fn in inspect.getmembers(cls, inspect.isfunction)
             if not name.startswith("_") and name not in ("reset", "get_reward")}  # what TRL renders as tools
    assert tools == {"list_tools", "call_tool"} and all(name in system for name in tools)
    given = task_rows(catalog, [SCENARIO], [0], system_prompt="mine", tools_in_template=True)
    assert given[0]["prompt"][0]["content"] == "mine"
    out = tmp_path / "rows.jsonl"
    assert awm(["train", "tasks", "--scenario", SCENARIO, "--tools-in-template", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 10 and rows[0]["prompt"][0]["content"] == TEMPLATE_TOOLS_SYSTEM_PROMPT
