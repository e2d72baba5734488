"""A live transcript of rollout events: assistant text (thinking collapsible), tool calls, observations. Every
text is untrusted (the model's, the environment's): its control characters are made visible (``safe.py``)."""
from __future__ import annotations

import json
import re

from rich.text import Text
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Collapsible, Static

from awm_engine.agent.rollout import (
    FormatError,
    ModelTurn,
    Observation,
    RolloutFinished,
    RolloutStarted,
    StepEvent,
    ToolCall,
)
from awm_engine.data.error_text import error_title
from awm_engine.data.terminal import visible
from awm_engine.runtime.episode import is_environment_error

from .safe import shown
from .verdict import traceback_title

THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


class Transcript(VerticalScroll):
    DEFAULT_CSS = """
    Transcript { height: 1fr; border: round $primary-background; padding: 0 1; }
    Transcript > Static { margin: 0 0 1 0; }
    Transcript Collapsible { margin: 0; padding: 0; }
    """

    def __init__(self, *, id: str | None = None, human: bool = False):
        super().__init__(id=id)
        self.human = human
        self.fold_hint = " · ctrl+o" if human else ""  # play: ctrl+o folds or opens the last result
        self.env_errors = 0
        self.events: list[StepEvent] = []

    def add_event(self, event: StepEvent) -> None:
        self.events.append(event)
        widgets = []
        if isinstance(event, RolloutStarted):
            widgets.append(Static(shown(f"episode started: {event.tools} tools · {event.policy} · {event.mode} mode · "
                                        f"{event.run_dir}", style="dim")))
        elif isinstance(event, ModelTurn):
            if self.human and not event.content:
                return
            thinking = visible("\n".join(m.strip() for m in THINK.findall(event.content)))
            if event.reasoning:
                thinking = (visible(event.reasoning) + "\n" + thinking).strip()
            said = visible(THINK.sub("", event.content).strip())
            who = "you" if self.human else f"assistant · turn {event.iteration}"
            if thinking:
                widgets.append(Collapsible(Static(Text(thinking, style="italic dim")), title=f"{who}: thinking",
                                           collapsed=True))
            if said:
                widgets.append(Static(Text.assemble((f"{who}: ", "bold cyan"), said)))
            for call in event.native_tool_calls:
                widgets.append(Static(shown(f"  tool call {call['name']} {call['arguments']}", style="cyan")))
        elif isinstance(event, ToolCall):
            args = visible(json.dumps(event.arguments, ensure_ascii=False, default=str))
            widgets.append(Static(Text.assemble(("→ ", "bold green"), (visible(event.tool or event.name), "green"), " ",
                                                args if len(args) < 400 else args[:400] + "…")))
        elif isinstance(event, Observation):
            if is_environment_error(event.error_kind):
                self.env_errors += 1
            text = visible(event.text)  # the tool result: the environment's text
            if event.traceback:  # the environment's exception first (type and message from its code)
                widgets.append(Static(shown(error_title(event.text, event.traceback), style="bold magenta")))
            body = Static(Text(text, style="red" if event.is_error else ""))
            lines = text.count("\n") + 1
            if lines > 12 or len(text) > 1500:
                first = text.split("\n", 1)[0][:80]
                # a title is markup unless it is Content: "[@click=…]" in a result would be an action
                widgets.append(Collapsible(body, title=Content(f"← {first} … ({lines} lines{self.fold_hint})"), collapsed=True))
            else:
                widgets.append(Static(Text.assemble(("← ", "bold red" if event.is_error else "bold"),
                                                    (text, "red" if event.is_error else ""))))
            if event.traceback:  # the environment's exception: for you, not the model
                widgets.append(Collapsible(Static(shown(event.traceback.rstrip(), style="dim")),
                                           title=Content(visible(f"traceback · {traceback_title(event)}")),
                                           collapsed=True))
        elif isinstance(event, FormatError):
            widgets.append(Static(shown(f"format error ({event.kind}): {event.detail}", style="yellow")))
        elif isinstance(event, RolloutFinished):
            widgets.append(Static(shown(f"■ finished: {event.stop_reason} after {event.iterations} turns, "
                                        f"{event.tool_calls} tool calls" + (f" — {event.error}" if event.error else ""),
                                        style="bold")))
        if widgets:
            self.mount(*widgets)
            self.scroll_end(animate=False)
