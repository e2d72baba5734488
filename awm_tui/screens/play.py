"""Play as the agent: call tools through forms generated from their schemas, answer, verify, see the reward."""
from __future__ import annotations

import asyncio
import json
import math
import uuid
from functools import partial
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.validation import Function
from textual.widgets import Button, Header, Input, Label, OptionList, Static, TabbedContent, TabPane, TextArea
from textual.widgets.option_list import Option

from awm_engine.agent.policies import AssistantTurn, HumanPolicy, NativeCall
from awm_engine.agent.rollout import AgentConfig, RolloutFinished
from awm_engine.data.catalog import Scenario
from awm_engine.data.schema_examples import _MISSING, example_arguments, first_example, required_names, schema_properties
from awm_engine.data.schema_examples import property_type as prop_type
from awm_engine.data.terminal import visible
from awm_engine.eval.episode import default_run_dir, run_episode

from ..actions import bindings
from ..widgets.footer import KeyFooter
from ..widgets.safe import shown
from ..widgets.transcript import Transcript
from ..widgets.verdict import SideBySide
from .leaving import screen_left

FLAT = ("string", "integer", "number", "boolean")
NEVER_HELD = ("escape", "ctrl+q", "ctrl+c")  # leaving the screen or the app is never made to wait for a form
TOOL_KEYS = {"down": "cursor_down", "up": "cursor_up", "home": "first", "end": "last", "pagedown": "page_down",
             "pageup": "page_up"}


def is_flat(schema: dict[str, Any]) -> bool:
    return all(prop_type(p) in FLAT for p in schema_properties(schema).values())


