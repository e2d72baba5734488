"""What online training runs on: the task rows a trainer's dataset holds, and how the adapters' environments run.

``task_rows`` gives one row per (scenario, task): the conversational ``prompt`` (awm's system prompt, or the one
given, and the task), ``scenario`` and ``task_id`` (what the adapters' ``reset`` reads), and verl's
``data_source`` / ``agent_name`` / ``extra_info``. ``EnvSettings`` is the agent configuration of the adapters
(the same settings as ``awm agent run``'s flags).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from awm_engine.agent.rollout import AgentConfig
from awm_engine.data.catalog import Catalog

AGENT_NAME = "awm_agent"  # the name the verl agent loop registers under

# the system prompt of rows whose trainer describes the tools itself (TRL's environment_factory: the chat
# template's own tools block and call format for list_tools / call_tool): awm's prompt without its <tools> block
# and its <tool_call> format, so the model is not told about the two functions twice, in two formats
TEMPLATE_TOOLS_SYSTEM_PROMPT = """# MCP Tools

You are an agent working inside an application through its MCP tools. Solve the user's task by calling tools.
You are already signed in as the user with id 1; never try to log in or register.

You have exactly two functions, list_tools and call_tool (described with this conversation's tools).

Rules:
- Start by calling list_tools, once. Then use call_tool as often as you need.
- Make exactly one function call per reply.
- When the task is done (or cannot be done), reply with your final answer as plain text and no function call.
"""


@dataclass
class EnvSettings:
    """How the environments of a trainer adapter run: data, protocol and limits, verification, where runs go."""

    data_dirs: list[str] | None = None  # None: the bundled sample environments
    protocol: str = "reference"
    mode: str = "meta"
    max_turns: int | None = None
    on_format_error: str = "observe"
    tool_names: str = "reference"
    system_prompt: str | None = None  # the exact text (None: awm's own)
    verify: str | None = "code"
    workers: int | None = None  # environment worker processes of the shared pool (None: one per CPU)
    out_dir: str = "outputs/train"
    base_url: str | None = None  # the model server's URL, when the request shape depends on it (local vLLM)
    extra: dict[str, Any] = field(default_factory=dict)

    def agent_config(self, history_window: int | None = None) -> AgentConfig:
        return AgentConfig(mode=self.mode, protocol=self.protocol, max_turns=self.max_turns,
                           history_window=history_window, on_format_error=self.on_format_error,
                           tool_name_style=self.tool_names, system_prompt=self.system_prompt)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def task_key(row: dict[str, Any]) -> tuple[str, int]:
    """(scenario, task index) of a dataset row: top-level keys, else ``extra_info`` or ``tools_kwargs`` (verl)."""
    for where in (row, row.get("extra_info") or {}, row.get("tools_kwargs") or {}):
        if isinstance(where, dict) and where.get("scenario") is not None and where.get("task_id") is not None:
            return str(where["scenario"]), int(where["task_id"])
    raise KeyError("the row names no task: it needs 'scenario' and 'task_id' (or them in 'extra_info')")


class NoTaskRows(ValueError):
    """The selection holds no task: a trainer's dataset would be empty (and train nothing) without saying why."""


def task_rows(catalog: Catalog, scenarios: list[str] | None = None, tasks: list[int] | None = None,
              system_prompt: str | None = None, tools_in_template: bool = False) -> list[dict[str, Any]]:
    """One row per selected (scenario, task) of ``catalog``; ``NoTaskRows`` when that is none (an empty catalog,
    or task indices no selected scenario has). ``tools_in_template``: for a trainer whose chat template describes
    list_tools and call_tool (TRL's ``environment_factory``): ``TEMPLATE_TOOLS_SYSTEM_PROMPT`` unless
    ``system_prompt`` is given."""
    if system_prompt is None and tools_in_template:
        system_prompt = TEMPLATE_TOOLS_SYSTEM_PROMPT
    system = AgentConfig(system_prompt=system_prompt).system_prompt_text
    rows = []
    for s in ([catalog.get(n) for n in scenarios] if scenarios else list(catalog)):
        for i in (tasks if tasks is not None else range(len(s.tasks))):
            if not 0 <= i < len(s.tasks):
                continue
            task = s.task(i).text
            rows.append({"prompt": [{"role": "system", "content": system}, {"role": "user", "content": task}],
                         "scenario": s.key, "task_id": i, "data_source": f"awm/{s.key}", "agent_name": AGENT_NAME,
                         "extra_info": {"scenario": s.key, "task_id": i, "index": len(rows)}})
    if not rows:
        where = ", ".join(map(str, catalog.dirs)) or "no data directory"
        if not len(catalog):
            raise NoTaskRows(f"no task rows: the catalog of {where} holds no scenarios"
                             + (f" ({len(catalog.errors)} load errors)" if catalog.errors else ""))
        raise NoTaskRows(f"no task rows: no selected scenario of {where} has task {', '.join(map(str, tasks or []))} "
                         "(task ids are 0-based positions)")
    return rows