def skeleton(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON skeleton of the arguments: examples where the schema has them, typed placeholders elsewhere."""
    out = example_arguments(schema)
    for name, prop in schema_properties(schema).items():
        if name not in out:
            out[name] = {"integer": 0, "number": 0.0, "boolean": False, "array": [], "object": {}}.get(
                prop_type(prop), "")
    return out


def convert(value: str, kind: str) -> Any:
    if kind == "integer":
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an integer") from None
    if kind == "number":
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        if not math.isfinite(number):  # "nan", "inf": no JSON number
            raise ValueError(f"{value!r} is not a finite number")
        return number
    if kind == "boolean":
        if value.lower() in ("true", "1", "yes", "y"):
            return True
        if value.lower() in ("false", "0", "no", "n"):
            return False
        raise ValueError(f"{value!r} is not true/false")
    return value


EMPTY_STRING = '""'  # typed into a text field: the argument is the empty string (an empty field leaves it out)


def form_arguments(schema: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """The arguments a flat form's fields say: a text field's value exactly as typed (spaces included; ``""``
    for the empty string), a number or true/false field's read from its text without surrounding spaces; an empty
    field leaves its argument out."""
    args: dict[str, Any] = {}
    for pname, prop in schema_properties(schema).items():
        raw = texts.get(pname, "")
        kind = prop_type(prop)
        if kind in ("integer", "number", "boolean"):
            raw = raw.strip()
        if not raw:
            continue
        if raw == EMPTY_STRING and kind not in ("integer", "number", "boolean"):
            args[pname] = ""
            continue
        try:
            args[pname] = convert(raw, kind)
        except ValueError as exc:
            raise ValueError(f"{pname}: {exc}") from None
    return args


def converts(value: str, kind: str) -> bool:
    """Whether a field's text is a value of its kind as the call reads it (empty: the argument is left out)."""
    try:
        value.strip() and convert(value.strip(), kind)
    except ValueError:
        return False
    return True


class PlayScreen(Screen):
    SCOPE = "play"
    BINDINGS = bindings("play")
    AUTO_FOCUS = "#play-tools"  # the tool list from the start, before the episode is open (never the tab bar)
    DEFAULT_CSS = """
    PlayScreen #play-tabs { height: 1fr; }
    PlayScreen #task { height: auto; padding: 0 1; background: $boost; }
    PlayScreen #play-tools { width: 34; }
    PlayScreen #form-pane { width: 1fr; }
    PlayScreen #form { height: 1fr; border: round $primary-background; padding: 0 1; }
    PlayScreen #form Label { margin-top: 1; width: 100%; }
    PlayScreen .json-args { width: 100%; height: 16; }
    PlayScreen #play-right { width: 1fr; }
    PlayScreen #answer-row { height: auto; }
    PlayScreen #answer { width: 1fr; }
    """
    TINY_BELOW = 80  # columns

    def __init__(self, scenario: Scenario, task_idx: int):
        super().__init__()
        self.scenario = scenario
        self.task_idx = task_idx
        self.policy = HumanPolicy()
        self.episode = None
        self.tools: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.finished: RolloutFinished | None = None
        self.reports: dict[str, Any] | None = None
        self.fields: dict[str, Input] = {}
        self.json_editor: TextArea | None = None
        self.leaving = False
        self._confirm_leave = False
        # Input lands where it is shown. The form shown is the one of ``_built_for``; ``_want`` is the tool the
        # list has highlighted. While they differ (a rebuild is due or under way), while the episode is opening,
        # and until the keys held meanwhile are replayed, the app hands every key to ``hold_key`` instead of a
        # widget; they are replayed in order once the new form is mounted, so each lands in the field it was
        # typed for. The keys that move between tools and fields are priority bindings (handled when the app
        # reads them, not after the widget's queue), so no key can overtake the one that moved the focus.
        self._want: str | None = None
        self._built_for: str | None = None
        self._opening = True
        self._releasing = False
        self._held: list[events.Key] = []
        self._build_lock = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text.assemble((f"Task {self.task_idx}: ", "bold"), visible(self.scenario.tasks[self.task_idx])),
                     id="task")
        with TabbedContent(id="play-tabs", initial="play"):
            with TabPane("Play", id="play"):
                with Horizontal(id="play-body"):
                    yield OptionList(id="play-tools")
                    with Vertical(id="form-pane"):
                        form = VerticalScroll(id="form")
                        form.can_focus = False  # tab goes from the tool list straight to the first field
                        yield form
                        yield Button("Call tool (ctrl+j)", id="call", variant="primary")
                    with Vertical(id="play-right"):
                        yield Transcript(id="transcript", human=True)
                        with Horizontal(id="answer-row"):
                            yield Input(placeholder="final answer (what you would tell the user)", id="answer")
                            yield Button("Submit & verify", id="submit", variant="success")
            with TabPane("Verdict", id="verdict-tab"):
                yield SideBySide(id="side")
        yield KeyFooter()

    def on_resize(self, event) -> None:
        self.set_class(event.size.width < self.TINY_BELOW, "-tiny")

    def on_mount(self) -> None:
        self.set_class(self.app.size.width < self.TINY_BELOW, "-tiny")
        self.title = f"Play · {self.scenario.name}"
        self.sub_title = "opening the episode…"
        if not getattr(self.app, "cursor_blink", True):
            for field in self.query(Input):
                field.cursor_blink = False
        self.start_episode()

    # -- the episode ---------------------------------------------------------------------------
    @work(exclusive=True, group="play")
    async def start_episode(self) -> None:
        pool = await self.app.get_pool()
        run_dir = default_run_dir(self.scenario, self.task_idx, self.app.runs_root / "play")
        config = AgentConfig(mode="native", max_turns=200, episode_timeout=None)
        outcome = await run_episode(self.app.catalog, self.scenario, self.task_idx, self.policy, config, run_dir,
                                    pool=pool, verify_mode="both", judge=self.app.judge_endpoint(),
                                    meta={"model": "human"}, on_open=self.episode_opened, on_event=self.on_step)
        if screen_left(self) or self.leaving:
            return
        if outcome.failure is not None:
            self._opening = False
            self._release_later()
            self.sub_title = "could not open the episode"
            self.query_one(Transcript).mount(Static(shown(outcome.failure, style="bold red")))
            self.notify(visible(outcome.failure), title="episode", severity="error", timeout=10, markup=False)
            return
        self.finished = outcome.finished
        self.refresh_bindings()
        report = outcome.verification
        self.reports = report.to_dict()
        self.query_one(SideBySide).show_report(self.reports, self.finished.env_errors, self.finished.stop_reason)
        self.notify(visible(f"{report.label} — reward {report.reward}"), title="verified", markup=False)

    async def episode_opened(self, episode) -> None:
        self.episode = episode
        if screen_left(self) or self.leaving:  # esc while it was opening: it ends as abandoned, fills nothing
            self.policy.abandon()
            return
        order = {t.name: i for i, t in enumerate(self.scenario.tools())}  # the Tools tab's order (the routes')
        # one entry per name, the tool a call by that name reaches (the last): two routes may share an operation
        # id, and an option list's ids must be unique
        listed = list({t["name"]: t for t in episode.list_tools()}.values())
        self.tools = sorted(listed, key=lambda t: (order.get(t["name"], len(order)), listed.index(t)))
        self.query_one("#play-tools", OptionList).add_options(
            [Option(shown(t["name"]), id=t["name"]) for t in self.tools])
        self.sub_title = str(episode.run_dir)
        if self.tools:
            self._want = self.tools[0]["name"]
            self.query_one("#play-tools", OptionList).highlighted = 0  # so the first down moves to the second tool
            if not isinstance(self.focused, (Input, TextArea)):
                self.query_one("#play-tools", OptionList).focus()
        self._opening = False
        await self.rebuild_form()

    def on_step(self, event) -> None:
        if screen_left(self) or self.leaving:  # the abandoned episode ends after the screen is gone
            return
        self.query_one(Transcript).add_event(event)
        if isinstance(event, RolloutFinished):
            side = self.query_one(SideBySide)
            self.query_one(TabbedContent).active = "verdict-tab"
            side.query_one("#verdict-pane").focus()  # focus left in the other tab would switch it back
            side.show_finished(self.episode.run_dir, event.env_errors, event.stop_reason)

    # -- the form ------------------------------------------------------------------------------
    @property
    def holding(self) -> bool:
        """Keys wait: the episode is opening, the form shown is not the highlighted tool's, or held keys are
        being replayed."""
        return self._opening or self._releasing or self._want != self._built_for

    def hold_key(self, event: events.Key) -> bool:
        """Called by the app for every key before any binding or widget sees it: True when it is held."""
        if event.key != "escape":
            self._confirm_leave = False  # esc asked to confirm leaving; any other key keeps playing
        if not self.holding or self.leaving or event.key in NEVER_HELD:
            return False
        self._held.append(events.Key(event.key, event.character))
        return True

    def _release_later(self) -> None:
        """Replay the held keys in the app's own queue, after every key already queued there (those are held
        too, so the order is kept)."""
        if not self._releasing:
            self._releasing = True
            self.app.call_later(self._release)

    async def _release(self) -> None:
        self._releasing = False
        while self._held and not self.holding and not screen_left(self):
            key = self._held.pop(0)
            await self.app.on_event(key)  # a key that highlights another tool makes the rest wait again
        if self._held and self.holding and not self._releasing and self._want == self._built_for \
                and not self._opening:
            self._release_later()

    def _tool_list_focused(self) -> bool:
        return self.focused is not None and self.focused.id == "play-tools"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("call_tool", "submit_answer") and self.finished is not None:
            return False  # the episode is over: not offered in the footer any more
        if action == "move_tool":  # only in the tool list; elsewhere the key is the widget's
            return self._tool_list_focused()
        if action == "enter_key":  # the tool list, a form field or the answer box; elsewhere (JSON editor, buttons)
            focused = self.focused  # enter is the widget's
            return self._tool_list_focused() or (isinstance(focused, Input) and (
                focused.id == "answer" or focused.has_class("arg")))
        return True

    def action_move_tool(self, key: str) -> None:
        """↑ ↓ Home End PgUp PgDn in the tool list, handled as the key is read: the tool to show is known at once,
        so the keys after it wait for its form."""
        tools = self.query_one("#play-tools", OptionList)
        getattr(tools, f"action_{TOOL_KEYS[key]}")()
        if tools.highlighted is not None and tools.highlighted < len(self.tools):
            self._want = self.tools[tools.highlighted]["name"]

    async def action_enter_key(self) -> None:
        """Enter, read as the app reads it: into the highlighted tool's form, call the tool, or answer."""
        if self._tool_list_focused():
            self._focus_form()
        elif isinstance(self.focused, Input) and self.focused.id == "answer":
            await self.action_submit_answer()
        else:
            await self.action_call_tool()

    def action_next_field(self) -> None:
        self.focus_next()

    def action_previous_field(self) -> None:
        self.focus_previous()

    async def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "play-tools" and event.option.id is not None:
            self._want = event.option.id  # a click, or the keys above (which set it already)
            await self.rebuild_form()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A click on a tool: into its form (or the Call button when it takes no arguments)."""
        if event.option_list.id == "play-tools":
            self.call_after_refresh(self._focus_form)

    def _focus_form(self) -> None:
        """Focus the form's first field now (``Widget.focus`` would only schedule it, after keys already read)."""
        fields = list(self.query_one("#form").query("Input, TextArea"))
        self.set_focus(fields[0] if fields else self.query_one("#call", Button))

    def action_select_all_text(self) -> None:
        """ctrl+a in a text field or the JSON editor selects all of it (the widgets' own ctrl+a goes to the line
        start)."""
        if isinstance(self.focused, (Input, TextArea)):
            self.focused.select_all()

    async def select_tool(self, name: str) -> None:
        """Show ``name``'s form (and wait until it is the one shown)."""
        self._want = name
        await self.rebuild_form()

    async def rebuild_form(self) -> None:
        """Build the highlighted tool's form, one rebuild at a time, until the form shown is the one wanted; the
        screen's ``current``/``fields`` change only once the new widgets are mounted. Then the held keys go."""
        async with self._build_lock:
            while self._want is not None and self._want != self._built_for and not screen_left(self):
                name = self._want
                tool = next((t for t in self.tools if t["name"] == name), None)
                if tool is None:
                    self._want = self._built_for
                    break
                widgets, fields, editor = self._form_widgets(tool)
                form = self.query_one("#form", VerticalScroll)
                await form.remove_children()
                await form.mount(*widgets)
                self.current, self.fields, self.json_editor = tool, fields, editor
                self._built_for = name
        if not self.holding or (self._held and self._want == self._built_for and not self._opening):
            self._release_later()

    def _form_widgets(self, tool: dict[str, Any]) -> tuple[list, dict[str, Input], TextArea | None]:
        name = tool["name"]
        schema = tool.get("inputSchema") or {}
        fields: dict[str, Input] = {}
        editor: TextArea | None = None
        description = str(tool.get("description") or "").split("### Responses")[0].strip()
        # the tool's name, description and parameters are the environment's text
        widgets: list = [Static(Text.assemble((visible(name), "bold green"), "\n", visible(description)))]
        # every keyword may be of any type: the environment's code writes the schema (a wrong one must not end
        # the TUI)
        props = schema_properties(schema)
        required = required_names(schema)
        if is_flat(schema):
            for pname, prop in props.items():
                kind = prop_type(prop)
                prop = prop if isinstance(prop, dict) else {}
                mark = " *" if pname in required else ""
                hint = prop.get("description") or ""
                hint = hint if isinstance(hint, str) else str(hint)
                if isinstance(prop.get("enum"), list) and prop["enum"]:
                    hint += f" (one of {', '.join(map(str, prop['enum']))})"
                example = first_example(prop)
                example = None if example is _MISSING else example
                widgets.append(Label(Text.assemble((visible(pname), "bold"), visible(f": {kind}"), (mark, "bold red"),
                                                   visible(f"  {hint}") if hint else "")))
                # a text field that keeps every key typed (an integer or number Input would silently drop a "." or
                # a "$": "2.5" sent as 25); the validator marks a value that is not one, the call refuses it
                field = Input(placeholder=visible(f"e.g. {example}" if example is not None else kind), name=pname,
                              classes="arg", validators=[Function(partial(converts, kind=kind), f"not {kind!r}")]
                              if kind in ("integer", "number", "boolean") else None)
                if not getattr(self.app, "cursor_blink", True):
                    field.cursor_blink = False
                fields[pname] = field
                widgets.append(field)
            if not props:
                widgets.append(Static(Text("no arguments", style="dim")))
        else:
            widgets.append(Label("arguments (JSON): this tool has nested parameters"))
            editor = TextArea(json.dumps(skeleton(schema), indent=2), language=None, classes="json-args")
            widgets.append(editor)
        return widgets, fields, editor

    async def _settled(self, widgets) -> None:
        """Wait until each widget has handled every key queued at it (a key reaches its widget's own queue; the
        call or the answer must read what was typed before it, all of it)."""
        done = []
        for widget in widgets:
            if widget.is_attached:
                flag = asyncio.Event()
                widget.call_later(flag.set)
                done.append(flag)
        for flag in done:
            await flag.wait()

    def collect_arguments(self) -> dict[str, Any]:
        schema = self.current.get("inputSchema") or {}
        if not is_flat(schema):
            value = json.loads(self.json_editor.text or "{}")
            if not isinstance(value, dict):
                raise ValueError("the arguments must be a JSON object")
            return value
        return form_arguments(schema, {pname: field.value for pname, field in self.fields.items()})

    # -- actions -------------------------------------------------------------------------------
    async def action_call_tool(self) -> None:
        if self.current is None or self.episode is None or self.finished is not None:
            return
        if self._want != self._built_for:  # a click on Call while the highlighted tool's form is being built
            self.notify("the form of the highlighted tool is still being built: call again", severity="warning")
            return
        await self._settled([*self.fields.values(), *([self.json_editor] if self.json_editor else [])])
        try:
            args = self.collect_arguments()
        except (ValueError, json.JSONDecodeError) as exc:
            self.notify(visible(exc), title="bad arguments", severity="error", markup=False)
            return
        self.policy.queue.put_nowait(AssistantTurn("", [NativeCall(f"call_{uuid.uuid4().hex[:8]}",
                                                                   self.current["name"], json.dumps(args))]))

    async def action_submit_answer(self) -> None:
        if self.episode is None or self.finished is not None:
            return
        box = self.query_one("#answer", Input)
        await self._settled([box])  # ctrl+f is read before the keys typed into the box just before it
        if not box.value.strip() and not box.has_focus:
            self.set_focus(box)  # now: the keys after ctrl+f are the answer
            self.notify("type the final answer, then ctrl+f again (or enter)", timeout=3)
            return
        self.policy.queue.put_nowait(AssistantTurn(box.value.strip() or "(no answer)"))

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "call":
            await self.action_call_tool()
        elif event.button.id == "submit":
            await self.action_submit_answer()

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "answer":
            await self.action_submit_answer()
        elif event.input.has_class("arg"):
            await self.action_call_tool()

    def action_back(self) -> None:
        if self.finished is None and self.episode is not None and not self._confirm_leave:
            self._confirm_leave = True  # the next esc leaves; anything else keeps playing
            self.notify("esc again leaves this episode (it is saved as abandoned, without a verdict); any other "
                        "key keeps playing", title="leave?", severity="warning", timeout=8)
            return
        self.leaving = True
        if self.finished is None and self.episode is not None:
            self.policy.abandon()  # saved with stop reason "abandoned": no final answer, no verdict
        self.app.pop_screen()

    def action_toggle_observation(self) -> None:
        """Fold or unfold the last tool result (a long one is shown folded)."""
        from textual.widgets import Collapsible

        folds = list(self.query_one(Transcript).query(Collapsible))
        if folds:
            folds[-1].collapsed = not folds[-1].collapsed
            folds[-1].scroll_visible()
